"""nsc_operator, nsc_account and nsc_user against a real server in operator mode
with the full resolver: push, read back, use, change a limit live, idempotence,
check mode."""

import asyncio
import hashlib
import json
import os

import nats

from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import NatsClient

from conftest import free_port, operator_mode_conf


def tree_hash(*roots):
    digest = hashlib.sha256()
    for root in roots:
        for directory, dirs, files in sorted(os.walk(root)):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(directory, name)
                digest.update(path.encode())
                with open(path, "rb") as handle:
                    digest.update(handle.read())
                digest.update(oct(os.stat(path).st_mode).encode())
    return digest.hexdigest()


def js_info(url, creds):
    async def ask():
        nc = await nats.connect(url, user_credentials=creds, allow_reconnect=False, connect_timeout=3)
        try:
            sub = await nc.subscribe("work")
            await nc.publish("work", b"x")
            await sub.next_msg(timeout=2)
            return json.loads((await nc.request("$JS.API.INFO", b"", timeout=2)).data)
        finally:
            await nc.close()
    return asyncio.run(ask())


def test_operator_accounts_and_users_pushed_to_a_full_resolver(nats_binary, start_server, module, tmp_path):
    binary, version = nats_binary
    base = dict(store_dir=str(tmp_path / "stores"), keys_dir=str(tmp_path / "keys"), operator="fleet")
    roots = (base["store_dir"], base["keys_dir"])

    operator = module("nsc_operator", dict(base, signing_key=True))
    assert operator["changed"] and not operator.get("failed"), operator
    assert os.stat(operator["sys_creds"]).st_mode & 0o777 == 0o600
    account_args = dict(base, name="APP", signing_key=True,
                        jetstream=dict(disk_storage="1MiB", mem_storage="64KiB", streams=3, consumers=10))
    account = module("nsc_account", account_args)
    assert account["changed"], account
    user = module("nsc_user", dict(base, account="APP", name="worker",
                                   permissions={"pub": {"allow": ["work", "$JS.API.>"]},
                                                "sub": {"allow": ["work", "_INBOX.>"]}}))
    assert user["changed"] and os.stat(user["creds_file"]).st_mode & 0o777 == 0o600, user
    seed = open(user["creds_file"]).read().split("-----BEGIN USER NKEY SEED-----")[1].split()[0]
    assert seed.startswith("SU") and seed not in json.dumps(user)

    port, http = free_port(), free_port()
    conf = operator_mode_conf(tmp_path, operator, port, http, max_file=67108864)
    server = start_server(binary, conf, "op", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    url = "nats://127.0.0.1:%d" % port
    push = dict(push=True, servers=[url], timeout=2.0, expected_servers=1)

    # check mode: nothing written, nothing pushed, a change predicted
    before = tree_hash(*roots)
    checked = module("nsc_account", dict(account_args, **push), check_mode=True)
    assert checked["changed"] and checked["push_needed"] and "pushed" not in checked, checked
    assert tree_hash(*roots) == before

    pushed = module("nsc_account", dict(account_args, **push))
    assert pushed["changed"] and pushed["unconfirmed"] == [], pushed
    assert [(p["server"], p["ok"]) for p in pushed["pushed"]] == [("n1", True)], pushed
    with NatsClient({"servers": [url], "creds": operator["sys_creds"], "timeout": 2.0}) as client:
        looked_up = client.request("$SYS.REQ.ACCOUNT.%s.CLAIMS.LOOKUP" % account["account_id"]).decode()
    assert looked_up == pushed["jwt"]
    info = js_info(url, user["creds_file"])
    assert info["limits"]["max_storage"] == 1024 * 1024 and info["limits"]["max_streams"] == 3, info
    assert info["limits"]["max_memory"] == 64 * 1024 and info["limits"]["max_consumers"] == 10, info

    # every module a second time: nothing changes, nothing is pushed
    before = tree_hash(*roots)
    for name, args in (("nsc_operator", dict(base, signing_key=True)), ("nsc_account", dict(account_args, **push)),
                       ("nsc_user", dict(base, account="APP", name="worker",
                                         permissions={"pub": {"allow": ["$JS.API.>", "work"]},
                                                      "sub": {"allow": ["_INBOX.>", "work"]}}))):
        again = module(name, args)
        assert again["changed"] is False and not again.get("failed"), (name, again)
    assert tree_hash(*roots) == before

    # a new limit takes effect without a restart
    account_args["jetstream"]["streams"] = 5
    changed = module("nsc_account", dict(account_args, **push), diff=True)
    assert changed["changed"] and changed["unconfirmed"] == [], changed
    assert changed["diff"]["after"]["nats"]["limits"]["streams"] == 5
    assert js_info(url, user["creds_file"])["limits"]["max_streams"] == 5

    # check mode of a change: predicted, not written, not pushed
    before = tree_hash(*roots)
    account_args["jetstream"]["streams"] = 7
    predicted = module("nsc_account", dict(account_args, **push), check_mode=True)
    assert predicted["changed"] and tree_hash(*roots) == before
    assert js_info(url, user["creds_file"])["limits"]["max_streams"] == 5


def test_errors_name_what_is_missing_and_leave_the_store_alone(module, tmp_path):
    base = dict(store_dir=str(tmp_path / "stores"), keys_dir=str(tmp_path / "keys"), operator="fleet")
    missing = module("nsc_account", dict(base, name="APP"))
    assert missing["failed"] and "operator 'fleet' is not in the store" in missing["msg"]
    assert not os.path.exists(tmp_path / "stores")
    module("nsc_operator", base)
    roots = (base["store_dir"], base["keys_dir"])
    before = tree_hash(*roots)
    no_account = module("nsc_user", dict(base, account="NOPE", name="u"))
    assert no_account["failed"] and "account 'NOPE' is not in the store" in no_account["msg"]
    bad = module("nsc_account", dict(base, name="has space"))
    assert bad["failed"] and "not a valid name" in bad["msg"]
    assert tree_hash(*roots) == before
