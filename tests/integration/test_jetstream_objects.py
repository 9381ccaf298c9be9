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


# -- sealed stores, object headers and chunk sizes ---------------------------------------------------------------

def stored_meta(url, domain, bucket, name):
    from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import buckets as kv
    from conftest import jetstream
    with jetstream(url, domain) as js:
        return kv.meta_of_message(js.call("STREAM.MSG.GET.OBJ_%s" % bucket, {
            "last_by_subj": kv.meta_subject(bucket, name)})["message"])


def store_config(url, domain, bucket):
    from conftest import jetstream
    with jetstream(url, domain) as js:
        info = js.lookup("STREAM.INFO.OBJ_%s" % bucket)
    return info and info["config"]


def test_a_sealed_store_is_written_first_then_sealed_and_read_only_after(hub_and_leaf):
    url = hub_and_leaf["hub"]
    hub = dict(servers=[url], domain="hub", timeout=5.0)
    store = dict(hub, name="release", sealed=True, objects=[
        {"name": "image.tar", "content": "image " * 1000}, {"name": "NOTES", "content": "first"}])

    predicted = run_module("jetstream_object_store", store, check_mode=True, diff=True)
    assert predicted["changed"] and predicted["uploaded"] == ["NOTES", "image.tar"], predicted
    subjects = [a["subject"] for a in predicted["actions"]]
    assert subjects == ["$JS.hub.API.STREAM.CREATE.OBJ_release", "$JS.hub.API.STREAM.UPDATE.OBJ_release"], subjects
    assert predicted["actions"][1]["body"]["sealed"] is True, predicted["actions"]
    assert predicted["diff"]["after"]["sealed"] is True and not predicted["diff"]["before"].get("sealed"), predicted
    assert store_config(url, "hub", "release") is None  # check mode made nothing

    made = run_module("jetstream_object_store", store, diff=True)
    assert made["changed"] and made["uploaded"] == ["NOTES", "image.tar"], made
    assert [a["subject"].rsplit(".", 2)[-2] for a in made["actions"]] == ["CREATE", "UPDATE"], made["actions"]
    config = store_config(url, "hub", "release")
    assert config["sealed"] and config["deny_delete"] and config["deny_purge"], config
    assert not config.get("allow_rollup_hdrs") and made["store"]["config"]["sealed"], config
    assert made["diff"]["after"]["sealed"] is True and made["diff"]["after"]["objects"]["NOTES"].startswith("SHA-256=")
    # the objects were written before the seal: every client reads them
    assert nats_py_get(url, "release", "NOTES", "hub") == b"first"

    for same in (store, dict(store, sealed=None)):
        again = run_module("jetstream_object_store", same)
        assert not again["changed"] and again["actions"] == [] and again["uploaded"] == [], again

    changed = run_module("jetstream_object_store", dict(store, objects=[
        store["objects"][0], {"name": "NOTES", "content": "second", "headers": {"X-Rev": "2"}},
        {"name": "extra", "content": "x"}]))
    assert changed.get("failed") and changed["actions"] == [] and not changed["changed"], changed
    assert changed["msg"].startswith("object store 'release' in domain 'hub' is sealed, so it is read-only for good: "
                                     "this task would upload 'NOTES', 'extra'"), changed["msg"]
    relabel = run_module("jetstream_object_store", dict(store, sealed=None, objects=[
        store["objects"][0], dict(store["objects"][1], description="notes")]))
    assert relabel.get("failed") and "would update the description, metadata or headers of 'NOTES'" in relabel[
        "msg"] and relabel["actions"] == [], relabel
    pruned = run_module("jetstream_object_store", dict(store, objects=[store["objects"][1]], exclusive=True))
    assert pruned.get("failed") and "would delete (exclusive) 'image.tar'" in pruned["msg"], pruned
    unseal = run_module("jetstream_object_store", dict(store, sealed=False))
    assert unseal.get("failed") and unseal["actions"] == [] and unseal["msg"].startswith(
        "object store 'release' is sealed, and sealed: false cannot unseal it"), unseal
    ttl = run_module("jetstream_object_store", dict(store, ttl="30d"))
    assert ttl.get("failed") and "a sealed store keeps its objects for good" in ttl["msg"] and ttl["actions"] == []
    assert nats_py_get(url, "release", "NOTES", "hub") == b"first"
    # the store itself still changes where a sealed stream does
    described = run_module("jetstream_object_store", dict(store, description="May release"))
    assert described["changed"] and store_config(url, "hub", "release")["description"] == "May release", described
    assert not run_module("jetstream_object_store", dict(store, description="May release"))["changed"]


def test_an_existing_store_is_sealed_in_place_and_check_mode_predicts_it(hub_and_leaf):
    url = hub_and_leaf["hub"]
    hub = dict(servers=[url], domain="hub", timeout=5.0)
    store = dict(hub, name="docs", objects=[{"name": "readme", "content": "hello"}])
    assert run_module("jetstream_object_store", store)["changed"]
    predicted = run_module("jetstream_object_store", dict(store, sealed=True), check_mode=True, diff=True)
    assert predicted["changed"] and predicted["uploaded"] == [], predicted
    assert [a["subject"] for a in predicted["actions"]] == ["$JS.hub.API.STREAM.UPDATE.OBJ_docs"], predicted
    assert predicted["diff"]["before"]["sealed"] is False and predicted["diff"]["after"]["sealed"] is True
    assert not store_config(url, "hub", "docs").get("sealed")
    # a store without objects declared is sealed as well
    sealed = run_module("jetstream_object_store", dict(hub, name="docs", sealed=True))
    assert sealed["changed"] and sealed["store"]["config"]["sealed"], sealed
    assert not run_module("jetstream_object_store", dict(store, sealed=True))["changed"]


