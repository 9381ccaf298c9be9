"""jetstream_kv against a hub and a leaf with their own JetStream domains: a bucket
and its entries, a read-only copy in the leaf that answers while the hub is down,
updates in place, sources gathered with subject transforms, check and diff mode,
and values readable by the nats clients' own key-value API."""

import asyncio
import time

import nats
import pytest

from conftest import run_module


def kv_get(url, bucket, key, domain=None):
    """The value a nats client reads, or None."""
    async def read():
        nc = await nats.connect(url, allow_reconnect=False, connect_timeout=3)
        try:
            try:
                store = await nc.jetstream(domain=domain).key_value(bucket)
            except nats.js.errors.BucketNotFoundError:
                return None
            try:
                return (await store.get(key)).value
            except nats.js.errors.KeyNotFoundError:
                return None
        finally:
            await nc.close()
    return asyncio.run(read())


def test_a_bucket_and_its_entries_converge_and_stay(hub_and_leaf):
    hub = dict(servers=[hub_and_leaf["hub"]], domain="hub", timeout=3.0)
    config = dict(hub, name="fleet-config", history=5, entries={"log_level": "info", "sampling": {"every": "10s"}})
    predicted = run_module("jetstream_kv", config, check_mode=True)
    assert predicted["changed"] and predicted["put"] == ["log_level", "sampling"], predicted
    assert kv_get(hub_and_leaf["hub"], "fleet-config", "log_level", "hub") is None  # check mode made nothing
    made = run_module("jetstream_kv", config, diff=True)
    assert made["changed"] and made["put"] == ["log_level", "sampling"], made
    assert made["diff"]["after"]["entries"] == {"log_level": "info", "sampling": '{"every":"10s"}'}
    assert made["bucket"]["config"]["max_msgs_per_subject"] == 5
    assert kv_get(hub_and_leaf["hub"], "fleet-config", "log_level", "hub") == b"info"
    again = run_module("jetstream_kv", config)
    assert not again["changed"] and again["put"] == [] and again["actions"] == [], again

    changed = run_module("jetstream_kv", dict(config, entries={"log_level": "debug", "sampling": {"every": "10s"}}),
                         diff=True)
    assert changed["changed"] and changed["put"] == ["log_level"], changed
    assert changed["diff"]["before"]["entries"] == {"log_level": "info"}
    exclusive = run_module("jetstream_kv", dict(config, entries={"log_level": "debug"}, exclusive=True))
    assert exclusive["deleted"] == ["sampling"] and exclusive["put"] == [], exclusive
    assert kv_get(hub_and_leaf["hub"], "fleet-config", "sampling", "hub") is None

    # an option the server changes in place is updated, never recreated: the values stay
    wider = run_module("jetstream_kv", dict(config, entries={"log_level": "debug"}, history=10,
                                            description="what the sites run"))
    assert wider["changed"] and [a["subject"].rsplit(".", 2)[-2] for a in wider["actions"]] == ["UPDATE"], wider
    assert kv_get(hub_and_leaf["hub"], "fleet-config", "log_level", "hub") == b"debug"
    refused = run_module("jetstream_kv", dict(config, entries={"log_level": "debug"}, history=10, storage="memory"))
    assert refused.get("failed") and "storage cannot change" in refused["msg"], refused


def test_a_copy_in_the_leaf_answers_while_the_hub_is_down(hub_and_leaf):
    hub = dict(servers=[hub_and_leaf["hub"]], domain="hub", timeout=3.0)
    assert run_module("jetstream_kv", dict(hub, name="cfg", entries={"mode": "edge"}))["changed"]
    leaf = dict(servers=[hub_and_leaf["leaf"]], domain="leaf", timeout=3.0)
    copy = dict(leaf, name="cfg", mirror={"name": "cfg", "domain": "hub"})
    made = run_module("jetstream_kv", copy)
    assert made["changed"] and made["bucket"]["config"]["mirror_direct"] is True, made
    assert not run_module("jetstream_kv", copy)["changed"]
    hub_and_leaf["leaf_server"].wait(lambda: kv_get(hub_and_leaf["leaf"], "cfg", "mode", "leaf") == b"edge")
    # updating the copy keeps its origin's domain (no "detected cycle")
    updated = run_module("jetstream_kv", dict(copy, history=3))
    assert updated["changed"] and not updated.get("failed"), updated
    assert updated["bucket"]["config"]["mirror"]["external"]["api"] == "$JS.hub.API"
    writable = run_module("jetstream_kv", dict(copy, entries={"mode": "x"}))
    assert writable.get("failed") and "a mirror is read-only" in writable["msg"], writable

    hub_and_leaf["hub_server"].stop()
    assert kv_get(hub_and_leaf["leaf"], "cfg", "mode", "leaf") == b"edge"


def test_sources_gather_buckets_of_other_domains(hub_and_leaf):
    if hub_and_leaf["version"].startswith("2.9."):
        refused = run_module("jetstream_kv", dict(servers=[hub_and_leaf["hub"]], domain="hub", name="all",
                                                  sources=[{"name": "status", "domain": "leaf"}]))
        assert refused.get("failed") and "needs nats-server 2.10" in refused["msg"], refused
        return
    leaf = dict(servers=[hub_and_leaf["leaf"]], domain="leaf", timeout=3.0)
    assert run_module("jetstream_kv", dict(leaf, name="status", entries={"leaf.health": "ok"}))["changed"]
    hub = dict(servers=[hub_and_leaf["hub"]], domain="hub", timeout=3.0)
    gathered = dict(hub, name="all", sources=[{"name": "status", "domain": "leaf"}])
    assert run_module("jetstream_kv", gathered)["changed"]
    assert not run_module("jetstream_kv", gathered)["changed"]
    hub_and_leaf["hub_server"].wait(lambda: kv_get(hub_and_leaf["hub"], "all", "leaf.health", "hub") == b"ok")


