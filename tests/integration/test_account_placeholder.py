"""An account a server knows only from its routes, on three real clustered servers in
operator mode with the full resolver.

A client of an account connects to one server; its subscriptions reach the others over the
routes, and a server that has not loaded the account yet keeps a placeholder for it (no JWT,
no JetStream). When that server is the JetStream meta leader, the account's JetStream API
answers 10039, "JetStream not enabled for account", until a client of the account connects
to it directly. This is what left a first converge of the nine-host lab failing in its
streams stage. The modules' client then connects once to each server it was given and asks
again; this test shows the failure without that and its absence with it."""

import json
import time

import pytest

from conftest import run_module
from test_cross_region import distinct_free_ports

NAMES = ("n1", "n2", "n3")


def conf(name, ports, tmp_path, operator):
    routes = ", ".join('"nats-route://127.0.0.1:%d"' % ports[other]["cluster"] for other in NAMES if other != name)
    return "\n".join([
        'server_name: "%s"' % name,
        'listen: "127.0.0.1:%d"' % ports[name]["client"],
        'http: "127.0.0.1:%d"' % ports[name]["http"],
        'jetstream { store_dir: "%s", domain: "hub", max_memory_store: 33554432, max_file_store: 268435456 }' % (tmp_path / name),
        'cluster { name: "c", listen: "127.0.0.1:%d", routes: [%s] }' % (ports[name]["cluster"], routes),
        'operator: "%s"' % operator["operator_jwt_path"],
        'system_account: "%s"' % operator["system_account_id"],
        'resolver: { type: full, dir: "%s", allow_delete: false, interval: "2m" }' % (tmp_path / (name + "-jwt")),
        'resolver_preload: { %s: "%s" }' % (operator["system_account_id"], operator["system_account_jwt"]),
    ]) + "\n"


def url(ports, name):
    return "nats://127.0.0.1:%d" % ports[name]["client"]


def test_the_client_makes_every_server_load_the_account(nats_binary, start_server, tmp_path):
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import (
        JetStream, NatsClient, NatsClientError)

    binary, version = nats_binary
    base = dict(store_dir=str(tmp_path / "stores"), keys_dir=str(tmp_path / "keys"), operator="OP")
    operator = run_module("nsc_operator", dict(base, signing_key=True))
    assert not operator.get("failed"), operator
    free = distinct_free_ports(9)
    ports = dict((name, dict(client=free.pop(), http=free.pop(), cluster=free.pop())) for name in NAMES)
    servers = dict((name, start_server(binary, conf(name, ports, tmp_path, operator), name, ports[name]["http"]))
                   for name in NAMES)

    def leader():
        meta = (servers["n1"].get("jsz") or {}).get("meta_cluster") or {}
        return meta.get("leader")

    for server in servers.values():
        server.wait(lambda server=server: server.get("healthz").get("status") == "ok", timeout=60)
    meta_leader = servers["n1"].wait(leader, timeout=60)
    other, third = [name for name in NAMES if name != meta_leader]

    # every server gets each JetStream API request and loads the account as it answers, so the
    # placeholder is gone after any request; what the client's connects do shows on a server
    # before any request: the third, which only the routes told of the account
    plain = run_module("nsc_account", dict(base, name="PLAIN", push=True, servers=[url(ports, other)],
                                           expected_servers=3))
    assert not plain.get("failed"), plain
    user = run_module("nsc_user", dict(base, account="PLAIN", name="plain"))
    assert not user.get("failed"), user

    def detail():
        return servers[third].get("accountz?acc=%s" % plain["account_id"]).get("account_detail") or {}

    with NatsClient(dict(creds=user["creds_file"], timeout=5.0, servers=[url(ports, other)])) as client:
        try:  # a first request subscribes to the client's inbox: the subscription crosses the routes
            client.request("probe.nobody", timeout=0.5)
        except NatsClientError:
            pass
        try:
            servers[third].wait(lambda: detail() and not detail().get("jwt"), timeout=10)
        except AssertionError:
            pytest.skip("nats-server %s loads the account on its routes' first subscription: no placeholder" % version)
        time.sleep(1)
        assert not detail().get("jwt"), "the placeholder went away by itself: %s" % json.dumps(detail())[:300]
        client.servers = [url(ports, name) for name in NAMES] + ["nats://127.0.0.1:%d" % distinct_free_ports(1)[0]]
        assert client.register_account_everywhere()  # one server down changes nothing
        loaded = detail()
        assert loaded.get("jwt") and not loaded.get("expired"), json.dumps(loaded)[:500]

    # an account with JetStream, through the same path, works as before
    app = run_module("nsc_account", dict(base, name="APP", jetstream=dict(disk_storage="64MiB", mem_storage="8MiB"),
                                         push=True, servers=[url(ports, other)], expected_servers=3))
    assert not app.get("failed"), app
    user = run_module("nsc_user", dict(base, account="APP", name="app"))
    assert not user.get("failed"), user
    with NatsClient(dict(creds=user["creds_file"], timeout=5.0, servers=[url(ports, name) for name in NAMES])) as client:
        js = JetStream(client, domain="hub")
        created = js.call("STREAM.CREATE.orders", dict(name="orders", subjects=["orders"], num_replicas=3))
        assert created["config"]["name"] == "orders", created
