"""Account and user policy on a real server in operator mode (one server for the module): tiered JetStream limits
with per-stream byte caps, max_bytes_required and max_ack_pending; users limited by connection type and source
network; a scoped signing key whose template gives users their permissions; subject mappings. Each idempotent,
with check and diff mode."""

import asyncio

import nats
import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import JetStream, JetStreamError, NatsClient

from conftest import Server, free_port, operator_mode_conf, run_module
from test_nsc_modules import tree_hash

TIERED = dict(name="TIERED", signing_key=True, jetstream=dict(tiers=dict(R1=dict(
    disk_storage="256KiB", mem_storage="64KiB", streams=5, consumers=5, max_ack_pending=10,
    disk_max_stream_bytes="128KiB", max_bytes_required=True))))
TEMPLATE = dict(pub=dict(allow=["orders.>"]), sub=dict(allow=["orders.>", "_INBOX.>"]))
APP = dict(name="APP", signing_key=True,
           scoped_signing_keys=[dict(role="reader", description="orders only", template=TEMPLATE)],
           mappings=[dict(subject="legacy.*", to=[dict(subject="orders.{{wildcard(1)}}")])])
USERS = [dict(account="TIERED", name="js"),
         dict(account="APP", name="admin"),
         dict(account="APP", name="leafonly", allowed_connection_types=["LEAFNODE"]),
         dict(account="APP", name="faraway", src=["10.99.0.0/16"]),
         dict(account="APP", name="near", src=["127.0.0.0/8"], allowed_connection_types=["standard"]),
         dict(account="APP", name="reader", signing_role="reader")]


def operator_server(binary, tmp_path, operator, extra="", domain=None):
    """One server in operator mode (its config with ``extra`` lines), healthy: (Server, its URL). The caller stops
    it."""
    port, http = free_port(), free_port()
    path = str(tmp_path / "operator.conf")
    with open(path, "w") as handle:
        handle.write(operator_mode_conf(tmp_path, operator, port, http, domain=domain) + extra)
    server = Server(binary, path, http)
    try:
        server.wait(lambda: server.get("healthz")["status"] == "ok")
    except AssertionError:
        server.stop()
        raise
    return server, "nats://127.0.0.1:%d" % port


@pytest.fixture(scope="module")
def policy(nats_binary, tmp_path_factory):
    """The accounts and users above, in a store, pushed to one server."""
    binary, version = nats_binary
    tmp_path = tmp_path_factory.mktemp("policy")
    base = dict(store_dir=str(tmp_path / "stores"), keys_dir=str(tmp_path / "keys"), operator="fleet")
    operator = run_module("nsc_operator", dict(base, signing_key=True))
    assert operator["changed"], operator
    server, url = operator_server(binary, tmp_path, operator)
    try:
        push = dict(push=True, servers=[url], timeout=2.0, expected_servers=1)
        accounts = {}
        for account in (TIERED, APP):
            result = run_module("nsc_account", dict(base, **dict(account, **push)))
            assert result["changed"] and result["unconfirmed"] == [], result
            accounts[account["name"]] = result
        creds = {}
        for user in USERS:
            result = run_module("nsc_user", dict(base, **user))
            assert result["changed"], result
            creds[user["name"]] = result["creds_file"]
            users_result = result
        yield dict(base=base, url=url, push=push, creds=creds, version=version, accounts=accounts,
                   reader=users_result, roots=(base["store_dir"], base["keys_dir"]))
    finally:
        server.stop()


def older(version, *least):
    return tuple(int(part) for part in version.split("-")[0].split(".")[:3]) < least


def api(env, user, name, body=None):
    with NatsClient({"servers": [env["url"]], "creds": env["creds"][user], "timeout": 3.0}) as client:
        return JetStream(client).call(name, body)


def refused(env, user, name, body):
    with pytest.raises(JetStreamError) as caught:
        api(env, user, name, body)
    return str(caught.value)


