"""jetstream_kv and jetstream_object_store given input that cannot be right, against a hub and a leaf with their
own JetStream domains (each nats-server the suite knows): a read-only copy promoted only with promote, options
no server can use refused before anything is sent, values stored as the docs say, a max_bytes below what a bucket
holds refused, and concurrent uploads of one object leaving no chunk behind. Each test is named after the promise
of the modules' DOCUMENTATION it checks."""

import asyncio
import concurrent.futures
import hashlib
import os
import threading

import nats
import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import buckets as kv
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import object_transfer as objects
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import JetStream, NatsClient
from conftest import jetstream, run_module
from test_jetstream_objects import nats_py_get

KV = "jetstream_kv"
OBJECTS = "jetstream_object_store"


def sites(hub_and_leaf):
    return (dict(servers=[hub_and_leaf["hub"]], domain="hub", timeout=5.0),
            dict(servers=[hub_and_leaf["leaf"]], domain="leaf", timeout=5.0))


def stream_info(url, domain, name):
    with jetstream(url, domain) as js:
        return js.lookup("STREAM.INFO.%s" % name)


def stream_names(url, domain):
    with jetstream(url, domain) as js:
        return sorted(js.call("STREAM.NAMES").get("streams") or [])


def version(hub_and_leaf):
    return tuple(int(part) for part in hub_and_leaf["version"].split(".")[:3])


def wait_for(server, predicate):
    server.wait(predicate, timeout=30)


def kv_value(url, bucket, key, domain):
    async def read():
        nc = await nats.connect(url, allow_reconnect=False, connect_timeout=3)
        try:
            return (await (await nc.jetstream(domain=domain).key_value(bucket)).get(key)).value
        finally:
            await nc.close()
    return asyncio.run(read())


# -- a copy is only ever promoted with promote ---------------------------------------------------------------------

@pytest.mark.parametrize("kind", [KV, OBJECTS, "bulk"])
def test_a_copy_is_promoted_only_when_the_task_sets_promote(hub_and_leaf, kind):
    hub, leaf = sites(hub_and_leaf)
    module, stream = (OBJECTS, "OBJ_cfg") if kind == OBJECTS else (KV, "KV_cfg")
    origin = dict(hub, name="cfg", **({"objects": [{"name": "a", "content": "x"}]} if kind == OBJECTS
                                      else {"entries": {"mode": "edge"}}))
    assert run_module(module, origin)["changed"]
    copy = dict(leaf, name="cfg", mirror={"name": "cfg", "domain": "hub"})
    assert run_module(module, copy)["changed"]
    wait_for(hub_and_leaf["leaf_server"], lambda: stream_info(hub_and_leaf["leaf"], "leaf", stream)["state"][
        "messages"] >= 1)
    before = stream_info(hub_and_leaf["leaf"], "leaf", stream)

    plain = dict(leaf, name="cfg", description="the site's own")
    if kind == "bulk":
        plain = dict(leaf, buckets=[{"name": "other"}, {"name": "cfg", "description": "the site's own"}])
    for check_mode in (True, False):
        refused = run_module(module, plain, check_mode=check_mode)
        assert refused.get("failed") and not refused["changed"] and refused["actions"] == [], refused
        label = "object store" if kind == OBJECTS else "key-value bucket"
        store = "store" if kind == OBJECTS else "bucket"
        assert ("%s 'cfg' in domain 'leaf' is a read-only copy of %s 'cfg' in domain 'hub', and this task leaves out "
                "mirror" % (label, store)) in refused["msg"], refused
        assert "set mirror: {name: cfg, domain: hub}; to promote it, set promote: true" in refused["msg"], refused
    after = stream_info(hub_and_leaf["leaf"], "leaf", stream)
    assert after["config"] == before["config"] and after["config"]["mirror"]["name"] == stream
    assert "KV_other" not in stream_names(hub_and_leaf["leaf"], "leaf")  # nothing of the run was sent

    promote = dict(plain, promote=True) if kind != "bulk" else dict(leaf, buckets=[
        {"name": "cfg", "description": "the site's own", "promote": True}])
    promoted = run_module(module, promote)
    if version(hub_and_leaf) >= (2, 12, 0):
        assert promoted["changed"] and not promoted.get("failed"), promoted
        live = stream_info(hub_and_leaf["leaf"], "leaf", stream)
        assert not live["config"].get("mirror") and live["config"]["subjects"], live
        assert live["config"]["description"] == "the site's own"
        again = run_module(module, promote)
        assert not again["changed"] and again["actions"] == [], again
        # for good: it cannot become a copy again
        back = run_module(module, copy)
        assert back.get("failed") and "an existing stream cannot become a mirror" in back["msg"], back
    else:
        assert promoted.get("failed") and promoted["actions"] == [], promoted
        assert "promoting a mirror needs 2.12 or later" in promoted["msg"], promoted
        assert stream_info(hub_and_leaf["leaf"], "leaf", stream)["config"]["mirror"]["name"] == stream


