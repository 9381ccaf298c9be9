"""jetstream_backup against real servers: a stream with a durable consumer backed up, deleted and restored with its
messages, its consumer and the consumer's ack floor; a second backup of an unchanged stream writes nothing;
a tampered file and a restore over a stream that holds something else are refused before anything is sent; and
the disaster recovery of an edge site in miniature - its host lost, a new one converged, its stream restored, the
hub's source resuming - with what was restored and what was lost counted."""

import asyncio
import json
import os
import shutil
import stat
import time

import nats
import pytest

from conftest import Server, _js_conf, free_port, jetstream, publish, run_module


@pytest.fixture(scope="module")
def server(nats_binary, tmp_path_factory):
    """One JetStream server (domain 'site') shared by the round-trip tests."""
    binary, version = nats_binary
    tmp = tmp_path_factory.mktemp("backup")
    port, http = free_port(), free_port()
    conf = tmp / "site.conf"
    conf.write_text(_js_conf("site", port, http, tmp / "js", "site"))
    started = Server(binary, str(conf), http)
    try:
        started.wait(lambda: started.get("healthz")["status"] == "ok")
        yield dict(url="nats://127.0.0.1:%d" % port, version=version, tmp=tmp)
    finally:
        started.stop()


def make_stream(url, name, subjects, domain=None):
    with jetstream(url, domain) as js:
        js.call("STREAM.CREATE.%s" % name, {"name": name, "subjects": subjects, "storage": "file"})


def consume_and_ack(url, stream, durable, count):
    """A durable pull consumer that took and acknowledged the first ``count`` messages: its ack floor is ``count``."""
    async def consume():
        nc = await nats.connect(url, allow_reconnect=False, connect_timeout=3)
        try:
            pull = await nc.jetstream().pull_subscribe("", durable=durable, stream=stream)
            for msg in await pull.fetch(count, timeout=5):
                await msg.ack()
            await nc.flush()
        finally:
            await nc.close()
    asyncio.run(consume())
    with jetstream(url) as js:
        deadline = time.monotonic() + 10
        while js.call("CONSUMER.INFO.%s.%s" % (stream, durable))["ack_floor"]["stream_seq"] != count:
            assert time.monotonic() < deadline, "the acks did not arrive"
            time.sleep(0.05)


def stream_info(url, name, domain=None):
    with jetstream(url, domain) as js:
        return js.lookup("STREAM.INFO.%s" % name)


def consumer_info(url, stream, durable):
    with jetstream(url) as js:
        return js.call("CONSUMER.INFO.%s.%s" % (stream, durable))


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_round_trip_with_a_consumer_and_its_ack_floor(server, tmp_path):
    url = server["url"]
    make_stream(url, "ORDERS", ["orders.>"])
    publish(url, "orders.new", 20)
    consume_and_ack(url, "ORDERS", "billing", 7)
    task = dict(servers=[url], timeout=5.0, streams=["ORDERS"], path=str(tmp_path / "backups"))

    predicted = run_module("jetstream_backup", task, check_mode=True)
    assert predicted["changed"] and predicted["streams"][0]["action"] == "written", predicted
    assert not os.path.exists(tmp_path / "backups")
    taken = run_module("jetstream_backup", task, diff=True)
    entry = taken["streams"][0]
    assert taken["changed"] and entry["action"] == "written", taken
    assert (entry["messages"], entry["consumers"], entry["first_seq"], entry["last_seq"]) == (20, 1, 1, 20), entry
    assert taken["diff"]["before"] == {"ORDERS": None} and taken["diff"]["after"]["ORDERS"]["messages"] == 20
    directory = tmp_path / "backups" / "ORDERS"
    assert mode(directory) == 0o700 and mode(tmp_path / "backups") == 0o700
    assert sorted(os.listdir(directory)) == ["manifest.json", "snapshot.s2", "stream.json"]
    assert all(mode(directory / name) == 0o600 for name in os.listdir(directory))
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["consumers"]["billing"]["ack_floor"][1] == 7 and manifest["server_version"] == server["version"]

    # nothing changed since: the same backup stays, byte for byte
    before = (directory / "snapshot.s2").read_bytes()
    again = run_module("jetstream_backup", task)
    assert not again["changed"] and again["streams"][0]["action"] == "unchanged", again
    assert (directory / "snapshot.s2").read_bytes() == before
    assert not run_module("jetstream_backup", task, check_mode=True)["changed"]

    with jetstream(url) as js:
        js.call("STREAM.DELETE.ORDERS")
    restore = dict(task, state="restore")
    predicted = run_module("jetstream_backup", restore, check_mode=True)
    assert predicted["changed"] and predicted["streams"][0]["action"] == "restored", predicted
    assert stream_info(url, "ORDERS") is None
    restored = run_module("jetstream_backup", restore)
    entry = restored["streams"][0]
    assert restored["changed"] and entry["action"] == "restored", restored
    assert (entry["messages"], entry["consumers"], entry["last_seq"]) == (20, 1, 20), entry
    consumer = consumer_info(url, "ORDERS", "billing")
    assert consumer["ack_floor"]["stream_seq"] == 7 and consumer["num_pending"] == 13, consumer
    assert not run_module("jetstream_backup", restore)["changed"]

    # a stream that holds something else is not overwritten unless told
    publish(url, "orders.new", 1)
    refused = run_module("jetstream_backup", restore)
    assert refused.get("failed") and "stream ORDERS exists" in refused["msg"] and "replace" in refused["msg"], refused
    assert stream_info(url, "ORDERS")["state"]["messages"] == 21
    replaced = run_module("jetstream_backup", dict(restore, replace=True))
    assert replaced["changed"] and replaced["streams"][0]["action"] == "replaced", replaced
    assert stream_info(url, "ORDERS")["state"]["messages"] == 20

    # a changed ack floor is a change: the next backup takes a new snapshot
    consume_and_ack(url, "ORDERS", "audit", 2)
    newer = run_module("jetstream_backup", task)
    assert newer["changed"] and newer["streams"][0]["consumers"] == 2, newer


