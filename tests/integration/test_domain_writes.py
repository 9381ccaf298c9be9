"""Key-value entries and objects written through one server land in the JetStream domain the task names: a hub
with two leaf domains, each holding a bucket and an object store of the same name, written through the hub. And
a write no stream takes is refused, not counted as done."""

import time

import pytest

from conftest import _js_conf, free_port, run_module
from test_jetstream_kv import kv_get

DOMAINS = ("hub", "spoke-1", "spoke-2")


@pytest.fixture
def hub_and_spokes(nats_binary, start_server, tmp_path):
    """A hub (domain ``hub``) and two leaf servers (``spoke-1``, ``spoke-2``), each leaf linked to the hub."""
    binary, _version = nats_binary
    leaf_port = free_port()
    ports = dict((domain, (free_port(), free_port())) for domain in DOMAINS)
    servers = {}
    for domain in DOMAINS:
        port, http = ports[domain]
        conf = _js_conf(domain, port, http, tmp_path / domain, domain, leaf_listen=leaf_port if domain == "hub" else None,
                        remote=None if domain == "hub" else leaf_port)
        servers[domain] = start_server(binary, conf, domain, http)
    servers["hub"].wait(lambda: servers["hub"].get("leafz")["leafnodes"] == 2)
    for server in servers.values():
        server.wait(lambda server=server: server.get("healthz")["status"] == "ok")
    return dict((domain, "nats://127.0.0.1:%d" % ports[domain][0]) for domain in DOMAINS)


def test_entries_written_through_the_hub_land_in_the_named_domain(hub_and_spokes):
    hub = hub_and_spokes["hub"]
    for domain in DOMAINS:
        first = run_module("jetstream_kv", dict(servers=[hub], domain=domain, name="cfg", timeout=3.0,
                                                entries={"where": "%s-value" % domain}))
        assert first.get("changed") and not first.get("failed"), first
    for domain in DOMAINS:
        assert kv_get(hub, "cfg", "where", domain=domain) == b"%s-value" % domain.encode()
        # each site's own server reads the same value
        assert kv_get(hub_and_spokes[domain], "cfg", "where") == b"%s-value" % domain.encode()
    # a second run changes nothing, in any domain
    for domain in DOMAINS:
        again = run_module("jetstream_kv", dict(servers=[hub], domain=domain, name="cfg", timeout=3.0,
                                                entries={"where": "%s-value" % domain}))
        assert not again.get("changed") and not again.get("failed"), again
    # a change aimed at spoke-2 changes spoke-2's bucket only
    changed = run_module("jetstream_kv", dict(servers=[hub], domain="spoke-2", name="cfg", timeout=3.0,
                                              entries={"where": "moved"}))
    assert changed.get("changed") and changed["put"] == ["where"], changed
    assert [kv_get(hub, "cfg", "where", domain=domain) for domain in DOMAINS] == [
        b"hub-value", b"spoke-1-value", b"moved"]


def test_objects_are_written_through_their_own_domain_s_servers_and_refused_through_another(
        hub_and_spokes, tmp_path):
    """The servers carry a bucket's writes to another domain, not an object's: objects go through a server of
    the store's domain, and a task aimed at another domain through the hub is refused before anything changes.
    Each domain's store has a name of its own: servers that share an account over a leaf link hand an object
    write to every store of that name (see jetstream_object_store's notes)."""
    hub = hub_and_spokes["hub"]
    for domain in DOMAINS:
        store, content = "fw-%s" % domain, "firmware of %s " % domain * 20000
        refused = run_module("jetstream_object_store", dict(servers=[hub], domain=domain, name=store, timeout=3.0,
                                                            objects=[{"name": "gw.bin", "content": content}]))
        if domain != "hub":
            assert refused.get("failed") and not refused.get("changed"), refused
            assert refused["msg"] == ("object store %r: objects are written through a server of its domain %r, and "
                                      "this task is connected to a server of domain 'hub'; name that domain's servers "
                                      "in servers" % (store, domain)), refused["msg"]
            assert run_module("jetstream_info", dict(servers=[hub], domain=domain, timeout=3.0)).get(
                "streams") == [], "nothing was created in %s" % domain
        else:
            assert refused.get("changed") and refused["uploaded"] == ["gw.bin"], refused.get("msg")
        site = dict(servers=[hub_and_spokes[domain]], domain=domain, name=store, timeout=3.0,
                    objects=[{"name": "gw.bin", "content": content}])
        stored = run_module("jetstream_object_store", site)
        assert not stored.get("failed") and stored.get("changed") == (domain != "hub"), stored.get("msg")
        assert not run_module("jetstream_object_store", site).get("changed")
        dest = tmp_path / ("%s.bin" % domain)
        fetched = run_module("jetstream_object_fetch", dict(servers=[hub], domain=domain, bucket=store,
                                                            name="gw.bin", dest=str(dest), timeout=3.0))
        assert not fetched.get("failed"), fetched
        assert dest.read_text() == content


def test_a_write_no_stream_takes_is_refused(hub_and_spokes):
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import (
        NO_STREAM_RETRIES, JetStream, NatsClient, NatsClientError, NoRespondersError)

    hub = hub_and_spokes["hub"]
    assert run_module("jetstream_kv", dict(servers=[hub], domain="spoke-1", name="cfg", timeout=3.0)).get("changed")
    with NatsClient({"servers": [hub], "timeout": 3.0}) as client:
        js = JetStream(client, domain="spoke-1")
        # a bucket this domain does not have: nothing acknowledges the write, and nothing is counted as written
        with pytest.raises(NatsClientError, match=r"bucket 'nope': no stream acknowledged the messages for stream "
                                                  r"KV_nope in domain 'spoke-1': 1 requests got no reply within 3"):
            client.publish_into("KV_nope", [("$KV.nope.k", b"v", None)], js.prefix, js.domain, what="bucket 'nope'")
        # another stream stores it: refused by name
        with pytest.raises(NatsClientError, match=r"was stored by stream 'KV_cfg' in domain 'spoke-1', not by 'KV_other'"):
            client.publish_into("KV_other", [("$KV.cfg.k", b"v", None)], js.prefix, js.domain)
        acks = client.publish_into("KV_cfg", [("$KV.cfg.k", b"v", None)], js.prefix, js.domain)
        assert [(ack["stream"], ack["domain"]) for ack in acks] == [("KV_cfg", "spoke-1")]
    # in the connected server's domain, nothing listening answers at once (503): sent again while a stream may be
    # between leaders, then refused
    with NatsClient({"servers": [hub_and_spokes["spoke-2"]], "timeout": 3.0}) as client:
        started = time.monotonic()
        with pytest.raises(NoRespondersError, match=r"^bucket 'nope': no stream takes \$KV\.nope\.k \(1 of the "
                                                    r"messages for stream KV_nope in the local domain\)"):
            client.publish_into("KV_nope", [("$KV.nope.k", b"v", None)], what="bucket 'nope'")
        assert time.monotonic() - started >= sum(NO_STREAM_RETRIES)
