"""jetstream_consumer against real servers: a hub and a leaf, each its own JetStream domain,
on the PyPI build and on Debian's 2.9.10."""

import asyncio
import json

import nats

from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import JetStreamError

from conftest import jetstream, publish

SECOND = 10 ** 9


def consumer_info(url, domain, stream, name):
    with jetstream(url, domain) as js:
        try:
            return js.call("CONSUMER.INFO.%s.%s" % (stream, name))
        except JetStreamError as exc:
            assert exc.err_code == 10014, exc
            return None


def create_stream(url, domain, name, subjects):
    with jetstream(url, domain) as js:
        js.call("STREAM.CREATE.%s" % name, {"name": name, "subjects": subjects, "storage": "file"})


def is_2_9(env):
    return env["version"].startswith("2.9.")


def test_pull_consumer_lifecycle_in_another_domain(hub_and_leaf, module):
    """Managed through the hub's connection in the leaf's domain: create, same again, update,
    check mode and diff, an immutable change, recreate, absent."""
    env = hub_and_leaf
    create_stream(env["leaf"], None, "ORDERS", ["orders.>"])
    base = dict(servers=[env["hub"]], domain="leaf", stream="ORDERS", name="workers")
    spec = dict(base, filter_subject="orders.created", ack_wait="30s", max_deliver=5, max_ack_pending=100,
                description="order workers")
    subject = "$JS.leaf.API.CONSUMER.CREATE.ORDERS.workers"

    predicted = module("jetstream_consumer", spec, check_mode=True, diff=True)
    assert predicted["changed"] and predicted["operation"] == "create", predicted
    assert [a["subject"] for a in predicted["actions"]] == [subject]
    assert predicted["diff"]["before"] == {}
    assert predicted["diff"]["after"]["ack_wait"] == "30s"
    assert predicted["consumer"]["config"]["ack_policy"] == "explicit"
    assert consumer_info(env["leaf"], None, "ORDERS", "workers") is None

    created = module("jetstream_consumer", spec)
    assert created["changed"] and not created.get("failed"), created
    assert created["actions"] == predicted["actions"]
    config = created["consumer"]["config"]
    assert (config["ack_wait"], config["max_deliver"], config["filter_subject"], config["ack_policy"]) == (
        30 * SECOND, 5, "orders.created", "explicit")
    assert consumer_info(env["leaf"], None, "ORDERS", "workers")["config"]["max_ack_pending"] == 100
    first_created = created["consumer"]["created"]

    again = module("jetstream_consumer", spec)
    assert not again["changed"] and again["actions"] == [] and again["operation"] == "none", again

    updated_spec = dict(spec, ack_wait="1m", max_ack_pending=50)
    predicted = module("jetstream_consumer", updated_spec, check_mode=True, diff=True)
    assert predicted["changed"] and predicted["operation"] == "update", predicted
    assert predicted["diff"] == {"before": {"ack_wait": "30s", "max_ack_pending": 100},
                                 "after": {"ack_wait": "1m", "max_ack_pending": 50}}
    assert consumer_info(env["leaf"], None, "ORDERS", "workers")["config"]["ack_wait"] == 30 * SECOND

    updated = module("jetstream_consumer", updated_spec, diff=True)
    assert updated["changed"] and updated["changed_fields"] == ["ack_wait", "max_ack_pending"], updated
    assert updated["actions"] == predicted["actions"]
    assert updated["diff"] == predicted["diff"]
    live = consumer_info(env["leaf"], None, "ORDERS", "workers")
    assert (live["config"]["ack_wait"], live["config"]["max_ack_pending"]) == (60 * SECOND, 50)
    assert live["config"]["description"] == "order workers" and live["created"] == first_created
    assert not module("jetstream_consumer", updated_spec)["changed"]

    refused = module("jetstream_consumer", dict(updated_spec, deliver_policy="new", ack_wait="2m"))
    assert refused["failed"] and not refused["changed"], refused
    for part in ("consumer 'workers'", "stream 'ORDERS'", "domain 'leaf'", "deliver_policy", "recreate"):
        assert part in refused["msg"], refused["msg"]
    assert refused["changed_fields"] == ["ack_wait", "deliver_policy"]
    assert refused["immutable_fields"] == ["deliver_policy"]
    unchanged = consumer_info(env["leaf"], None, "ORDERS", "workers")
    assert (unchanged["config"], unchanged["created"]) == (live["config"], live["created"])

    recreated = module("jetstream_consumer", dict(updated_spec, deliver_policy="new", on_immutable_change="recreate"))
    assert recreated["changed"] and recreated["operation"] == "recreate", recreated
    assert [a["subject"] for a in recreated["actions"]] == ["$JS.leaf.API.CONSUMER.DELETE.ORDERS.workers", subject]
    live = consumer_info(env["leaf"], None, "ORDERS", "workers")
    assert live["config"]["deliver_policy"] == "new" and live["config"]["ack_wait"] == 60 * SECOND
    assert live["config"]["description"] == "order workers"
    assert not module("jetstream_consumer", dict(updated_spec, deliver_policy="new"))["changed"]

    absent = dict(base, state="absent")
    predicted = module("jetstream_consumer", absent, check_mode=True, diff=True)
    assert predicted["changed"] and predicted["diff"]["before"]["deliver_policy"] == "new"
    assert consumer_info(env["leaf"], None, "ORDERS", "workers") is not None
    removed = module("jetstream_consumer", absent)
    assert removed["changed"] and removed["consumer"] == {}
    assert [a["subject"] for a in removed["actions"]] == ["$JS.leaf.API.CONSUMER.DELETE.ORDERS.workers"]
    assert consumer_info(env["leaf"], None, "ORDERS", "workers") is None
    gone = module("jetstream_consumer", absent)
    assert not gone["changed"] and gone["actions"] == []


