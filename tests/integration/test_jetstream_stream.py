"""jetstream_stream against real servers: a hub (domain ``hub``) and a leaf (domain ``leaf``)
on loopback, for each nats-server the suite knows (PyPI 2.15, Debian 2.9)."""

import asyncio
import json
import time

import nats
import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.stream_model import parse_version


class Peek:
    """nats-py used directly, to publish with acks and to look at streams
    independently of the module."""

    def __init__(self, url, domain):
        self.loop = asyncio.new_event_loop()
        self.nc = self.run(nats.connect(url, allow_reconnect=False))
        self.js = self.nc.jetstream(domain=domain)
        self.api = "$JS.%s.API" % domain

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def publish(self, subject, count, prefix="m"):
        acks = [self.run(self.js.publish(subject, b"%s-%d" % (prefix.encode(), i))) for i in range(count)]
        return acks

    def info(self, name):
        reply = json.loads(self.run(self.nc.request("%s.STREAM.INFO.%s" % (self.api, name), b"", timeout=5)).data)
        return None if "error" in reply else reply

    def names(self):
        reply = json.loads(self.run(self.nc.request("%s.STREAM.NAMES" % self.api, b"{}", timeout=5)).data)
        return sorted(reply.get("streams") or [])

    def messages(self, name, count):
        return [self.run(self.js.get_msg(name, seq)) for seq in range(1, count + 1)]

    def wait_messages(self, name, count, timeout=15):
        deadline = time.monotonic() + timeout
        state = None
        while time.monotonic() < deadline:
            state = (self.info(name) or {}).get("state", {})
            if state.get("messages", 0) >= count:
                return state
            time.sleep(0.1)
        raise AssertionError("stream %s has %s, expected %d messages" % (name, state, count))

    def close(self):
        self.run(self.nc.close())
        self.loop.close()


@pytest.fixture
def net(hub_and_leaf):
    peeks = {"hub": Peek(hub_and_leaf["hub"], "hub"), "leaf": Peek(hub_and_leaf["leaf"], "leaf")}
    hub_and_leaf["peek"] = peeks
    hub_and_leaf["v"] = parse_version(hub_and_leaf["version"])
    yield hub_and_leaf
    for peek in peeks.values():
        peek.close()


def hub_args(net, **args):
    return dict(servers=[net["hub"]], domain="hub", **args)


def test_create_noop_update_check_diff_absent(net, module):
    hub = net["peek"]["hub"]
    orders = hub_args(net, name="ORDERS", subjects=["orders.>", "eu.orders.>"], max_age="1h", max_bytes="64MiB",
                      duplicate_window="1m", description="orders of the shop", max_msgs_per_subject=100)

    created = module("jetstream_stream", orders)
    assert created["changed"] and created["action"] == "create", created
    assert [a["subject"] for a in created["actions"]] == ["$JS.hub.API.STREAM.CREATE.ORDERS"]
    config = created["stream"]["config"]
    assert config["max_age"] == 3600 * 10**9 and config["max_bytes"] == 64 * 1024**2
    assert config["duplicate_window"] == 60 * 10**9 and sorted(config["subjects"]) == ["eu.orders.>", "orders.>"]
    assert hub.info("ORDERS")["config"]["max_msgs_per_subject"] == 100

    again = module("jetstream_stream", dict(orders, subjects=["orders.>", "eu.orders.>", "orders.>"],
                                            max_age=3600, max_bytes=64 * 1024**2))
    assert not again["changed"] and again["action"] == "none" and again["actions"] == [], again

    changed = dict(orders, max_age="2h", subjects=["orders.>"])
    predicted = module("jetstream_stream", changed, check_mode=True, diff=True)
    assert predicted["changed"] and predicted["action"] == "update", predicted
    assert predicted["actions"][0]["subject"] == "$JS.hub.API.STREAM.UPDATE.ORDERS"
    assert predicted["actions"][0]["body"]["max_age"] == 7200 * 10**9
    assert predicted["diff"]["before"]["max_age"] == 3600 * 10**9
    assert predicted["diff"]["after"]["max_age"] == 7200 * 10**9
    assert predicted["diff"]["after"]["subjects"] == ["orders.>"]
    assert hub.info("ORDERS")["config"]["max_age"] == 3600 * 10**9, "check mode changed the stream"

    updated = module("jetstream_stream", changed, diff=True)
    assert updated["changed"] and updated["action"] == "update", updated
    assert updated["stream"]["config"]["max_age"] == 7200 * 10**9
    assert updated["diff"] == predicted["diff"]
    live = hub.info("ORDERS")["config"]
    assert live["subjects"] == ["orders.>"] and live["max_msgs_per_subject"] == 100, "an unset field was reset"
    assert not module("jetstream_stream", changed)["changed"]

    gone_check = module("jetstream_stream", hub_args(net, name="ORDERS", state="absent"), check_mode=True)
    assert gone_check["changed"] and hub.info("ORDERS") is not None
    gone = module("jetstream_stream", hub_args(net, name="ORDERS", state="absent"), diff=True)
    assert gone["changed"] and gone["action"] == "delete" and gone["stream"] == {}, gone
    assert gone["diff"]["after"] == {} and gone["diff"]["before"]["max_age"] == 7200 * 10**9
    assert hub.info("ORDERS") is None
    again = module("jetstream_stream", hub_args(net, name="ORDERS", state="absent"))
    assert not again["changed"] and again["actions"] == []


