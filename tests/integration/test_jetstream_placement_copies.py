"""placement.preferred and the start and filter of bucket copies, against real servers.

The preferred server: on three clustered servers (domain ``hub``) a stream, a key-value bucket and an object store,
each of three replicas, end up with their leader on the server they prefer; a second run changes nothing; a leader
moved away is predicted in check mode (nothing sent) and moved back by a run; the server's config never holds the
preferred server (nats-server refuses it there). On Debian's 2.9.10 the option is refused before anything is sent,
naming it and the release it needs.

Bucket copies: a hub bucket's keys copied into other buckets from a sequence on, and only those under a key pattern,
checked key by key; a second run unchanged; check mode predicts; a mirror's filter cannot change, a source's can."""

import base64
import time

import pytest

from conftest import _js_conf, free_port, jetstream, run_module
from test_jetstream_kv import kv_get
from test_nsc_exports import wait_for


def _older_than(version, release):
    return tuple(int(part) for part in version.split(".")[:2]) < release


@pytest.fixture
def hub_cluster(nats_binary, start_server, tmp_path):
    """Three clustered JetStream servers, hub-1 to hub-3, in domain ``hub`` (one server on a release before 2.11,
    where the option is refused before anything is sent)."""
    binary, version = nats_binary
    count = 1 if _older_than(version, (2, 11)) else 3
    ports = [dict(client=free_port(), http=free_port(), cluster=free_port()) for _number in range(count)]
    servers = [start_server(binary, _js_conf("hub-%d" % (n + 1), p["client"], p["http"], tmp_path / ("hub-%d" % n),
                                             "hub", cluster=(p["cluster"], [q["cluster"] for q in ports])
                                             if count > 1 else None), "hub-%d" % (n + 1), p["http"])
               for n, p in enumerate(ports)]
    for server in servers:
        server.wait(lambda server=server: server.get("healthz")["status"] == "ok", 60)
    yield dict(urls=["nats://127.0.0.1:%d" % p["client"] for p in ports], version=version, servers=servers)


def _info(url, stream):
    """The stream's info; asked again while a new leader is elected (only a leader answers)."""
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import NatsClientError

    for attempt in range(3):
        try:
            with jetstream(url, "hub") as js:
                return js.call("STREAM.INFO.%s" % stream)
        except NatsClientError:
            if attempt == 2:
                raise


def _leader(url, stream):
    return (_info(url, stream).get("cluster") or {}).get("leader")


def _move(url, stream, to):
    with jetstream(url, "hub") as js:
        js.call("STREAM.LEADER.STEPDOWN.%s" % stream, {"placement": {"preferred": to}})
    wait_for(lambda: _leader(url, stream) == to)


def _stepdowns(result):
    return [a for a in result["actions"] if ".STREAM.LEADER.STEPDOWN." in a["subject"]]