def test_promote_is_not_with_mirror_and_changes_nothing_on_a_bucket_of_its_own(hub_and_leaf):
    hub, _leaf = sites(hub_and_leaf)
    both = run_module(KV, dict(hub, name="cfg", mirror={"name": "cfg", "domain": "leaf"}, promote=True))
    assert both.get("failed") and both["actions"] == [] and "bucket 'cfg': promote makes a copy a bucket of its own" \
        in both["msg"], both
    made = run_module(KV, dict(hub, name="cfg", promote=True))
    assert made["changed"] and not made.get("failed"), made
    assert not run_module(KV, dict(hub, name="cfg", promote=True))["changed"]
    assert not run_module(KV, dict(hub, name="cfg"))["changed"]


# -- every option, key and value is checked before anything is sent ------------------------------------------------

BAD = [
    (KV, dict(name="cfg", replicas=0), "bucket 'cfg': replicas: 0; use 1 to 5"),
    (KV, dict(name="cfg", replicas=True), "bucket 'cfg': replicas: True; use 1 to 5"),
    (OBJECTS, dict(name="cfg", replicas=0), "bucket 'cfg': replicas: 0; use 1 to 5"),
    (KV, dict(name="cfg", history=True), "bucket 'cfg': history: True; a key keeps 1 to 64 values"),
    (KV, dict(name="cfg", ttl="50ms"), "bucket 'cfg': ttl: '50ms': a value lives at least 100ms"),
    (OBJECTS, dict(name="cfg", ttl="50ms"), "bucket 'cfg': ttl: '50ms': an object lives at least 100ms"),
    (KV, dict(name="cfg", max_value_size="3GiB"), "bucket 'cfg': max_value_size: '3GiB' is larger than a server"),
    (KV, dict(name="cfg", max_bytes="lots"), "bucket 'cfg': max_bytes: 'lots' is not a size"),
    (KV, dict(name="cfg", entries={"gone": None}), "bucket 'cfg': entries.gone: null is not a value"),
    (KV, dict(name="cfg", entries={"k" * 1025: "x"}), "bucket 'cfg': entries: a key of 1025 characters is too long"),
    (KV, dict(name="cfg", sources=[{"name": "cfg"}]), "bucket 'cfg': sources[0]: names this bucket itself"),
    (KV, dict(name="cfg", mirror={"name": "cfg", "domain": "hub"}), "bucket 'cfg': mirror: names this bucket itself"),
    (OBJECTS, dict(name="cfg", mirror={"name": "cfg"}), "bucket 'cfg': mirror: names this bucket itself"),
    (OBJECTS, dict(name="cfg", objects=[{"name": "x" * 5000, "content": "y"}]),
     "bucket 'cfg': objects[0].name: a name of 5000 bytes is too long"),
    (OBJECTS, dict(name="cfg", objects=[{"name": "a", "content": "y", "metadata": {"board": {"rev": 2}}}]),
     "bucket 'cfg': objects[0] (a).metadata.board: a mapping is not text"),
    (OBJECTS, dict(name="cfg", objects=[{"name": "a", "content": "y", "metadata": {"board": None}}]),
     "bucket 'cfg': objects[0] (a).metadata.board: null is not text"),
]


@pytest.mark.parametrize("module, bad, message", BAD,
                         ids=["%s-%d" % (m.split("_")[-1], i) for i, (m, _b, _f) in enumerate(BAD)])
