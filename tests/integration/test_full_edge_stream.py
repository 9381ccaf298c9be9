"""Edge streams that reach their limits while their hub is away, on real servers: a leaf (domain ``leaf``) with two
streams that keep 100 messages each, one with ``discard: new`` and one with ``discard: old``, each sourced into a
stream of the hub. The hub stops, the site writes 150 more into each, the hub comes back. With ``discard: new`` the
site refuses what does not fit and its writers are told so; with ``discard: old`` it takes everything and drops its
oldest, some the hub never read. Either way the hub catches up by itself, nothing twice, and the counts are exact."""

import json
import time

from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import JetStream, NatsClient

from conftest import run_module

LIMIT = 100
DISCARDS = ("new", "old")


def _state(url, domain, stream):
    with NatsClient({"servers": [url], "timeout": 5.0}) as client:
        return JetStream(client, domain=domain).call("STREAM.INFO.%s" % stream)["state"]


def _write(url, discard, first, count):
    """Publish ``count`` readings into the stream of ``discard``; (acknowledged, the errors of the refused ones)."""
    acked, refused = 0, []
    with NatsClient({"servers": [url], "timeout": 5.0}) as client:
        for number in range(first, first + count):
            reply = json.loads(client.request("%s.temp" % discard, b"%d" % number).decode())
            if reply.get("error"):  # a refusal carries "seq": 0 as well
                refused.append(reply["error"])
            else:
                acked += 1
    return acked, refused


def _settled(url, wanted, timeout=90):
    """The hub's copies' counts once they hold ``wanted`` ({stream: count}), or as they are after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        counts = dict((name, _state(url, "hub", name)["messages"]) for name in wanted)
        if counts == wanted or time.monotonic() > deadline:
            return counts
        time.sleep(0.3)


def test_full_edge_streams_while_the_hub_is_away(hub_and_leaf, start_server):
    hub, leaf = hub_and_leaf["hub"], hub_and_leaf["leaf"]
    copies = dict(("site-%s" % d, 0) for d in DISCARDS)
    with NatsClient({"servers": [leaf], "timeout": 5.0}) as client:
        for discard in DISCARDS:
            JetStream(client, domain="leaf").call("STREAM.CREATE.readings-%s" % discard, {
                "name": "readings-%s" % discard, "subjects": ["%s.>" % discard], "storage": "file",
                "max_msgs": LIMIT, "discard": discard})
    with NatsClient({"servers": [hub], "timeout": 5.0}) as client:
        for discard in DISCARDS:
            JetStream(client, domain="hub").call("STREAM.CREATE.site-%s" % discard, {
                "name": "site-%s" % discard, "storage": "file",
                "sources": [{"name": "readings-%s" % discard, "external": {"api": "$JS.leaf.API"}}]})
    for discard in DISCARDS:
        assert _write(leaf, discard, 1, 50) == (50, [])
    assert _settled(hub, dict((name, 50) for name in copies)) == dict((name, 50) for name in copies)

    hub_and_leaf["hub_server"].stop()
    leaf_server = hub_and_leaf["leaf_server"]
    leaf_server.wait(lambda: leaf_server.get("leafz")["leafnodes"] == 0)
    written = dict((discard, _write(leaf, discard, 51, 150)) for discard in DISCARDS)
    info = run_module("jetstream_info", dict(servers=[leaf], domain="leaf", timeout=3.0))
    assert [row["messages"] for row in info["streams"]] == [LIMIT, LIMIT], info["streams"]

    # discard new: what fits is taken (50), the other 100 refused, each writer told why
    acked, refused = written["new"]
    assert acked == 50 and len(refused) == 100, (acked, len(refused))
    assert {e["err_code"] for e in refused} == {10077} and "maximum messages exceeded" in refused[0]["description"]
    state = _state(leaf, "leaf", "readings-new")
    assert (state["first_seq"], state["last_seq"]) == (1, 100), state
    # discard old: everything is taken; the oldest go, 50 of them never read by the hub (51..100)
    assert written["old"] == (150, [])
    state = _state(leaf, "leaf", "readings-old")
    assert (state["first_seq"], state["last_seq"]) == (101, 200), state

    server = start_server(hub_and_leaf["binary"], hub_and_leaf["hub_conf"], "hub-back", hub_and_leaf["hub_http"])
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    back = time.monotonic()
    wanted = {"site-new": 100, "site-old": 150}
    assert _settled(hub, wanted) == wanted  # caught up by itself
    print("the hub's copies caught up %.1f s after it was back" % (time.monotonic() - back))
    time.sleep(2)
    assert _settled(hub, wanted, timeout=0) == wanted  # and nothing came twice
    report = run_module("jetstream_info", dict(servers=[hub], domain="hub", timeout=3.0, compare_origins=True))
    assert [(r["stream"], r["status"], r["lag"]) for r in report["replication"]] == [
        ("site-new", "ok", 0), ("site-old", "ok", 0)], report["replication"]