def test_object_headers_are_kept_in_its_metadata_and_change_without_an_upload(hub_and_leaf):
    url = hub_and_leaf["hub"]
    hub = dict(servers=[url], domain="hub", timeout=5.0)
    obj = {"name": "page", "content": "<p>hi</p>", "headers": {"Content-Type": "text/html", "X-Tag": ["a", "b"],
                                                               "X-Rev": 3}}
    store = dict(hub, name="site", objects=[obj])
    made = run_module("jetstream_object_store", store)
    assert made["uploaded"] == ["page"], made
    meta = stored_meta(url, "hub", "site", "page")
    assert meta["headers"] == {"Content-Type": ["text/html"], "X-Tag": ["a", "b"], "X-Rev": ["3"]}, meta
    assert nats_py_get(url, "site", "page", "hub") == b"<p>hi</p>"
    assert not run_module("jetstream_object_store", store)["changed"]

    retagged = run_module("jetstream_object_store", dict(store, objects=[dict(obj, headers={"X-Tag": "c"})]),
                          diff=True)
    assert retagged["updated"] == ["page"] and retagged["uploaded"] == [], retagged
    after = stored_meta(url, "hub", "site", "page")
    assert after["headers"] == {"X-Tag": ["c"]} and after["nuid"] == meta["nuid"], after
    cleared = run_module("jetstream_object_store", dict(store, objects=[dict(obj, headers=None)]))
    assert cleared["updated"] == ["page"] and "headers" not in stored_meta(url, "hub", "site", "page"), cleared
    bad = run_module("jetstream_object_store", dict(store, objects=[dict(obj, headers={"Bad Name": "x"})]))
    assert bad.get("failed") and bad["actions"] == [] and "objects[0] (page).headers: 'Bad Name' is not a header " \
        "name" in bad["msg"], bad


def test_a_chunk_size_applies_to_uploads_within_the_servers_max_payload(hub_and_leaf):
    url = hub_and_leaf["hub"]
    hub = dict(servers=[url], domain="hub", timeout=5.0)
    content = "".join("%05d" % n for n in range(1000))  # 5000 bytes
    store = dict(hub, name="small", objects=[{"name": "log", "content": content, "chunk_size": "1KiB"}])
    made = run_module("jetstream_object_store", store)
    assert made["uploaded"] == ["log"], made
    meta = stored_meta(url, "hub", "small", "log")
    assert meta["chunks"] == 5 and meta["options"]["max_chunk_size"] == 1024, meta
    assert nats_py_get(url, "small", "log", "hub") == content.encode()
    # the same content in another chunk size is not uploaded again
    same = run_module("jetstream_object_store", dict(store, objects=[dict(store["objects"][0], chunk_size=None)]))
    assert not same["changed"] and same["uploaded"] == [], same
    # a change of metadata alone keeps the chunk size the chunks have
    run_module("jetstream_object_store", dict(store, objects=[dict(store["objects"][0], description="log")]))
    assert stored_meta(url, "hub", "small", "log")["options"]["max_chunk_size"] == 1024

    for size, message in (("0", "objects[0] (log).chunk_size: '0'; an object's chunks hold at least 1 byte"),
                          ("2MiB", "objects[0] (log).chunk_size: 2097152 bytes is above the 1048576 bytes the server "
                                   "takes in a message (its max_payload): use at most 1048576"),
                          ("lots", "objects[0] (log).chunk_size: 'lots' is not a size")):
        refused = run_module("jetstream_object_store", dict(store, name="other", objects=[
            dict(store["objects"][0], chunk_size=size)]))
        assert refused.get("failed") and message in refused["msg"] and refused["actions"] == [], refused
        assert store_config(url, "hub", "other") is None


def test_a_domains_run_gives_objects_their_headers_and_chunk_size(hub_and_leaf):
    url = hub_and_leaf["hub"]
    hub = dict(servers=[url], domain="hub", timeout=5.0)
    content = "".join("%05d" % n for n in range(1000))  # 5000 bytes
    obj = {"name": "log", "content": content, "chunk_size": "2KiB", "headers": {"Content-Type": "text/plain"}}
    run = dict(hub, object_stores=[{"name": "dom", "objects": [obj]}])
    made = run_module("jetstream_domain", run)
    assert made["changed"] and made["stores"][0]["uploaded"] == ["log"], made
    meta = stored_meta(url, "hub", "dom", "log")
    assert meta["chunks"] == 3 and meta["headers"] == {"Content-Type": ["text/plain"]}, meta
    assert nats_py_get(url, "dom", "log", "hub") == content.encode()
    assert not run_module("jetstream_domain", run)["changed"]
    retagged = run_module("jetstream_domain", dict(hub, object_stores=[{"name": "dom", "objects": [
        dict(obj, headers={"Content-Type": "text/csv"})]}]))
    assert retagged["stores"][0]["updated"] == ["log"] and retagged["stores"][0]["uploaded"] == [], retagged
    refused = run_module("jetstream_domain", dict(hub, object_stores=[{"name": "dom2", "objects": [
        dict(obj, chunk_size="2MiB")]}]))
    assert refused.get("failed") and "objects[0] (log).chunk_size: 2097152 bytes is above" in refused["msg"], refused
    assert store_config(url, "hub", "dom2") is None
    sealed = run_module("jetstream_domain", dict(hub, object_stores=[{"name": "dom", "sealed": True}]))
    assert sealed.get("failed") and "sealed" in sealed["msg"], sealed