def test_cross_domain_mirror_and_sources_copy_real_messages(net, module):
    hub, leaf = net["peek"]["hub"], net["peek"]["leaf"]
    assert module("jetstream_stream", hub_args(net, name="cnc", subjects=["cnc.>"]))["changed"]
    recv = dict(servers=[net["leaf"]], domain="leaf", name="recv-cnc", mirror={"name": "cnc", "domain": "hub"})
    mirrored = module("jetstream_stream", recv)
    assert mirrored["changed"], mirrored
    assert mirrored["stream"]["config"]["mirror"]["external"]["api"] == "$JS.hub.API"

    acks = hub.publish("cnc.reboot", 5, prefix="cmd")
    assert [a.seq for a in acks] == [1, 2, 3, 4, 5] and acks[0].domain == "hub"
    leaf.wait_messages("recv-cnc", 5)
    assert [m.data for m in leaf.messages("recv-cnc", 5)] == [b"cmd-%d" % i for i in range(5)]
    assert not module("jetstream_stream", recv)["changed"]

    assert module("jetstream_stream", dict(servers=[net["leaf"]], domain="leaf", name="test",
                                           subjects=["test.>"]))["changed"]
    aggregate = hub_args(net, name="aggregate", sources=[{"name": "test", "domain": "leaf",
                                                          "filter_subject": "test.>"}])
    assert module("jetstream_stream", aggregate)["changed"]
    leaf.publish("test.temperature", 3, prefix="t")
    hub.wait_messages("aggregate", 3)
    copied = hub.messages("aggregate", 3)
    assert [m.data for m in copied] == [b"t-0", b"t-1", b"t-2"]
    assert all("Nats-Stream-Source" in (m.headers or {}) for m in copied)
    assert not module("jetstream_stream", aggregate)["changed"]

    from_leaf = dict(servers=[net["leaf"]], api_prefix="$JS.hub.API", name="aggregate",
                     sources=[{"name": "test", "external": {"api": "$JS.leaf.API"}, "filter_subject": "test.>"}])
    through_prefix = module("jetstream_stream", from_leaf)
    assert not through_prefix["changed"], through_prefix
    updated = module("jetstream_stream", dict(from_leaf, max_msgs=1000))
    assert updated["changed"] and updated["actions"][0]["subject"] == "$JS.hub.API.STREAM.UPDATE.aggregate"
    assert hub.info("aggregate")["config"]["max_msgs"] == 1000


