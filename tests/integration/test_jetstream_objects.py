"""jetstream_object_store and jetstream_object_fetch against a hub and a leaf with their
own JetStream domains: uploads only when the digest differs (a run with nothing to do
reads no chunk), a copy in the leaf read into a file while the hub is down, digests
checked, and objects readable by nats-py's own object store API."""

import asyncio
import json
import os

import nats

from conftest import run_module


def nats_py_get(url, bucket, name, domain):
    async def read():
        nc = await nats.connect(url, allow_reconnect=False, connect_timeout=3)
        try:
            store = await nc.jetstream(domain=domain).object_store(bucket)
            return (await store.get(name)).data
        finally:
            await nc.close()
    return asyncio.run(read())


def out_bytes(server):
    return server.get("varz")["out_bytes"]


def test_objects_upload_once_and_a_copy_serves_them_with_the_hub_down(hub_and_leaf, tmp_path):
    firmware = tmp_path / "gateway.bin"
    firmware.write_bytes(os.urandom(3 * 1024 * 1024 + 17))
    hub = dict(servers=[hub_and_leaf["hub"]], domain="hub", timeout=5.0)
    store = dict(hub, name="firmware", objects=[
        {"name": "gateway.bin", "src": str(firmware), "metadata": {"board": "rpi4"}},
        {"name": "CHANNEL", "content": "stable"}])
    predicted = run_module("jetstream_object_store", store, check_mode=True)
    assert predicted["changed"] and predicted["uploaded"] == ["CHANNEL", "gateway.bin"], predicted
    made = run_module("jetstream_object_store", store, diff=True)
    assert made["changed"] and made["uploaded"] == ["CHANNEL", "gateway.bin"], made
    assert made["diff"]["after"]["objects"]["gateway.bin"].startswith("SHA-256=")
    assert nats_py_get(hub_and_leaf["hub"], "firmware", "gateway.bin", "hub") == firmware.read_bytes()

    sent_before = out_bytes(hub_and_leaf["hub_server"])
    same = run_module("jetstream_object_store", store)
    assert not same["changed"] and same["uploaded"] == [], same
    # metadata only: far less than the 3 MiB of chunks went out
    assert out_bytes(hub_and_leaf["hub_server"]) - sent_before < 256 * 1024

    relabelled = run_module("jetstream_object_store", dict(store, objects=[
        dict(store["objects"][0], metadata={"board": "rpi5"}), store["objects"][1]]))
    assert relabelled["updated"] == ["gateway.bin"] and relabelled["uploaded"] == [], relabelled
    exclusive = run_module("jetstream_object_store", dict(store, objects=[store["objects"][1]], exclusive=True))
    assert exclusive["deleted"] == ["gateway.bin"], exclusive
    restored = run_module("jetstream_object_store", store)
    assert restored["uploaded"] == ["gateway.bin"], restored

    leaf = dict(servers=[hub_and_leaf["leaf"]], domain="leaf", timeout=5.0)
    origin = {"name": "firmware", "domain": "hub"}
    copy = run_module("jetstream_object_store", dict(leaf, name="firmware", mirror=origin))
    assert copy["changed"], copy
    fetch = dict(leaf, bucket="firmware", name="gateway.bin", dest=str(tmp_path / "on-the-edge.bin"))
    hub_and_leaf["leaf_server"].wait(lambda: not run_module("jetstream_object_fetch", fetch, check_mode=True).get(
        "failed") and run_module("jetstream_object_fetch", dict(fetch, dest=str(tmp_path / "probe.bin"))).get("size"),
        timeout=30)
    hub_and_leaf["hub_server"].stop()
    got = run_module("jetstream_object_fetch", fetch)
    assert got["changed"] and got["size"] == firmware.stat().st_size, got
    assert (tmp_path / "on-the-edge.bin").read_bytes() == firmware.read_bytes()
    assert oct(os.stat(tmp_path / "on-the-edge.bin").st_mode & 0o777) == "0o644"
    assert not run_module("jetstream_object_fetch", fetch)["changed"]


def test_a_wrong_digest_leaves_the_file_alone(hub_and_leaf, tmp_path):
    hub = dict(servers=[hub_and_leaf["hub"]], domain="hub", timeout=5.0)
    assert run_module("jetstream_object_store", dict(hub, name="docs", objects=[
        {"name": "readme", "content": "hello"}]))["changed"]
    # a metadata message claiming another digest for the same chunks
    from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import buckets as kv
    from conftest import jetstream
    with jetstream(hub_and_leaf["hub"], "hub") as js:
        meta = json.loads(js.client.request("$JS.hub.API.DIRECT.GET.OBJ_docs", json.dumps(
            {"last_by_subj": kv.meta_subject("docs", "readme")}).encode()).decode())
        meta["digest"] = kv.digest_of(b"\0" * 32)
        js.client.request(kv.meta_subject("docs", "readme"), json.dumps(meta).encode())
    (tmp_path / "out").mkdir()
    dest = tmp_path / "out" / "readme"
    dest.write_text("old")
    wrong = run_module("jetstream_object_fetch", dict(hub, bucket="docs", name="readme", dest=str(dest)))
    assert wrong.get("failed") and "does not match its digest" in wrong["msg"], wrong
    assert dest.read_text() == "old" and os.listdir(tmp_path / "out") == ["readme"]  # no temporary file left


def test_bad_objects_are_refused_before_anything_is_sent(hub_and_leaf, tmp_path):
    hub = dict(servers=[hub_and_leaf["hub"]], domain="hub")
    missing = run_module("jetstream_object_store", dict(hub, name="b", objects=[
        {"name": "x", "src": str(tmp_path / "nope.bin")}]))
    assert missing.get("failed") and "objects[0].src: %s is not a file (object 'x')" % (
        tmp_path / "nope.bin") in missing["msg"] and missing["actions"] == [], missing
    mirror = run_module("jetstream_object_store", dict(hub, name="b", mirror={"name": "a"}, objects=[
        {"name": "x", "content": "y"}]))
    assert mirror.get("failed") and "a mirror is read-only" in mirror["msg"], mirror
    twice = run_module("jetstream_object_store", dict(hub, name="b", objects=[
        {"name": "x", "content": "1"}, {"name": "x", "content": "2"}]))
    assert twice.get("failed") and "'x' is listed twice" in twice["msg"], twice
    nowhere = run_module("jetstream_object_fetch", dict(hub, bucket="b", name="x", dest="/nonexistent/dir/file"))
    assert nowhere.get("failed") and "the directory of /nonexistent/dir/file does not exist" in nowhere["msg"]