def test_messages_alone_and_a_restore_with_other_replicas_and_placement(server, tmp_path):
    url = server["url"]
    make_stream(url, "VISITS", ["visits.>"])
    publish(url, "visits.seen", 4)
    consume_and_ack(url, "VISITS", "reader", 2)
    task = dict(servers=[url], timeout=5.0, streams=["VISITS"], path=str(tmp_path / "backups"), consumers=False)
    taken = run_module("jetstream_backup", task)
    assert taken["changed"] and taken["streams"][0]["consumers"] == 0, taken
    manifest = json.loads((tmp_path / "backups" / "VISITS" / "manifest.json").read_text())
    assert manifest["consumers"] == {} and manifest["summary"]["consumers"] == 0, manifest
    assert not run_module("jetstream_backup", task)["changed"]  # the consumer's progress is not part of it

    restore = dict(servers=[url], timeout=5.0, streams=["VISITS"], path=str(tmp_path / "backups"), state="restore")
    for bad, wanted in ((dict(replicas=7), "replicas: 7: a stream has 1 to 5 replicas"),
                        (dict(state="backup", replicas=1), "replicas: applies to state=restore only"),
                        (dict(consumers=False), "consumers: applies to state=backup only")):
        refused = run_module("jetstream_backup", dict(restore, **bad))
        assert refused.get("failed") and wanted in refused["msg"], (bad, refused)
    with jetstream(url) as js:
        js.call("STREAM.DELETE.VISITS")
    # the restored stream takes the replicas and placement given (a single server keeps the placement as asked)
    restored = run_module("jetstream_backup", dict(restore, replicas=1, placement={"tags": ["site"], "cluster": ""}))
    entry = restored["streams"][0]
    assert (entry["messages"], entry["consumers"]) == (4, 0), entry
    config = stream_info(url, "VISITS")["config"]
    assert config["num_replicas"] == 1 and config["placement"] == {"tags": ["site"]}, config