def test_immutable_change_fails_cleanly_and_version_rules_hold(net, module):
    hub = net["peek"]["hub"]
    orders = hub_args(net, name="ORDERS", subjects=["orders.>"], storage="file")
    module("jetstream_stream", orders)
    hub.publish("orders.new", 2)

    refused = module("jetstream_stream", dict(orders, storage="memory", max_age="1h"))
    assert refused["failed"] and not refused["changed"] and refused["actions"] == []
    assert refused["msg"] == ("stream 'ORDERS' in domain 'hub': storage cannot change from file to memory "
                              "(on_immutable_change=fail)")
    live = hub.info("ORDERS")
    assert live["config"]["storage"] == "file" and live["config"]["max_age"] == 0
    assert live["state"]["messages"] == 2

    to_interest = module("jetstream_stream", dict(orders, retention="interest"))
    if net["v"] >= (2, 10, 0):
        assert to_interest["changed"] and hub.info("ORDERS")["config"]["retention"] == "interest"
    else:
        assert to_interest["failed"] and "retention cannot change from limits to interest on " \
                                         "nats-server 2.9" in to_interest["msg"], to_interest
        assert hub.info("ORDERS")["config"]["retention"] == "limits"
    queue = module("jetstream_stream", dict(orders, retention="workqueue"))
    assert queue["failed"] and "never to or from workqueue" in queue["msg"] and queue["actions"] == []

    module("jetstream_stream", dict(orders, deny_delete=True))
    unset = module("jetstream_stream", dict(orders, deny_delete=False))
    assert unset["failed"] and "deny_delete cannot be unset once set" in unset["msg"]


def test_recreate_needs_allow_data_loss_for_a_stream_with_messages(net, module):
    hub = net["peek"]["hub"]
    scratch = hub_args(net, name="SCRATCH", subjects=["scratch.>"], on_immutable_change="recreate")
    module("jetstream_stream", scratch)
    hub.publish("scratch.x", 3)

    refused = module("jetstream_stream", dict(scratch, storage="memory"))
    assert refused["failed"] and refused["actions"] == [], refused
    assert refused["msg"] == ("stream 'SCRATCH' in domain 'hub': storage cannot change from file to memory; "
                              "recreating it would delete its 3 messages: set allow_data_loss to allow that")
    assert hub.info("SCRATCH")["state"]["messages"] == 3

    predicted = module("jetstream_stream", dict(scratch, storage="memory", allow_data_loss=True), check_mode=True)
    assert predicted["action"] == "recreate" and [a["subject"].rsplit(".", 2)[-2] for a in predicted["actions"]] == [
        "DELETE", "CREATE"]
    assert hub.info("SCRATCH")["config"]["storage"] == "file"
    recreated = module("jetstream_stream", dict(scratch, storage="memory", allow_data_loss=True))
    assert recreated["changed"] and recreated["action"] == "recreate", recreated
    live = hub.info("SCRATCH")
    assert live["config"]["storage"] == "memory" and live["state"]["messages"] == 0


def test_removing_a_mirror_promotes_where_the_server_allows_it(net, module):
    hub, leaf = net["peek"]["hub"], net["peek"]["leaf"]
    module("jetstream_stream", hub_args(net, name="cnc", subjects=["cnc.>"]))
    recv = dict(servers=[net["leaf"]], domain="leaf", name="recv-cnc")
    module("jetstream_stream", dict(recv, mirror={"name": "cnc", "domain": "hub"}))
    hub.publish("cnc.x", 4)
    leaf.wait_messages("recv-cnc", 4)

    promoted = module("jetstream_stream", dict(recv, subjects=["local.cnc.>"]))
    if net["v"] >= (2, 12, 0):
        assert promoted["changed"] and promoted["action"] == "promote", promoted
        live = leaf.info("recv-cnc")
        assert "mirror" not in live["config"] and live["config"]["subjects"] == ["local.cnc.>"]
        assert live["state"]["messages"] == 4
        leaf.publish("local.cnc.y", 1)
        assert leaf.info("recv-cnc")["state"]["messages"] == 5
        assert not module("jetstream_stream", dict(recv, subjects=["local.cnc.>"]))["changed"]
    else:
        assert promoted["failed"] and promoted["actions"] == [], promoted
        assert promoted["msg"].startswith("stream 'recv-cnc' in domain 'leaf': mirror cannot be removed on "
                                          "nats-server 2.9")
        assert leaf.info("recv-cnc")["config"]["mirror"]["name"] == "cnc"

    other = module("jetstream_stream", dict(recv, mirror={"name": "other", "domain": "hub"}))
    assert other["failed"] and other["actions"] == []
    assert "cannot" in other["msg"] and "mirror" in other["msg"]