def test_a_second_run_changes_nothing_and_check_and_diff_mode_predict(policy):
    env = policy
    before = tree_hash(*env["roots"])
    for account in (TIERED, APP):
        again = run_module("nsc_account", dict(env["base"], **dict(account, **env["push"])), check_mode=True, diff=True)
        assert again["changed"] is False and again["push_needed"] is False, again
        assert again["diff"]["before"] == again["diff"]["after"]
    for user in USERS:
        assert run_module("nsc_user", dict(env["base"], **user))["changed"] is False, user
    assert tree_hash(*env["roots"]) == before

    # a new mapping: check mode predicts it, diff shows it, nothing is written
    more = dict(APP, mappings=APP["mappings"] + [dict(subject="split", to=[
        dict(subject="split.a", weight=50), dict(subject="split.b", weight=50)])])
    predicted = run_module("nsc_account", dict(env["base"], **more), check_mode=True, diff=True)
    assert predicted["changed"], predicted
    assert predicted["diff"]["after"]["nats"]["mappings"]["split"] == [
        {"subject": "split.a", "weight": 50}, {"subject": "split.b", "weight": 50}]
    assert "split" not in predicted["diff"]["before"]["nats"]["mappings"]
    assert tree_hash(*env["roots"]) == before
    scoped = env["accounts"]["APP"]["scoped_signing_keys"]
    assert [key["role"] for key in scoped] == ["reader"] and env["reader"]["issuer"] == scoped[0]["key"]
    assert env["reader"]["signing_role"] == "reader"


def test_tiered_limits_are_what_the_server_enforces(policy):
    env = policy
    info = api(env, "js", "INFO")
    assert set(info.get("tiers") or {}) == {"R1"}, info
    limits = info["tiers"]["R1"]["limits"]
    assert limits["max_storage"] == 256 * 1024 and limits["max_memory"] == 64 * 1024, limits
    assert limits["max_streams"] == 5 and limits["max_consumers"] == 5, limits
    assert limits["max_ack_pending"] == 10 and limits["max_bytes_required"] is True, limits
    assert limits["storage_max_stream_bytes"] == 128 * 1024, limits

    stream = {"subjects": ["t.>"], "storage": "file", "num_replicas": 1}
    assert "max bytes" in refused(env, "js", "STREAM.CREATE.nobytes", dict(stream, name="nobytes")).lower()
    refused(env, "js", "STREAM.CREATE.toobig", dict(stream, name="toobig", max_bytes=256 * 1024))
    for number in (1, 2):
        config = dict(stream, name="s%d" % number, subjects=["t%d.>" % number], max_bytes=128 * 1024)
        api(env, "js", "STREAM.CREATE.s%d" % number, config)
    # the two streams hold the R1 tier's 256 KiB: a third is past it
    past = refused(env, "js", "STREAM.CREATE.s3", dict(stream, name="s3", subjects=["t3.>"], max_bytes=1024))
    assert "insufficient" in past.lower() or "resources" in past.lower(), past
    tier = api(env, "js", "INFO")["tiers"]["R1"]
    # 2.9.10 does not report what streams reserve
    assert tier.get("reserved_storage", 256 * 1024) == 256 * 1024 and tier["streams"] == 2, tier

    # a consumer may not allow more unacknowledged messages than the tier's max_ack_pending
    consumer = {"durable_name": "work", "ack_policy": "explicit", "max_ack_pending": 100}
    refused(env, "js", "CONSUMER.DURABLE.CREATE.s1.work", {"stream_name": "s1", "config": consumer})
    made = api(env, "js", "CONSUMER.DURABLE.CREATE.s1.work", {"stream_name": "s1", "config": dict(
        consumer, max_ack_pending=10)})
    assert made["config"]["max_ack_pending"] == 10