def test_every_option_and_value_is_checked_before_anything_is_sent(hub_and_leaf, module, bad, message):
    hub, _leaf = sites(hub_and_leaf)
    kept = run_module(module, dict(hub, name="cfg", **({"objects": [{"name": "kept", "content": "as it was"}]}
                                                       if module == OBJECTS else {"entries": {"kept": "as it was"}})))
    assert kept["changed"], kept
    stream = ("OBJ_" if module == OBJECTS else "KV_") + "cfg"
    before = stream_info(hub_and_leaf["hub"], "hub", stream)
    result = run_module(module, dict(hub, **bad))
    assert result.get("failed") and message in result["msg"], result
    assert not result["changed"] and result["actions"] == [], result
    after = stream_info(hub_and_leaf["hub"], "hub", stream)
    assert (after["config"], after["state"]["messages"], after["state"]["bytes"]) == (
        before["config"], before["state"]["messages"], before["state"]["bytes"])  # no chunk, no value, no change


def test_a_bucket_cannot_copy_itself(hub_and_leaf):
    hub, _leaf = sites(hub_and_leaf)
    for module, args in ((KV, dict(name="self", sources=[{"name": "self"}])),
                         (KV, dict(name="self", mirror={"name": "self", "domain": "hub"})),
                         (OBJECTS, dict(name="self", mirror={"name": "self"}))):
        refused = run_module(module, dict(hub, **args))
        assert refused.get("failed") and "bucket 'self': " in refused["msg"], refused
        assert "names this bucket itself" in refused["msg"] and refused["actions"] == [], refused
        assert not refused.get("warnings"), refused  # refused, not created with a warning
    assert stream_names(hub_and_leaf["hub"], "hub") == []
    # the same name in another domain is a copy
    made = run_module(KV, dict(hub, name="self", sources=[{"name": "self", "domain": "leaf"}]))
    assert made["changed"] and not made.get("failed"), made


def test_a_null_value_is_refused_and_a_key_left_out_with_exclusive_is_deleted(hub_and_leaf):
    hub, _leaf = sites(hub_and_leaf)
    assert run_module(KV, dict(hub, name="flags", entries={"beta": "on", "old": "x"}))["changed"]
    refused = run_module(KV, dict(hub, name="flags", entries={"beta": "on", "old": None}))
    assert refused.get("failed") and refused["actions"] == [] and not refused["changed"], refused
    assert "entries.old: null is not a value" in refused["msg"] and "set exclusive: true" in refused["msg"], refused
    assert kv_value(hub_and_leaf["hub"], "flags", "old", "hub") == b"x"
    deleted = run_module(KV, dict(hub, name="flags", entries={"beta": "on"}, exclusive=True))
    assert deleted["deleted"] == ["old"], deleted


def test_a_ttl_of_100ms_or_more_is_taken(hub_and_leaf):
    hub, _leaf = sites(hub_and_leaf)
    made = run_module(KV, dict(hub, name="brief", ttl="100ms"))
    assert made["changed"] and made["bucket"]["config"]["max_age"] == 10**8, made
    assert not run_module(KV, dict(hub, name="brief", ttl="100ms"))["changed"]


def test_an_object_name_of_1024_bytes_is_written_copied_and_read(hub_and_leaf, tmp_path):
    hub, leaf = sites(hub_and_leaf)
    name = "é" * 512  # 1024 bytes of UTF-8
    store = dict(hub, name="long", objects=[{"name": name, "content": "long names work"}])
    assert run_module(OBJECTS, store)["uploaded"] == [name]
    assert not run_module(OBJECTS, store)["changed"]
    assert nats_py_get(hub_and_leaf["hub"], "long", name, "hub") == b"long names work"
    assert run_module(OBJECTS, dict(leaf, name="long", mirror={"name": "long", "domain": "hub"}))["changed"]
    fetch = dict(leaf, bucket="long", name=name, dest=str(tmp_path / "long.txt"))
    wait_for(hub_and_leaf["leaf_server"], lambda: not run_module("jetstream_object_fetch", fetch).get("failed"))
    assert (tmp_path / "long.txt").read_bytes() == b"long names work"


# -- values as the docs say --------------------------------------------------------------------------------------