BAD_INPUTS = [
    (dict(name="BAD", subjects=["bad"], bogus=1), "Unsupported parameters"),
    (dict(name="BAD", subjects=["bad"], max_age="5 minutes"),
     "stream 'BAD': max_age: '5 minutes' is not a duration"),
    (dict(name="BAD", subjects=["bad..subject"]), "stream 'BAD': subjects: 'bad..subject' is not a subject"),
    (dict(name="BAD", subjects=["bad"], mirror={"name": "cnc"}), "stream 'BAD': mirror and subjects cannot be"),
    (dict(name="BAD", subjects=["bad"], storage="tape"), "storage must be one of"),
    (dict(streams=[{"name": "GOOD", "subjects": ["good"]}, {"name": "BAD", "max_bytes": "lots"}]),
     "stream 'BAD': max_bytes: 'lots' is not a size"),
    (dict(streams=[{"name": "GOOD", "subjects": ["good"]}, {"name": "BAD", "subjects": ["b"], "colour": "red"}]),
     "colour"),
    (dict(streams=[{"name": "GOOD", "subjects": ["shared.>"]}, {"name": "BAD", "subjects": ["shared.x"]}]),
     "stream 'BAD': subjects: 'shared.x' overlaps 'shared.>' of stream 'GOOD'"),
]


def test_bad_input_is_a_clear_error_with_nothing_changed(net, module):
    for args, message in BAD_INPUTS:
        result = module("jetstream_stream", hub_args(net, **args))
        assert result.get("failed") and message in result["msg"], (args, result)
        assert not result.get("changed") and result.get("actions", []) == [], (args, result)
    assert net["peek"]["hub"].names() == []


def test_bulk_form_converges_many_streams_in_one_run(net, module):
    hub = net["peek"]["hub"]
    streams = [{"name": "S%02d" % i, "subjects": ["s.%02d.>" % i], "max_age": "1d"} for i in range(20)]
    streams += [
        {"name": "ORDERS", "subjects": ["orders.>"]},
        {"name": "RETURNS", "subjects": ["returns.>"]},
        {"name": "ARCHIVE", "sources": [{"name": "ORDERS"}, {"name": "RETURNS"}], "deny_delete": True},
        {"name": "REPORT", "mirror": {"name": "ARCHIVE"}},
    ]
    first = module("jetstream_stream", hub_args(net, streams=streams))
    assert first["changed"] and len(first["actions"]) == 24, first.get("msg")
    assert {s["action"] for s in first["streams"]} == {"create"}
    assert first["streams"][22]["stream"]["config"]["deny_delete"] is True
    hub.publish("orders.1", 2)
    hub.publish("returns.1", 1)
    hub.wait_messages("REPORT", 3)

    again = module("jetstream_stream", hub_args(net, streams=streams), diff=True)
    assert not again["changed"] and again["actions"] == [] and again["diff"] == []
    assert [s["name"] for s in again["streams"]] == [s["name"] for s in streams]

    edited = [dict(s) for s in streams]
    edited[0]["max_age"] = "2d"
    edited[1]["state"] = "absent"
    edited[21]["storage"] = "memory"
    refused = module("jetstream_stream", hub_args(net, streams=edited))
    assert refused["failed"] and refused["actions"] == [] and "'RETURNS'" in refused["msg"], refused
    assert hub.info("S00")["config"]["max_age"] == 86400 * 10**9 and hub.info("S01") is not None

    del edited[21]["storage"]
    applied = module("jetstream_stream", hub_args(net, streams=edited), diff=True)
    assert applied["changed"] and [a["subject"].split(".")[-2:] for a in applied["actions"]] == [
        ["DELETE", "S01"], ["UPDATE", "S00"]], applied["actions"]
    assert [d["before_header"] for d in applied["diff"]] == ["stream S00", "stream S01"]
    assert hub.info("S01") is None and hub.info("S00")["config"]["max_age"] == 2 * 86400 * 10**9
