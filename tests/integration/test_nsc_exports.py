"""nsc_export against a real server in operator mode with the full resolver:
imports pushed and working without a restart, private exports, the seeds'
cross-account mirror, a shared durable pull consumer, the exchange-account
pattern, idempotence, check mode, and bad input leaving the store alone."""

import asyncio
import json
import time

import nats
import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import JetStream, NatsClient
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.export_claims import account_hash

from conftest import free_port, operator_mode_conf
from test_nsc_modules import tree_hash

JS_LIMITS = dict(disk_storage="64MiB", mem_storage="8MiB", streams=10, consumers=20)


def build_store(module, tmp_path, names):
    base = dict(store_dir=str(tmp_path / "stores"), keys_dir=str(tmp_path / "keys"), operator="fleet")
    operator = module("nsc_operator", dict(base, signing_key=True))
    assert operator["changed"], operator
    creds = {}
    for name in names:
        assert module("nsc_account", dict(base, name=name, signing_key=True, jetstream=JS_LIMITS))["changed"]
        user = module("nsc_user", dict(base, account=name, name="app"))
        assert user["changed"], user
        creds[name] = user["creds_file"]
    return base, operator, creds


@pytest.fixture
def operator_server(nats_binary, start_server, module, tmp_path):
    """A store with the given accounts (all pushed) and one server, JetStream domain 'hub'."""
    binary, version = nats_binary

    def make(*names):
        base, operator, creds = build_store(module, tmp_path, names)
        port, http = free_port(), free_port()
        conf = operator_mode_conf(tmp_path, operator, port, http, domain="hub")
        server = start_server(binary, conf, "op", http)
        server.wait(lambda: server.get("healthz")["status"] == "ok")
        url = "nats://127.0.0.1:%d" % port
        push = dict(push=True, servers=[url], timeout=2.0, expected_servers=1)
        ids = {}
        for name in names:
            pushed = module("nsc_account", dict(base, name=name, signing_key=True, jetstream=JS_LIMITS, **push))
            assert pushed["unconfirmed"] == [] and not pushed.get("failed"), pushed
            ids[name] = pushed["account_id"]
        return dict(base=base, url=url, creds=creds, push=push, version=version, sys_creds=operator["sys_creds"],
                    roots=(base["store_dir"], base["keys_dir"]), ids=ids)
    return make


def client(env, account):
    return NatsClient({"servers": [env["url"]], "creds": env["creds"][account], "timeout": 3.0})


def receive(env, account, subject, send):
    """Subscribe in ``account`` on ``subject``, run ``send()``, return the payloads received."""
    async def run():
        nc = await nats.connect(env["url"], user_credentials=env["creds"][account], allow_reconnect=False,
                                connect_timeout=3)
        try:
            sub = await nc.subscribe(subject)
            await nc.flush()
            await asyncio.get_running_loop().run_in_executor(None, send)
            got = []
            try:
                while True:
                    got.append((await sub.next_msg(timeout=1)).data)
            except nats.errors.TimeoutError:
                return got
        finally:
            await nc.close()
    return asyncio.run(run())