def test_the_leader_goes_to_the_preferred_server_and_stays(hub_cluster):
    url = hub_cluster["urls"][0]
    base = dict(servers=hub_cluster["urls"], domain="hub", timeout=5.0)
    if len(hub_cluster["urls"]) == 1:
        for module, args in (("jetstream_stream", dict(name="ORDERS", subjects=["orders.>"])),
                             ("jetstream_kv", dict(name="config")), ("jetstream_object_store", dict(name="files"))):
            refused = run_module(module, dict(base, placement={"preferred": "hub-1"}, **args))
            assert refused.get("failed") and refused["actions"] == [], refused
            assert "placement.preferred needs nats-server 2.11 or later (the server is 2.9)" in refused["msg"], refused
        with jetstream(url, "hub") as js:
            assert not js.call("STREAM.NAMES").get("streams")
        return

    stream = dict(base, name="ORDERS", subjects=["orders.>"], replicas=3, placement={"preferred": "hub-2"})
    made = run_module("jetstream_stream", stream)
    assert made["changed"] and made["action"] == "create" and not made.get("failed"), made
    assert _leader(url, "ORDERS") == "hub-2", made
    assert "preferred" not in (_info(url, "ORDERS")["config"].get("placement") or {})
    again = run_module("jetstream_stream", stream)
    assert not again["changed"] and again["actions"] == [], again

    # moved away (a restart, an operator): check mode predicts the move and sends nothing; a run moves it back
    _move(url, "ORDERS", "hub-3")
    predicted = run_module("jetstream_stream", stream, check_mode=True)
    assert predicted["changed"] and predicted["action"] == "none", predicted
    assert predicted["leader"] == {"before": "hub-3", "after": "hub-2"} and len(_stepdowns(predicted)) == 1, predicted
    time.sleep(1)
    assert _leader(url, "ORDERS") == "hub-3"
    back = run_module("jetstream_stream", stream)
    assert back["changed"] and _stepdowns(back) and _leader(url, "ORDERS") == "hub-2", back
    assert not run_module("jetstream_stream", stream)["changed"]

    # another preferred server is a leader move, not a config update: nothing but the step-down is sent
    other = run_module("jetstream_stream", dict(stream, placement={"preferred": "hub-1"}))
    assert other["changed"] and [a["subject"].split(".")[4] for a in other["actions"]] == ["LEADER"], other
    assert _leader(url, "ORDERS") == "hub-1"

    # a server that holds no replica is refused before anything is sent
    single = dict(base, name="SINGLE", subjects=["single.>"], replicas=1)
    assert run_module("jetstream_stream", single)["changed"]
    holder = _leader(url, "SINGLE")
    elsewhere = [name for name in ("hub-1", "hub-2", "hub-3") if name != holder][0]
    refused = run_module("jetstream_stream", dict(single, placement={"preferred": elsewhere}))
    assert refused.get("failed") and refused["actions"] == [] and "holds no replica" in refused["msg"], refused
    assert holder in refused["msg"], refused
    assert not run_module("jetstream_stream", dict(single, placement={"preferred": holder}))["changed"]

    # buckets and stores take it the same way
    bucket = dict(base, name="config", replicas=3, placement={"preferred": "hub-3"}, entries={"a": "1"})
    assert run_module("jetstream_kv", bucket)["changed"]
    assert _leader(url, "KV_config") == "hub-3"
    assert not run_module("jetstream_kv", bucket)["changed"]
    moved = run_module("jetstream_kv", dict(bucket, placement={"preferred": "hub-1"}))
    assert moved["changed"] and moved["leader"] == {"before": "hub-3", "after": "hub-1"} and moved["put"] == [], moved
    in_bulk = run_module("jetstream_kv", dict(base, buckets=[dict(
        (k, v) for k, v in bucket.items() if k not in base)]))
    assert in_bulk["buckets"][0]["leader"] == {"before": "hub-1", "after": "hub-3"}, in_bulk
    store = dict(base, name="files", replicas=3, placement={"preferred": "hub-1"})
    assert run_module("jetstream_object_store", store)["changed"]
    assert _leader(url, "OBJ_files") == "hub-1"
    assert not run_module("jetstream_object_store", store)["changed"]
    moved = run_module("jetstream_object_store", dict(store, placement={"preferred": "hub-2"}))
    assert moved["changed"] and moved["leader"] == {"before": "hub-1", "after": "hub-2"}, moved


def _keys(url, stream):
    """{subject: data} of the last message of every subject a bucket's stream holds."""
    with jetstream(url, "hub") as js:
        state = js.call("STREAM.INFO.%s" % stream, {"subjects_filter": ">"})["state"]
        found = {}
        for subject in sorted(state.get("subjects") or {}):
            message = js.call("STREAM.MSG.GET.%s" % stream, {"last_by_subj": subject})["message"]
            found[subject] = base64.b64decode(message.get("data") or "").decode()
        return found


def _wait_keys(url, stream, wanted):
    """The keys once they are ``wanted``, or as they are after 15 s."""
    try:
        wait_for(lambda: _keys(url, stream) == wanted)
    except AssertionError:
        pass
    return _keys(url, stream)