def test_push_consumer_and_delivery(hub_and_leaf, module):
    env = hub_and_leaf
    create_stream(env["hub"], None, "EVENTS", ["events.>"])
    base = dict(servers=[env["hub"]], domain="hub", stream="EVENTS")

    push = dict(base, name="forwarder", deliver_subject="deliver.events", deliver_group="fwd", idle_heartbeat="5s",
                flow_control=True, ack_policy="explicit", max_ack_pending=20)
    created = module("jetstream_consumer", push)
    assert created["changed"] and created["consumer"]["config"]["idle_heartbeat"] == 5 * SECOND, created
    assert not module("jetstream_consumer", push)["changed"]
    moved = module("jetstream_consumer", dict(push, deliver_subject="deliver.events.v2", deliver_group="fwd2"))
    assert moved["changed"] and moved["operation"] == "update", moved
    assert consumer_info(env["hub"], None, "EVENTS", "forwarder")["config"]["deliver_subject"] == "deliver.events.v2"

    to_pull = module("jetstream_consumer", dict(base, name="forwarder", deliver_subject=""))
    assert to_pull["failed"] and "push consumer cannot become a pull consumer" in to_pull["msg"], to_pull
    assert "deliver_subject" in to_pull["msg"] and "domain 'hub'" in to_pull["msg"]
    heartbeat = module("jetstream_consumer", dict(base, name="forwarder", idle_heartbeat="10s"))
    assert heartbeat["failed"] and "idle_heartbeat" in heartbeat["msg"], heartbeat
    pull_only = module("jetstream_consumer", dict(base, name="forwarder", max_batch=10))
    assert pull_only["failed"] and "only pull consumers" in pull_only["msg"], pull_only
    assert consumer_info(env["hub"], None, "EVENTS", "forwarder")["config"]["idle_heartbeat"] == 5 * SECOND

    pull = dict(base, name="DUR", ack_policy="explicit", max_ack_pending=100)
    assert module("jetstream_consumer", pull)["changed"]
    tap = dict(base, name="tap", deliver_subject="tap.events", ack_policy="none")
    assert module("jetstream_consumer", tap)["changed"]

    publish(env["hub"], "events.created", 5)
    state = module("jetstream_consumer", pull)["consumer"]
    assert (state["num_pending"], state["num_ack_pending"]) == (5, 0), state

    pulled, pushed = asyncio.run(_pull_and_push(env["hub"], "$JS.API.CONSUMER.MSG.NEXT.EVENTS.DUR", 3,
                                                "tap.events", 5))
    assert pulled == [b"message 0", b"message 1", b"message 2"]
    assert pushed == [b"message %d" % n for n in range(5)]
    state = module("jetstream_consumer", pull)["consumer"]
    assert state["delivered"]["stream_seq"] == 3 and state["ack_floor"]["stream_seq"] == 3, state
    assert (state["num_pending"], state["num_ack_pending"]) == (2, 0), state