@pytest.mark.parametrize("bad, message", [
    (dict(name="bad.name"), "key-value bucket name: 'bad.name' is not valid"),
    (dict(name="b", history=65), "history: 65; a key keeps 1 to 64 values"),
    (dict(name="b", entries={"bad key": "x"}), "entries: 'bad key' is not a valid key"),
    (dict(name="b", entries={".hidden": "x"}), "entries: '.hidden' is not a valid key"),
    (dict(name="b", exclusive=True), "exclusive needs entries"),
    (dict(name="b", ttl="forever"), "ttl: 'forever' is not a duration"),
])
def test_bad_buckets_are_refused_before_anything_is_sent(hub_and_leaf, bad, message):
    result = run_module("jetstream_kv", dict(servers=[hub_and_leaf["hub"]], domain="hub", **bad))
    assert result.get("failed") and message in result["msg"] and result["actions"] == [], result


def test_many_buckets_in_one_task_and_per_key_ttl_where_the_server_has_it(hub_and_leaf):
    hub = dict(servers=[hub_and_leaf["hub"]], domain="hub", timeout=3.0)
    bulk = dict(hub, buckets=[{"name": "one", "entries": {"k": "1"}}, {"name": "two", "history": 2}])
    made = run_module("jetstream_kv", bulk)
    assert made["changed"] and [b["name"] for b in made["buckets"]] == ["one", "two"], made
    assert made["buckets"][0]["put"] == ["k"] and made["buckets"][1]["put"] == []
    assert not run_module("jetstream_kv", bulk)["changed"]
    ttl = run_module("jetstream_kv", dict(hub, name="ttl", per_key_ttl=True))
    if hub_and_leaf["version"].startswith(("2.9.", "2.10.")):
        assert ttl.get("failed") and "allow_msg_ttl needs nats-server 2.11" in ttl["msg"], ttl
    else:
        assert ttl["changed"] and ttl["bucket"]["config"]["allow_msg_ttl"] is True, ttl


def stored_ttls(url, bucket):
    """{key: the Nats-TTL header of its last message, None without one} of the keys a bucket holds now."""
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import NatsClient
    with NatsClient({"servers": [url], "timeout": 3.0}) as client:
        last = client.last_per_subject("$JS.hub.API", "KV_" + bucket, "$KV.%s.>" % bucket)
    return dict((subject.split(".", 2)[2], (headers or {}).get("Nats-TTL")) for subject, headers, _data, _seq in last
                if not (headers or {}).get("Nats-Marker-Reason"))


def test_values_with_a_ttl_of_their_own_run_out_and_are_written_again(hub_and_leaf):
    hub = dict(servers=[hub_and_leaf["hub"]], domain="hub", timeout=3.0)
    task = dict(hub, name="notices", per_key_ttl=True, limit_marker_ttl="1s",
                entries={"maintenance": "hub-2 patching", "contact": "ops"}, entry_ttls={"maintenance": "1h"})
    if hub_and_leaf["version"].startswith(("2.9.", "2.10.")):
        refused = run_module("jetstream_kv", task)
        assert refused.get("failed") and "needs nats-server 2.11" in refused["msg"] and refused["actions"] == [], (
            refused)
        return
    predicted = run_module("jetstream_kv", task, check_mode=True, diff=True)
    assert predicted["changed"] and predicted["put"] == ["contact", "maintenance"], predicted
    assert predicted["diff"]["after"]["entry_ttls"] == {"maintenance": 3600}, predicted["diff"]
    made = run_module("jetstream_kv", task)
    assert made["changed"] and made["put"] == ["contact", "maintenance"], made
    assert stored_ttls(hub_and_leaf["hub"], "notices") == {"maintenance": "3600", "contact": None}
    assert kv_get(hub_and_leaf["hub"], "notices", "maintenance", domain="hub") == b"hub-2 patching"
    assert not run_module("jetstream_kv", task)["changed"]

    # another TTL, and one for the other key: both written again, the diff shows the TTLs
    shorter = dict(task, entry_ttls={"maintenance": 1, "contact": "never"})
    moved = run_module("jetstream_kv", shorter, diff=True)
    assert moved["changed"] and moved["put"] == ["contact", "maintenance"], moved
    assert moved["diff"]["before"]["entry_ttls"] == {"maintenance": 3600, "contact": None}, moved["diff"]
    assert moved["diff"]["after"]["entry_ttls"] == {"maintenance": 1, "contact": -1}, moved["diff"]
    assert moved["diff"]["before"]["entries"]["maintenance"] == moved["diff"]["after"]["entries"]["maintenance"]

    # the server removes the value when it runs out (leaving its marker); the next run writes it again
    deadline = time.monotonic() + 30
    while "maintenance" in stored_ttls(hub_and_leaf["hub"], "notices") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert stored_ttls(hub_and_leaf["hub"], "notices") == {"contact": "never"}
    assert kv_get(hub_and_leaf["hub"], "notices", "maintenance", domain="hub") is None
    again = run_module("jetstream_kv", dict(shorter, entry_ttls={"maintenance": "1h", "contact": "never"}))
    assert again["changed"] and again["put"] == ["maintenance"], again

    # no TTL declared any more: written again without one
    plain = run_module("jetstream_kv", dict(task, entry_ttls=None))
    assert plain["put"] == ["contact", "maintenance"] and set(stored_ttls(hub_and_leaf["hub"], "notices").values()) == {
        None}, plain