def wait_for(predicate, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("timed out; last %r" % (value,))


def test_stream_and_private_service_imports_work_without_a_restart(operator_server, module):
    env = operator_server("APP", "BILLING")
    orders = dict(env["base"], account="APP", name="orders", subject="orders.>",
                  importers=[{"account": "BILLING", "local_subject": "billing.orders.>"}], **env["push"])

    before = tree_hash(*env["roots"])
    predicted = module("nsc_export", orders, check_mode=True, diff=True)
    assert predicted["changed"] and predicted["pushed"] == [], predicted
    assert sorted(a["name"] for a in predicted["accounts"]) == ["APP", "BILLING"]
    assert predicted["diff"]["after"]["BILLING"]["imports"][0]["local_subject"] == "billing.orders.>"
    assert tree_hash(*env["roots"]) == before

    created = module("nsc_export", orders)
    assert created["changed"] and created["unconfirmed"] == [] and len(created["pushed"]) == 2, created

    def send():
        with client(env, "APP") as app:
            app.publish("orders.new", b"order 1")
            app.flush()
    assert receive(env, "BILLING", "billing.orders.>", send) == [b"order 1"]

    quotes = dict(env["base"], account="APP", name="quotes", subject="quote.request", type="service",
                  public=False, importers=[{"account": "BILLING", "local_subject": "app.quote"}], **env["push"])
    private = module("nsc_export", quotes)
    assert private["changed"] and private["unconfirmed"] == [], private
    with open("%s/fleet/accounts/BILLING/BILLING.jwt" % env["base"]["store_dir"]) as handle:
        from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
        billing = jwt.decode(handle.read())
    token = [i for i in billing["nats"]["imports"] if i["name"] == "quotes"][0]["token"]
    activation = jwt.decode(token)
    assert activation["nats"]["type"] == "activation" and activation["sub"] == billing["sub"], activation
    assert activation["nats"]["subject"] == "quote.request" and activation["nats"]["kind"] == "service"
    with open("%s/fleet/accounts/APP/APP.jwt" % env["base"]["store_dir"]) as handle:
        app = jwt.decode(handle.read())
    # signed by the account's signing key, so it names the account it speaks for
    assert activation["iss"] in app["nats"]["signing_keys"] and activation["nats"]["issuer_account"] == app["sub"]

    async def serve_and_ask():
        responder = await nats.connect(env["url"], user_credentials=env["creds"]["APP"], allow_reconnect=False)
        asker = await nats.connect(env["url"], user_credentials=env["creds"]["BILLING"], allow_reconnect=False)
        try:
            async def answer(msg):
                await msg.respond(b"price for " + msg.data)
            await responder.subscribe("quote.request", cb=answer)
            await responder.flush()
            # the responder's interest reaches the asker's server over the route a moment later
            for attempt in range(10):
                try:
                    return (await asker.request("app.quote", b"widget", timeout=1)).data
                except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
                    if attempt == 9:
                        raise
                    await asyncio.sleep(0.5)
        finally:
            await asker.close()
            await responder.close()
    assert asyncio.run(serve_and_ask()) == b"price for widget"

    # the same again: nothing signed, written or pushed (the activation token is kept)
    before = tree_hash(*env["roots"])
    for args in (orders, quotes):
        again = module("nsc_export", args)
        assert again["changed"] is False and again["pushed"] == [] and not again.get("failed"), again
    assert tree_hash(*env["roots"]) == before

    # absent in check mode changes nothing; for real the import stops working
    gone_args = dict(orders, state="absent")
    assert module("nsc_export", gone_args, check_mode=True)["changed"]
    assert tree_hash(*env["roots"]) == before
    gone = module("nsc_export", gone_args)
    assert gone["changed"] and gone["unconfirmed"] == [], gone
    assert receive(env, "BILLING", "billing.orders.>", send) == []
    assert module("nsc_export", gone_args)["changed"] is False


def test_an_importer_taken_off_a_private_export_has_its_activation_revoked(operator_server, module):
    from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
    env = operator_server("APP", "BILLING", "OTHER")
    ids = {}
    for name in ("APP", "BILLING"):
        with open("%s/fleet/accounts/%s/%s.jwt" % (env["base"]["store_dir"], name, name)) as handle:
            ids[name] = jwt.decode(handle.read())["sub"]
    importers = [{"account": "BILLING", "local_subject": "app.quote"}, {"account": "OTHER", "local_subject": "app.quote"}]
    quotes = dict(env["base"], account="APP", name="quotes", subject="quote.request", type="service", public=False,
                  importers=importers, **env["push"])
    assert module("nsc_export", quotes)["changed"]

    def served(account):
        """The account's claims as the server's resolver holds them."""
        with NatsClient({"servers": [env["url"]], "creds": env["sys_creds"], "timeout": 3.0}) as sys_client:
            return jwt.decode(sys_client.request("$SYS.REQ.ACCOUNT.%s.CLAIMS.LOOKUP" % ids[account], b"").decode())

    def served_export():
        return [e for e in served("APP")["nats"]["exports"] if e["name"] == "quotes"][0]
    assert not served_export().get("revocations")

    cut = module("nsc_export", dict(quotes, importers=importers[1:]))
    assert cut["changed"] and cut["unconfirmed"] == [], cut
    # the server holds APP's JWT with BILLING's activation revoked, and BILLING's import is gone
    revoked = wait_for(lambda: served_export().get("revocations"))
    assert list(revoked) == [ids["BILLING"]], revoked
    billing = served("BILLING")
    assert not [i for i in billing["nats"].get("imports") or [] if i["name"] == "quotes"], billing
    again = module("nsc_export", dict(quotes, importers=importers[1:]))
    assert again["changed"] is False, again


def make_stream(env, account, config):
    with client(env, account) as c:
        return JetStream(c).call("STREAM.CREATE.%s" % config["name"], config)


def publish(env, account, subject, count, start=0):
    with client(env, account) as c:
        for number in range(start, start + count):
            ack = json.loads(c.request(subject, b"message %d" % number).decode())
            assert "seq" in ack, ack


def stream_messages(env, account, name):
    with client(env, account) as c:
        return JetStream(c).call("STREAM.INFO.%s" % name)["state"]["messages"]


def publish_big(env, account, subject, count, size=48000):
    with client(env, account) as c:
        for number in range(count):
            ack = json.loads(c.request(subject, b"%06d" % number + b"x" * size).decode())
            assert "seq" in ack, ack


def settled(env, account, name, quiet=3.0):
    """The message count of a stream once it stopped growing for ``quiet`` seconds."""
    last, since = -1, time.monotonic()
    while time.monotonic() - since < quiet:
        count = stream_messages(env, account, name)
        if count != last:
            last, since = count, time.monotonic()
        time.sleep(0.2)
    return last


def test_the_seeds_cross_account_mirror_copies_real_messages(operator_server, module):
    env = operator_server("test", "IMPORTER")
    make_stream(env, "test", {"name": "crossacc", "subjects": ["crossacc.>"], "storage": "file"})
    # ~7 MB: more than one flow-control window, so the catch-up needs $JS.FC
    publish_big(env, "test", "crossacc.a", 150)

    share = dict(env["base"], share_stream=dict(stream="crossacc", from_account="test", from_domain="hub",
                                                to_account="IMPORTER", kind="mirror", api_prefix="JS.test@hub.API",
                                                deliver_prefix="deliver.importer.crossacc"), **env["push"])
    shared = module("nsc_export", share)
    assert shared["changed"] and shared["unconfirmed"] == [], shared
    assert shared["external"] == {"api": "JS.test@hub.API", "deliver": "deliver.importer.crossacc"}
    v2 = "$JS.FC.*.%s.crossacc.*.*" % account_hash(env["ids"]["test"])
    assert sorted(e["subject"] for e in shared["exports"]) == sorted([
        "$JS.FC.crossacc.*.*", v2, "$JS.hub.API.CONSUMER.CREATE.crossacc", "$JS.hub.API.CONSUMER.CREATE.crossacc.>",
        "deliver.importer.crossacc.>"])

    # without the flow-control export the catch-up stalls: the reason the share includes it (a server before 2.14,
    # or one without js_ack_fc_v2, answers on the v1 subject; test_ack_v2 shows the v2 one)
    without_fc = module("nsc_export", dict(env["base"], account="test", name="crossacc-fc", type="service",
                                           subject="$JS.FC.crossacc.*.*", state="absent", **env["push"]))
    assert without_fc["changed"] and without_fc["unconfirmed"] == [], without_fc
    make_stream(env, "IMPORTER", {"name": "stalled", "storage": "file",
                                  "mirror": {"name": "crossacc", "external": shared["external"]}})
    assert 0 < settled(env, "IMPORTER", "stalled") < 150

    restored = module("nsc_export", share)
    assert restored["changed"] and [a["name"] for a in restored["accounts"]] == ["IMPORTER", "test"], restored
    make_stream(env, "IMPORTER", {"name": "crossacc", "storage": "file",
                                  "mirror": {"name": "crossacc", "external": shared["external"]}})
    wait_for(lambda: stream_messages(env, "IMPORTER", "crossacc") == 150, timeout=30)
    # live messages follow
    publish(env, "test", "crossacc.b", 20)
    wait_for(lambda: stream_messages(env, "IMPORTER", "crossacc") == 170)

    again = module("nsc_export", share)
    assert again["changed"] is False and again["pushed"] == [], again


def test_a_shared_durable_pull_consumer_is_read_from_the_importing_account(operator_server, module):
    env = operator_server("test", "IMPORTER")
    make_stream(env, "test", {"name": "jobs", "subjects": ["jobs.>"], "storage": "file"})
    with client(env, "test") as c:
        JetStream(c).call("CONSUMER.DURABLE.CREATE.jobs.work", {
            "stream_name": "jobs", "config": {"durable_name": "work", "ack_policy": "explicit"}})
    publish(env, "test", "jobs.x", 5)

    shared = module("nsc_export", dict(env["base"], share_stream=dict(
        stream="jobs", from_account="test", from_domain="hub", to_account="IMPORTER", to_domain="edge",
        kind="consumer", durable="work"), **env["push"]))
    assert shared["changed"] and shared["unconfirmed"] == [], shared
    assert shared["external"]["next"] == "JS.test@hub.API.CONSUMER.MSG.NEXT.jobs.work"
    assert sorted(e["subject"] for e in shared["exports"]) == sorted([
        "$JS.ACK.jobs.work.>", "$JS.ACK.*.%s.jobs.work.>" % account_hash(env["ids"]["test"]),
        "$JS.hub.API.CONSUMER.MSG.NEXT.jobs.work"])

    async def pull_and_ack():
        nc = await nats.connect(env["url"], user_credentials=env["creds"]["IMPORTER"], allow_reconnect=False)
        try:
            inbox = nc.new_inbox()
            sub = await nc.subscribe(inbox)
            await nc.publish(shared["external"]["next"], json.dumps({"batch": 5, "expires": 2 * 10 ** 9}).encode(),
                             reply=inbox)
            got = []
            while len(got) < 5:
                msg = await sub.next_msg(timeout=3)
                if msg.data:
                    got.append(msg.data)
                    assert msg.reply.startswith("$JS.ACK.jobs.work."), msg.reply
                    await nc.publish(msg.reply, b"+ACK")
            await nc.flush()
            return got
        finally:
            await nc.close()
    assert asyncio.run(pull_and_ack()) == [b"message %d" % n for n in range(5)]

    def acked():
        with client(env, "test") as c:
            info = JetStream(c).call("CONSUMER.INFO.jobs.work")
        return info["num_ack_pending"] == 0 and info["ack_floor"]["stream_seq"] == 5
    wait_for(acked)


def test_exchange_account_keeps_leaf_accounts_apart_while_the_hub_sources_them(operator_server, module):
    """Single server, accounts LEAFACC, LEAF2, EXCACC, HUBACC: each leaf account shares
    its stream with the exchange account only; the exchange account aggregates them
    and shares the aggregate with the hub account."""
    env = operator_server("LEAFACC", "LEAF2", "EXCACC", "HUBACC")
    for leaf in ("LEAFACC", "LEAF2"):
        make_stream(env, leaf, {"name": "events_%s" % leaf, "subjects": ["events.>"], "storage": "file"})
        publish(env, leaf, "events.%s" % leaf.lower(), 10)
    sources = []
    for leaf in ("LEAFACC", "LEAF2"):
        shared = module("nsc_export", dict(env["base"], share_stream=dict(
            stream="events_%s" % leaf, from_account=leaf, from_domain="hub", to_account="EXCACC", to_domain="hub"),
            **env["push"]))
        assert shared.get("changed") and shared["unconfirmed"] == [], shared
        sources.append({"name": "events_%s" % leaf, "filter_subject": "events.%s" % leaf.lower(),
                        "external": shared["external"]})
    assert sources[0]["external"] != sources[1]["external"]
    # two origins of one name would share $JS.FC.<stream>.*.* in the exchange account
    before = tree_hash(*env["roots"])
    make_stream(env, "LEAF2", {"name": "events_LEAFACC", "subjects": ["other.>"], "storage": "file"})
    clash = module("nsc_export", dict(env["base"], share_stream=dict(
        stream="events_LEAFACC", from_account="LEAF2", from_domain="hub", to_account="EXCACC")))
    assert clash.get("failed") and "overlaps its import" in clash["msg"], clash
    assert tree_hash(*env["roots"]) == before
    make_stream(env, "EXCACC", {"name": "exchange", "storage": "file", "sources": sources})
    up = module("nsc_export", dict(env["base"], share_stream=dict(
        stream="exchange", from_account="EXCACC", from_domain="hub", to_account="HUBACC", to_domain="hub"),
        **env["push"]))
    assert up["changed"] and up["unconfirmed"] == [], up
    # the returned external block is what jetstream_stream takes
    hub_stream = module("jetstream_stream", dict(servers=[env["url"]], creds=env["creds"]["HUBACC"], name="all",
                                                 sources=[{"name": "exchange", "external": up["external"]}]))
    assert hub_stream["changed"] and not hub_stream.get("failed"), hub_stream
    wait_for(lambda: stream_messages(env, "HUBACC", "all") == 20)

    # a leaf account reaches neither the other leaf's API nor its deliveries
    with client(env, "LEAF2") as c:
        with pytest.raises(Exception):
            c.request("JS.LEAFACC@hub.API.CONSUMER.CREATE.events", b"{}", timeout=1)
    with open("%s/fleet/accounts/LEAF2/LEAF2.jwt" % env["base"]["store_dir"]) as handle:
        from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
        assert "imports" not in jwt.decode(handle.read())["nats"]


def test_bad_input_names_the_problem_and_leaves_the_store_alone(module, tmp_path):
    base, _operator, _creds = build_store(module, tmp_path, ("A", "B", "C"))
    roots = (base["store_dir"], base["keys_dir"])
    assert module("nsc_export", dict(base, account="A", name="ev", subject="ev.>",
                                     importers=[{"account": "B"}]))["changed"]
    assert module("nsc_export", dict(base, account="B", name="ev", subject="ev.>",
                                     importers=[{"account": "C"}]))["changed"]
    before = tree_hash(*roots)
    cases = [
        (dict(account="A", name="x", subject="x", importers=[{"account": "NOPE"}]),
         "export 'x' of account 'A': importers[0]: account 'NOPE' is not in the store"),
        (dict(account="NOPE", name="x", subject="x"), "account 'NOPE' is not in the store"),
        (dict(account="A", name="eu", subject="ev.eu"), "subject 'ev.eu' overlaps export 'ev'"),
        (dict(account="A", name="bad", subject="ev.a*"), "export 'bad' of account 'A': subject: 'ev.a*'"),
        (dict(account="C", name="ev", subject="ev.>", importers=[{"account": "A"}]), "import cycle C -> A -> B -> C"),
        (dict(share_stream=dict(stream="s", from_account="A", to_account="B", kind="consumer")), "needs a durable"),
    ]
    for args, message in cases:
        failed = module("nsc_export", dict(base, **args))
        assert failed.get("failed") and message in failed["msg"], (args, failed)
    assert tree_hash(*roots) == before


def test_a_replaced_signing_key_is_retired_only_once_its_activations_are_signed_again(module, tmp_path):
    from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
    base, _operator, _creds = build_store(module, tmp_path, ["APP", "BILLING"])
    quotes = dict(base, account="APP", name="quotes", subject="quote.request", type="service", public=False,
                  importers=[{"account": "BILLING", "local_subject": "app.quote"}])
    assert module("nsc_export", quotes)["changed"]
    rotated = module("nsc_account", dict(base, name="APP", signing_key=True, jetstream=JS_LIMITS,
                                         rotate_signing_key=True))
    old_key, = rotated["previous_signing_keys"]
    retire = dict(base, name="APP", signing_key=True, jetstream=JS_LIMITS, retire_signing_keys=True)
    before = tree_hash(base["store_dir"], base["keys_dir"])
    refused = module("nsc_account", retire)
    assert refused.get("failed") and "BILLING (quote.request)" in refused["msg"] and old_key in refused["msg"], refused
    assert tree_hash(base["store_dir"], base["keys_dir"]) == before
    signed_again = module("nsc_export", quotes)
    assert signed_again["changed"], signed_again
    retired = module("nsc_account", retire)
    assert retired["retired_signing_keys"] == [old_key], retired
    with open("%s/fleet/accounts/BILLING/BILLING.jwt" % base["store_dir"]) as handle:
        billing = jwt.decode(handle.read())
    token = [i for i in billing["nats"]["imports"] if i["name"] == "quotes"][0]["token"]
    assert jwt.decode(token)["iss"] == retired["signing_keys"][0]