def test_a_string_is_stored_as_it_is_and_anything_else_as_json(hub_and_leaf):
    hub, _leaf = sites(hub_and_leaf)
    entries = {"text": "on", "flag": True, "count": 5, "nested": {"every": "10s", "metrics": ["cpu"]}}
    assert run_module(KV, dict(hub, name="vals", entries=entries))["put"] == sorted(entries)
    for key, stored in (("text", b"on"), ("flag", b"true"), ("count", b"5"),
                        ("nested", b'{"every":"10s","metrics":["cpu"]}')):
        assert kv_value(hub_and_leaf["hub"], "vals", key, "hub") == stored
    objects_ = [{"name": "plain", "content": "stable"},
                {"name": "config", "content": {"mode": "edge", "ports": [4222]}},
                {"name": "count", "content": 5}]
    store = dict(hub, name="vals", objects=objects_)
    assert run_module(OBJECTS, store)["uploaded"] == ["config", "count", "plain"]
    assert not run_module(OBJECTS, store)["changed"]
    assert nats_py_get(hub_and_leaf["hub"], "vals", "plain", "hub") == b"stable"
    assert nats_py_get(hub_and_leaf["hub"], "vals", "config", "hub") == b'{"mode":"edge","ports":[4222]}'
    assert nats_py_get(hub_and_leaf["hub"], "vals", "count", "hub") == b"5"


def test_object_metadata_is_text_numbers_and_booleans_as_their_text(hub_and_leaf):
    hub, _leaf = sites(hub_and_leaf)
    store = dict(hub, name="labels", objects=[{"name": "fw", "content": "x", "metadata": {
        "rev": 2, "signed": True, "board": "rpi4"}}])
    assert run_module(OBJECTS, store)["uploaded"] == ["fw"]
    assert not run_module(OBJECTS, store)["changed"]
    assert stored_meta(hub_and_leaf["hub"], "labels", "fw")["metadata"] == {"rev": "2", "signed": "true",
                                                                            "board": "rpi4"}
    refused = run_module(OBJECTS, dict(store, objects=[{"name": "fw", "content": "x", "metadata": {
        "board": {"name": "rpi", "rev": 4}}}]))
    assert refused.get("failed") and "objects[0] (fw).metadata.board: a mapping is not text" in refused["msg"], refused
    assert "to_json" in refused["msg"] and refused["actions"] == [], refused


# -- max_bytes below what a bucket holds ---------------------------------------------------------------------------

@pytest.mark.parametrize("module", [KV, OBJECTS])
def test_lowering_max_bytes_below_what_the_bucket_holds_is_refused(hub_and_leaf, module):
    hub, _leaf = sites(hub_and_leaf)
    content = {"objects": [{"name": "blob", "content": "x" * 5000}]} if module == OBJECTS else \
        {"entries": {"blob": "x" * 5000}}
    assert run_module(module, dict(hub, name="full", **content))["changed"]
    stream = ("OBJ_" if module == OBJECTS else "KV_") + "full"
    before = stream_info(hub_and_leaf["hub"], "hub", stream)
    held = before["state"]["bytes"]
    label = "object store" if module == OBJECTS else "key-value bucket"
    for check_mode in (True, False):
        refused = run_module(module, dict(hub, name="full", max_bytes=1000, **content), check_mode=check_mode)
        assert refused.get("failed") and not refused["changed"] and refused["actions"] == [], refused
        assert ("%s 'full' in domain 'hub': max_bytes: 1000 is below the %d bytes it already holds" % (label, held)
                in refused["msg"]), refused
    after = stream_info(hub_and_leaf["hub"], "hub", stream)
    assert after["config"]["max_bytes"] == -1 and after["state"]["bytes"] == held
    wider = run_module(module, dict(hub, name="full", max_bytes=held + 100000, **content))
    assert wider["changed"] and not wider.get("failed"), wider
    assert not run_module(module, dict(hub, name="full", max_bytes=held + 100000, **content))["changed"]


# -- concurrent uploads of one object ------------------------------------------------------------------------------

def chunk_subjects(url, bucket):
    with jetstream(url, "hub") as js:
        info = js.call("STREAM.INFO.OBJ_%s" % bucket, {"subjects_filter": "$O.%s.C.>" % bucket})
        return sorted((info["state"].get("subjects") or {}).keys()), info["state"]["bytes"]