def session(env, user, publish=()):
    """Connect as ``user`` and publish to each subject of ``publish``: ('connected', the errors the server sent
    back, such as a permissions violation), or ('refused: <why>', [])."""
    async def run():
        errors = []

        async def on_error(exc):
            errors.append(str(exc))
        try:
            nc = await nats.connect(env["url"], user_credentials=env["creds"][user], allow_reconnect=False,
                                    connect_timeout=3, max_reconnect_attempts=0, error_cb=on_error)
        except Exception as exc:  # nats-py raises several kinds on a refused connect
            return "refused: %s %s" % (exc, errors), []
        try:
            for subject in publish:
                await nc.publish(subject, b"x")
            await nc.flush()
            await asyncio.sleep(0.3 if publish else 0)
            return "connected", errors
        finally:
            await nc.close()
    return asyncio.run(run())


def test_users_are_held_to_their_connection_types_and_networks(policy):
    env = policy
    assert session(env, "near") == ("connected", [])
    leafonly = session(env, "leafonly")[0]
    assert leafonly.startswith("refused") and "authorization" in leafonly.lower(), leafonly
    assert session(env, "faraway")[0].startswith("refused"), "a user from 10.99.0.0/16 connected from 127.0.0.1"


def test_a_scoped_user_gets_the_templates_permissions_and_a_mapping_routes(policy):
    env = policy

    async def run():
        reader = await nats.connect(env["url"], user_credentials=env["creds"]["reader"], allow_reconnect=False)
        admin = await nats.connect(env["url"], user_credentials=env["creds"]["admin"], allow_reconnect=False)
        try:
            sub = await reader.subscribe("orders.>")
            await reader.flush()
            await admin.publish("legacy.7", b"routed")  # mapped to orders.7
            await reader.publish("orders.1", b"own")
            await reader.flush()
            got = []
            for _unused in range(2):
                msg = await sub.next_msg(timeout=2)
                got.append((msg.subject, msg.data))
            return sorted(got)
        finally:
            await admin.close()
            await reader.close()
    assert asyncio.run(run()) == [("orders.1", b"own"), ("orders.7", b"routed")]
    outcome, errors = session(env, "reader", ["secret"])
    assert outcome == "connected" and any(
        "permissions violation" in error.lower() and "secret" in error for error in errors), errors


def test_nsc_info_lists_the_policy_and_a_template_change_reaches_the_role_users(policy):
    env = policy
    info = run_module("nsc_info", dict(env["base"]))
    accounts = dict((row["name"], row) for row in info["accounts"])
    assert accounts["TIERED"]["jetstream"] == {"tiers": {"R1": {
        "disk_storage": 256 * 1024, "mem_storage": 64 * 1024, "streams": 5, "consumers": 5, "max_ack_pending": 10,
        "disk_max_stream_bytes": 128 * 1024, "max_bytes_required": True}}}, accounts["TIERED"]
    assert accounts["APP"]["mappings"] == {"legacy.*": [{"subject": "orders.{{wildcard(1)}}"}]}
    assert [row["role"] for row in accounts["APP"]["scoped_signing_keys"]] == ["reader"]

    # the role may now publish to secret too: pushed, the user (not issued again) may
    wider = dict(APP, scoped_signing_keys=[dict(APP["scoped_signing_keys"][0], template=dict(
        TEMPLATE, pub=dict(allow=["orders.>", "secret"])))])
    changed = run_module("nsc_account", dict(env["base"], **dict(wider, **env["push"])))
    assert changed["changed"] and changed["unconfirmed"] == [], changed
    assert changed["scoped_signing_keys"] == env["accounts"]["APP"]["scoped_signing_keys"]  # the same key
    reader = dict(USERS[-1])
    assert run_module("nsc_user", dict(env["base"], **reader))["changed"] is False

    assert session(env, "reader", ["secret"]) == ("connected", [])

    # off the role: issued again by the account's signing key, with permissions of its own
    off = run_module("nsc_user", dict(env["base"], account="APP", name="reader", permissions=dict(
        pub=dict(allow=["orders.>"]))))
    assert off["changed"] and off["signing_role"] is None, off
    assert off["issuer"] in env["accounts"]["APP"]["signing_keys"], off
    back = run_module("nsc_user", dict(env["base"], **reader))
    assert back["changed"] and back["signing_role"] == "reader", back
