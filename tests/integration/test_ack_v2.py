"""share_stream against a 2.14+ server that puts the JetStream domain and the account hash in its ack and
flow-control subjects (feature_flags { js_ack_fc_v2: true }): a cross-account mirror catches up past the first
flow-control window and an importer's ack reaches a shared durable with the v2 exports, and both stall with only
the v1 ones. One server for the module; on a server before 2.14 (no v2 subjects) the module is skipped."""

import asyncio
import json
import time

import nats
import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import JetStream
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.export_claims import account_hash

from conftest import run_module
from test_account_policy import operator_server
from test_nsc_exports import JS_LIMITS, build_store, client, make_stream, publish, publish_big, settled, \
    stream_messages, wait_for

V2_SINCE = (2, 14, 0)


@pytest.fixture(scope="module")
def v2_server(nats_binary, tmp_path_factory):
    """Accounts EXP and IMP (pushed) on one server, JetStream domain 'hub', v2 ack and flow-control subjects on."""
    binary, version = nats_binary
    if tuple(int(part) for part in version.split("-")[0].split(".")[:3]) < V2_SINCE:
        pytest.skip("nats-server %s has no v2 ack and flow-control subjects (js_ack_fc_v2 came with 2.14.0); "
                    "test_nsc_exports shows it takes the share's account JWTs and works on the v1 ones" % version)
    tmp_path = tmp_path_factory.mktemp("ackv2")
    base, operator, creds = build_store(run_module, tmp_path, ("EXP", "IMP"))
    server, url = operator_server(binary, tmp_path, operator, "feature_flags { js_ack_fc_v2: true }\n", domain="hub")
    try:
        push = dict(push=True, servers=[url], timeout=2.0, expected_servers=1)
        publics = {}
        for name in ("EXP", "IMP"):
            pushed = run_module("nsc_account", dict(base, name=name, signing_key=True, jetstream=JS_LIMITS, **push))
            assert pushed["unconfirmed"] == [] and not pushed.get("failed"), pushed
            publics[name] = pushed["account_id"]
        yield dict(base=base, url=url, creds=creds, push=push, publics=publics)
    finally:
        server.stop()


def drop_export(env, name, subject):
    """Remove one export of the share (and its import), as if the share had only the v1 ones."""
    dropped = run_module("nsc_export", dict(env["base"], account="EXP", name=name, type="service", subject=subject,
                                            state="absent", **env["push"]))
    assert dropped["changed"] and dropped["unconfirmed"] == [], dropped


def test_a_cross_account_mirror_catches_up_on_v2_flow_control(v2_server, module):
    env = v2_server
    make_stream(env, "EXP", {"name": "big", "subjects": ["big.>"], "storage": "file"})
    # ~4.8 MB: more than one flow-control window
    publish_big(env, "EXP", "big.a", 100)
    share = dict(env["base"], share_stream=dict(stream="big", from_account="EXP", from_domain="hub",
                                                to_account="IMP", kind="mirror"), **env["push"])
    shared = module("nsc_export", share)
    assert shared["changed"] and shared["unconfirmed"] == [], shared
    v2 = "$JS.FC.*.%s.big.*.*" % account_hash(env["publics"]["EXP"])
    assert {"$JS.FC.big.*.*", v2} <= {e["subject"] for e in shared["exports"]}, shared["exports"]

    # with only the v1 flow-control export the catch-up stops after the first window
    drop_export(env, "big-fc-v2", v2)
    make_stream(env, "IMP", {"name": "stalled", "storage": "file",
                             "mirror": {"name": "big", "external": shared["external"]}})
    assert 0 < settled(env, "IMP", "stalled", quiet=2.0) < 100

    restored = module("nsc_export", share)
    assert restored["changed"] and restored["unconfirmed"] == [], restored
    make_stream(env, "IMP", {"name": "big", "storage": "file",
                             "mirror": {"name": "big", "external": shared["external"]}})
    wait_for(lambda: stream_messages(env, "IMP", "big") == 100, timeout=30)
    publish(env, "EXP", "big.b", 5)
    wait_for(lambda: stream_messages(env, "IMP", "big") == 105)
    assert module("nsc_export", share)["changed"] is False


def pull_and_ack(env, subject, count):
    """Pull ``count`` messages in IMP through a plain inbox (request()'s muxed inbox does not come back through
    the service import) and ack each; the messages' reply subjects."""
    async def run():
        nc = await nats.connect(env["url"], user_credentials=env["creds"]["IMP"], allow_reconnect=False)
        try:
            inbox = nc.new_inbox()
            sub = await nc.subscribe(inbox)
            await nc.publish(subject, json.dumps({"batch": count, "expires": 2 * 10 ** 9}).encode(), reply=inbox)
            replies = []
            while len(replies) < count:
                msg = await sub.next_msg(timeout=3)
                if msg.data:
                    replies.append(msg.reply)
                    await nc.publish(msg.reply, b"+ACK")
            await nc.flush()
            return replies
        finally:
            await nc.close()
    return asyncio.run(run())


def consumer_info(env):
    with client(env, "EXP") as c:
        return JetStream(c).call("CONSUMER.INFO.jobs.work")


def test_an_importers_ack_reaches_a_shared_durable_on_the_v2_ack_subject(v2_server, module):
    env = v2_server
    make_stream(env, "EXP", {"name": "jobs", "subjects": ["jobs.>"], "storage": "file"})
    with client(env, "EXP") as c:
        JetStream(c).call("CONSUMER.DURABLE.CREATE.jobs.work", {
            "stream_name": "jobs", "config": {"durable_name": "work", "ack_policy": "explicit"}})
    publish(env, "EXP", "jobs.x", 3)
    share = dict(env["base"], share_stream=dict(stream="jobs", from_account="EXP", from_domain="hub",
                                                to_account="IMP", kind="consumer", durable="work"), **env["push"])
    shared = module("nsc_export", share)
    assert shared["changed"] and shared["unconfirmed"] == [], shared
    v2 = "$JS.ACK.*.%s.jobs.work.>" % account_hash(env["publics"]["EXP"])
    assert sorted(e["subject"] for e in shared["exports"]) == sorted([
        "$JS.ACK.jobs.work.>", v2, "$JS.hub.API.CONSUMER.MSG.NEXT.jobs.work"])

    replies = pull_and_ack(env, shared["external"]["next"], 3)
    # the server's v2 reply subject: domain, then the hash the share computed for the exporting account
    assert all(r.startswith("$JS.ACK.hub.%s.jobs.work." % account_hash(env["publics"]["EXP"])) for r in replies)
    wait_for(lambda: consumer_info(env)["ack_floor"]["stream_seq"] == 3)

    # with only the v1 ack export the importer's ack never reaches the consumer
    drop_export(env, "jobs-work-ack-v2", v2)
    publish(env, "EXP", "jobs.x", 1, start=3)
    pull_and_ack(env, shared["external"]["next"], 1)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        info = consumer_info(env)
        assert info["ack_floor"]["stream_seq"] == 3 and info["num_ack_pending"] == 1, info
        time.sleep(0.3)

    restored = module("nsc_export", share)
    assert restored["changed"] and restored["unconfirmed"] == [], restored
    assert module("nsc_export", share)["changed"] is False