def stored_meta(url, bucket, name):
    with jetstream(url, "hub") as js:
        return objects._stored_meta(js, bucket, name)


def test_uploads_of_one_object_leave_no_chunk_the_stored_metadata_does_not_name(hub_and_leaf):
    """Two uploads that both read the object before either wrote it (a run that read it, then another run's upload
    went first): the second one's metadata stands, and the first one's chunks are purged."""
    hub, _leaf = sites(hub_and_leaf)
    assert run_module(OBJECTS, dict(hub, name="race", objects=[{"name": "fw.bin", "content": "v1"}]))["changed"]
    one, two = os.urandom(600 * 1024), os.urandom(700 * 1024)
    with NatsClient({"servers": [hub_and_leaf["hub"]], "timeout": 5.0}) as client:
        js = JetStream(client, domain="hub")
        previous = objects.objects(client, js, "race")["fw.bin"]
        for data in (one, two):  # each as a run that read the object before the other wrote it
            objects.upload(client, js, "race", "fw.bin", data, objects.content_digest(data), previous=previous)
    subjects, stored_bytes = chunk_subjects(hub_and_leaf["hub"], "race")
    meta = stored_meta(hub_and_leaf["hub"], "race", "fw.bin")
    assert subjects == [kv.chunk_subject("race", meta["nuid"])], subjects
    assert stored_bytes < len(two) + 64 * 1024
    assert nats_py_get(hub_and_leaf["hub"], "race", "fw.bin", "hub") == two


def test_concurrent_uploads_of_one_object_leave_no_chunk_behind(hub_and_leaf, tmp_path):
    """Two runs uploading the same object at the same time, three times over: afterwards the store holds the
    chunks of the version its metadata names, whole, and nothing else."""
    hub, _leaf = sites(hub_and_leaf)
    for trial in range(3):
        files = []
        for index in range(2):
            path = tmp_path / ("fw-%d-%d.bin" % (trial, index))
            path.write_bytes(os.urandom(20 * 1024 * 1024))
            files.append(path)
        barrier = threading.Barrier(2)

        def run(path, barrier=barrier):
            barrier.wait()
            return run_module(OBJECTS, dict(hub, name="fw", objects=[{"name": "gw.bin", "src": str(path)}]))

        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            results = list(pool.map(run, files))
        assert all(not r.get("failed") and r["uploaded"] == ["gw.bin"] for r in results), results
        meta = stored_meta(hub_and_leaf["hub"], "fw", "gw.bin")
        subjects, stored_bytes = chunk_subjects(hub_and_leaf["hub"], "fw")
        assert subjects == [kv.chunk_subject("fw", meta["nuid"])], (trial, subjects)
        assert stored_bytes < 21 * 1024 * 1024, (trial, stored_bytes)
        data = nats_py_get(hub_and_leaf["hub"], "fw", "gw.bin", "hub")
        assert hashlib.sha256(data).digest() in [hashlib.sha256(f.read_bytes()).digest() for f in files], trial
        assert not run_module(OBJECTS, dict(hub, name="fw", objects=[{"name": "gw.bin", "src": str(
            files[[f.read_bytes() for f in files].index(data)])}]))["changed"]


def test_removing_an_object_drops_the_chunks_of_every_upload_of_it(hub_and_leaf):
    hub, _leaf = sites(hub_and_leaf)
    store = dict(hub, name="gone", objects=[{"name": "keep", "content": "k"}, {"name": "drop", "content": "d"}])
    assert run_module(OBJECTS, store)["changed"]
    with NatsClient({"servers": [hub_and_leaf["hub"]], "timeout": 5.0}) as client:
        js = JetStream(client, domain="hub")
        stale = objects.objects(client, js, "gone")["drop"]
        objects.upload(client, js, "gone", "drop", b"newer", objects.content_digest(b"newer"), previous=stale)
        # a run that read the object before that upload removes it
        objects.remove(client, js, "gone", stale)
    subjects, _bytes = chunk_subjects(hub_and_leaf["hub"], "gone")
    assert subjects == [kv.chunk_subject("gone", stored_meta(hub_and_leaf["hub"], "gone", "keep")["nuid"])], subjects
    assert stored_meta(hub_and_leaf["hub"], "gone", "drop")["deleted"] is True