def test_bucket_copies_start_and_filter(nats_binary, start_server, tmp_path):
    binary, version = nats_binary
    port, http = free_port(), free_port()
    server = start_server(binary, _js_conf("hub-1", port, http, tmp_path / "js", "hub"), "hub-1", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    url = "nats://127.0.0.1:%d" % port
    base = dict(servers=[url], domain="hub", timeout=5.0)
    hub = dict(base, name="status", entries={"site.a.up": "yes", "site.b.up": "no", "site.a.load": "3",
                                             "fleet": "v1"})
    assert run_module("jetstream_kv", hub)["changed"]
    with jetstream(url, "hub") as js:  # the keys are written in their order: sequences 1 to 4
        assert [js.call("STREAM.MSG.GET.KV_status", {"seq": seq})["message"]["subject"] for seq in (1, 2, 3, 4)] == [
            "$KV.status.fleet", "$KV.status.site.a.load", "$KV.status.site.a.up", "$KV.status.site.b.up"]

    if _older_than(version, (2, 10)):
        refused = run_module("jetstream_kv", dict(base, name="ups", sources=[{"name": "status",
                                                                             "filter_subject": "site.*.up"}]))
        assert refused.get("failed") and "sources.subject_transforms needs nats-server 2.10" in refused["msg"], refused
        assert refused["actions"] == [], refused
    else:
        # a source of another name: the key filter becomes the transform that moves the keys under this bucket
        ups = dict(base, name="ups", sources=[{"name": "status", "filter_subject": "site.*.up"}])
        predicted = run_module("jetstream_kv", ups, check_mode=True)
        assert predicted["changed"] and predicted["bucket"] == {}, predicted
        made = run_module("jetstream_kv", ups)
        assert made["changed"], made
        source = made["bucket"]["config"]["sources"][0]
        assert source["subject_transforms"] == [
            {"src": "$KV.status.site.*.up", "dest": "$KV.ups.site.{{wildcard(1)}}.up"}]
        assert "filter_subject" not in source or not source["filter_subject"], source
        assert _wait_keys(url, "KV_ups", {"$KV.ups.site.a.up": "yes", "$KV.ups.site.b.up": "no"}) == {
            "$KV.ups.site.a.up": "yes", "$KV.ups.site.b.up": "no"}
        assert kv_get(url, "ups", "site.a.up", "hub") == b"yes"
        assert not run_module("jetstream_kv", ups)["changed"]

        # from sequence 2 on, every key
        late = dict(base, name="late", sources=[{"name": "status", "start_seq": 2}])
        assert run_module("jetstream_kv", late)["changed"]
        wanted = {"$KV.late.site.a.load": "3", "$KV.late.site.a.up": "yes", "$KV.late.site.b.up": "no"}
        assert _wait_keys(url, "KV_late", wanted) == wanted
        assert not run_module("jetstream_kv", late)["changed"]

        # a source's filter can change on a live bucket (an update); check mode predicts it
        narrower = dict(ups, sources=[{"name": "status", "filter_subject": "$KV.status.site.a.>"}])
        predicted = run_module("jetstream_kv", narrower, check_mode=True)
        assert predicted["changed"] and predicted["bucket"]["config"]["sources"][0]["subject_transforms"][0][
            "src"] == "$KV.status.site.*.up", predicted
        updated = run_module("jetstream_kv", narrower)
        assert updated["changed"] and [a["subject"].split(".")[4] for a in updated["actions"]] == ["UPDATE"], updated
        assert not run_module("jetstream_kv", narrower)["changed"]

    # a mirror (keys as its origin's) of the keys under site.a, from sequence 3 on: site.a.up only
    mirror = dict(base, name="copy", mirror={"name": "status", "filter_subject": "site.a.>", "start_seq": 3})
    predicted = run_module("jetstream_kv", mirror, check_mode=True)
    assert predicted["changed"] and not predicted.get("failed"), predicted
    made = run_module("jetstream_kv", mirror)
    assert made["changed"] and made["bucket"]["config"]["mirror"]["filter_subject"] == "$KV.status.site.a.>", made
    assert _wait_keys(url, "KV_copy", {"$KV.status.site.a.up": "yes"}) == {"$KV.status.site.a.up": "yes"}
    assert not run_module("jetstream_kv", mirror)["changed"]
    refused = run_module("jetstream_kv", dict(mirror, mirror={"name": "status", "filter_subject": "site.>"}))
    assert refused.get("failed") and "mirror cannot change" in refused["msg"] and refused["actions"] == [], refused