async def _pull_and_push(url, next_subject, batch, deliver_subject, expected):
    """Pull a batch and acknowledge it, then take what the push consumer delivers.
    Pulled messages arrive under their stream subject on the request's inbox
    subscription, so the pull uses an inbox of its own rather than a request."""
    nc = await nats.connect(url)
    try:
        inbox = nc.new_inbox()
        replies = await nc.subscribe(inbox)
        await nc.publish(next_subject, json.dumps({"batch": batch, "expires": 2 * SECOND}).encode(), reply=inbox)
        pulled = []
        while len(pulled) < batch:
            msg = await replies.next_msg(timeout=5)
            if msg.data:
                pulled.append(msg.data)
                await nc.publish(msg.reply, b"+ACK")
        await nc.flush()
        pushed = []
        sub = await nc.subscribe(deliver_subject)
        while len(pushed) < expected:
            msg = await sub.next_msg(timeout=5)
            if msg.data:
                pushed.append(msg.data)
        await asyncio.sleep(0.3)
        return pulled, pushed
    finally:
        await nc.close()


def test_bad_input_changes_nothing(hub_and_leaf, module):
    env = hub_and_leaf
    create_stream(env["hub"], None, "BAD", ["bad.>"])
    base = dict(servers=[env["hub"]], domain="hub", stream="BAD", name="c")

    unknown = module("jetstream_consumer", dict(base, ack_wiat="30s"))
    assert unknown["failed"] and "ack_wiat" in unknown["msg"], unknown
    duration = module("jetstream_consumer", dict(base, ack_wait="half a minute"))
    assert duration["failed"] and "ack_wait" in duration["msg"] and "consumer 'c'" in duration["msg"], duration
    assert duration["field"] == "ack_wait" and duration["actions"] == []
    zero = module("jetstream_consumer", dict(base, max_deliver=0))
    assert zero["failed"] and "max_deliver" in zero["msg"], zero
    conflict = module("jetstream_consumer", dict(base, backoff=["1s", "5s"], ack_wait="30s"))
    assert conflict["failed"] and "first backoff step" in conflict["msg"], conflict
    bad_name = module("jetstream_consumer", dict(base, name="a.b"))
    assert bad_name["failed"] and "not a valid name" in bad_name["msg"], bad_name
    missing = module("jetstream_consumer", dict(base, stream="NOPE"))
    assert missing["failed"] and "stream 'NOPE' does not exist in domain 'hub'" in missing["msg"], missing
    assert not module("jetstream_consumer", dict(base, stream="NOPE", state="absent"))["changed"]
    assert consumer_info(env["hub"], None, "BAD", "c") is None

    outside = module("jetstream_consumer", dict(base, filter_subject="elsewhere.>"))
    if is_2_9(env):
        assert outside["failed"] and "not a valid subset" in outside["msg"], outside
        assert "consumer 'c' on stream 'BAD'" in outside["msg"] and "filter_subjects" in outside["msg"]
        assert not outside["changed"]
        assert consumer_info(env["hub"], None, "BAD", "c") is None
    else:
        assert outside["changed"] and "matches none of the stream's subjects" in " ".join(
            w if isinstance(w, str) else json.dumps(w) for w in outside.get("warnings", [])), outside
        assert module("jetstream_consumer", dict(base, state="absent"))["changed"]

    newer = dict(base, name="newer", metadata={"team": "ops"}, filter_subjects=["bad.a", "bad.b"])
    result = module("jetstream_consumer", newer)
    if is_2_9(env):
        assert result["failed"] and "needs nats-server 2.10 or newer" in result["msg"], result
        assert consumer_info(env["hub"], None, "BAD", "newer") is None
    else:
        assert result["changed"], result
        assert not module("jetstream_consumer", newer)["changed"]
        assert module("jetstream_consumer", dict(newer, filter_subjects=["bad.b", "bad.a"]))["changed"] is False

    memory = dict(base, name="memory", mem_storage=False)
    assert module("jetstream_consumer", memory)["changed"]
    moved = module("jetstream_consumer", dict(memory, mem_storage=True))
    if is_2_9(env):
        assert moved["changed"] and moved["operation"] == "update", moved
        assert consumer_info(env["hub"], None, "BAD", "memory")["config"]["mem_storage"] is True
    else:
        assert moved["failed"] and "mem_storage" in moved["msg"] and "2.14" in moved["msg"], moved
        assert not consumer_info(env["hub"], None, "BAD", "memory")["config"].get("mem_storage")

    kept = dict(base, name="kept", ack_wait="5s", description="keep me")
    assert module("jetstream_consumer", kept)["changed"]
    refused = module("jetstream_consumer", dict(kept, deliver_policy="new", num_replicas=3,
                                                on_immutable_change="recreate"))
    assert refused["failed"] and refused["changed"], refused
    assert "refused to recreate" in refused["msg"] and "recreated with its old config" in refused["msg"], refused
    back = consumer_info(env["hub"], None, "BAD", "kept")["config"]
    assert (back["deliver_policy"], back["ack_wait"], back["description"]) == ("all", 5 * SECOND, "keep me")