def test_a_tampered_backup_is_refused_naming_the_file(server, tmp_path):
    url = server["url"]
    make_stream(url, "EVENTS", ["events.>"])
    publish(url, "events.x", 5)
    task = dict(servers=[url], timeout=5.0, streams=["EVENTS"], path=str(tmp_path / "b"))
    assert run_module("jetstream_backup", task)["changed"]
    with jetstream(url) as js:
        js.call("STREAM.DELETE.EVENTS")
    snapshot = tmp_path / "b" / "EVENTS" / "snapshot.s2"
    data = bytearray(snapshot.read_bytes())
    data[len(data) // 2] ^= 0xFF
    snapshot.write_bytes(bytes(data))
    refused = run_module("jetstream_backup", dict(task, state="restore"))
    assert refused.get("failed") and str(snapshot) in refused["msg"] and "checksum" in refused["msg"], refused
    assert stream_info(url, "EVENTS") is None
    missing = run_module("jetstream_backup", dict(task, state="restore", streams=["NOPE"]))
    assert missing.get("failed") and "stream NOPE" in missing["msg"], missing
    bad = run_module("jetstream_backup", dict(task, streams=["a.b"]))
    assert bad.get("failed") and "streams" in bad["msg"] and "'a.b'" in bad["msg"], bad


def wait_for(predicate, what, timeout=15):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out waiting for %s" % what
        time.sleep(0.1)


def hub_messages(url):
    return (stream_info(url, "AGG", "hub") or {}).get("state", {}).get("messages")


def test_an_edge_host_lost_and_recovered_from_its_backup(hub_and_leaf, start_server, tmp_path):
    """A site's only host is lost with its store after a backup; a new host with the same configuration gets the
    backup, and the hub's aggregate, named in ``copies``, reads only what comes after it. Counts: 10 in the
    backup, 5 published after it (lost at the site, held by the hub), 8 published after the restore."""
    newest = tuple(int(part) for part in hub_and_leaf["version"].split("-")[0].split(".")[:2]) >= (2, 15)
    hub, edge = hub_and_leaf["hub"], hub_and_leaf["leaf"]
    make_stream(edge, "SITE", ["site.>"], "leaf")
    with jetstream(hub, "hub") as js:
        js.call("STREAM.CREATE.AGG", {"name": "AGG", "storage": "file", "sources": [
            {"name": "SITE", "external": {"api": "$JS.leaf.API", "deliver": ""}}]})
    publish(edge, "site.reading", 10, b"before backup")
    wait_for(lambda: hub_messages(hub) == 10, "the hub to source 10 messages")
    backups = str(tmp_path / "site-backups")
    taken = run_module("jetstream_backup", dict(servers=[edge], domain="leaf", streams=["SITE"], path=backups))
    assert taken["streams"][0]["messages"] == 10, taken
    publish(edge, "site.reading", 5, b"after backup")
    wait_for(lambda: hub_messages(hub) == 15, "the hub to source 15 messages")

    # the host is lost with its store; a new host is converged with the same configuration
    hub_and_leaf["leaf_server"].stop()
    shutil.rmtree(tmp_path / "leaf-js")
    conf = (tmp_path / "leaf.conf").read_text()
    new_edge = start_server(hub_and_leaf["binary"], conf, "leaf-new", hub_and_leaf["leaf_server"].http_port)
    new_edge.wait(lambda: new_edge.get("leafz")["leafnodes"] == 1)
    new_edge.wait(lambda: new_edge.get("healthz")["status"] == "ok")

    restore = dict(servers=[edge], domain="leaf", state="restore", path=backups,
                   copies=[{"stream": "AGG", "domain": "hub"}])
    refused = run_module("jetstream_backup", dict(restore, copies=[{"stream": "NOPE", "domain": "hub"}]))
    assert refused.get("failed") and "copies[0]: stream NOPE in domain hub does not exist" in refused["msg"], refused
    predicted = run_module("jetstream_backup", restore, check_mode=True)
    copies = predicted["streams"][0]["copies"]
    assert [dict((k, v) for k, v in copy.items() if k != "warning") for copy in copies] == [
        dict(stream="AGG", domain="hub", start_seq=11, changed=True)], predicted
    assert ("warning" in copies[0]) != newest, copies
    with jetstream(hub, "hub") as js:
        assert "opt_start_seq" not in js.call("STREAM.INFO.AGG")["config"]["sources"][0]  # check mode changed nothing
    restored = run_module("jetstream_backup", restore)
    entry = restored["streams"][0]
    assert restored["changed"] and entry["action"] == "restored", restored
    lost = 15 - entry["messages"]
    assert (entry["messages"], entry["last_seq"], lost) == (10, 10, 5), entry
    assert bool(restored.get("warnings")) != newest, restored
    with jetstream(hub, "hub") as js:
        assert js.call("STREAM.INFO.AGG")["config"]["sources"][0]["opt_start_seq"] == 11

    publish(edge, "site.reading", 8, b"after restore")
    # 2.15 and newer: the hub's source notices the new stream (within about 30 s: its source consumer went with the
    # old host) and reads it from sequence 11 - the 8 new messages, none of the backup's a second time.
    # Older servers go on after sequence 15, the last they read from the lost stream: the first 5 new are not copied.
    expected = {"before backup": 10, "after backup": 5, "after restore": 8 if newest else 3}
    wait_for(lambda: hub_messages(hub) == sum(expected.values()), "the hub's source to resume", timeout=60)
    time.sleep(2)  # nothing more comes
    with jetstream(hub, "hub") as js:
        held = [data.rsplit(b" ", 1)[0] for _subject, _headers, data, _seq in
                js.client.read_stream(js.prefix, "AGG", "site.>")]
    counts = dict((text.decode(), held.count(text)) for text in sorted(set(held)))
    print("\nrestored on the edge %d (up to the backup), lost on the edge %d (published after it; the hub holds "
          "them), the hub holds %s" % (entry["messages"], lost, counts))
    assert counts == expected, counts
    assert stream_info(edge, "SITE", "leaf")["state"]["messages"] == 18
