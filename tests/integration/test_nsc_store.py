"""nsc_store: the operator, accounts, users and exports of a store in one module run, with the same
results as the four modules that converge them one kind at a time; the store it writes is the one those
modules keep (each of them then changes nothing), its creds connect to a real server in operator mode, and
bad items are refused before the store is touched."""

import os

from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import NatsClient

from conftest import free_port, operator_mode_conf
from test_nsc_modules import js_info, tree_hash

ACCOUNTS = [
    {"name": "SENSORS", "signing_key": True, "jetstream": {"disk_storage": "1MiB", "mem_storage": "64KiB",
                                                           "streams": 4}},
    {"name": "REPORTS", "jetstream": {"disk_storage": "1MiB", "streams": 2}},
    {"name": "OPS"},
]
USERS = [
    {"account": "SENSORS", "name": "edge",
     "permissions": {"pub": {"allow": ["readings.>", "work", "$JS.API.>"]}, "sub": {"allow": ["work", "_INBOX.>"]}}},
    {"account": "REPORTS", "name": "reader", "expires_in": "30d", "renew_before": "7d"},
    {"account": "OPS", "name": "ops"},
]
EXPORTS = [
    {"share_stream": {"stream": "readings", "from_account": "SENSORS", "to_account": "REPORTS", "kind": "mirror"}},
    {"account": "OPS", "name": "status", "subject": "ops.status", "importers": [{"account": "SENSORS"}]},
]


def _base(tmp_path):
    return dict(store_dir=str(tmp_path / "stores"), keys_dir=str(tmp_path / "keys"), operator="fleet")


def test_one_run_converges_the_store_the_four_modules_keep(nats_binary, start_server, module, tmp_path):
    binary, _version = nats_binary
    base = _base(tmp_path)
    roots = (base["store_dir"], base["keys_dir"])
    args = dict(base, signing_key=True, accounts=ACCOUNTS, users=USERS, exports=EXPORTS)

    # check mode on a store not made yet: every item predicted as made with the operator, nothing written
    predicted = module("nsc_store", dict(args, users=USERS + [{"account": "OPS", "name": "gone", "state": "absent"}]),
                       check_mode=True)
    assert predicted["changed"] and not predicted.get("failed"), predicted
    assert [r["changed"] for r in predicted["account_results"] + predicted["user_results"]
            + predicted["export_results"]] == [True] * 6 + [False] + [True] * 2, predicted
    assert all(r["created_with_the_operator"] for r in predicted["user_results"]), predicted
    assert not os.path.exists(base["store_dir"]) and not os.path.exists(base["keys_dir"])

    made = module("nsc_store", args, diff=True)
    assert made["changed"] and not made.get("failed"), made
    assert [r["account_id"][0] for r in made["account_results"]] == ["A", "A", "A"], made
    assert [r["changed"] for r in made["user_results"]] == [True, True, True], made
    assert all(os.stat(r["creds_file"]).st_mode & 0o777 == 0o600 for r in made["user_results"])
    assert os.stat(made["operator"]["sys_creds"]).st_mode & 0o777 == 0o600
    assert [r["changed"] for r in made["export_results"]] == [True, True], made
    # a diff for the operator, each account, each user and each export
    assert len(made["diff"]) == 1 + 3 + 3 + 2, made["diff"]
    # the store as nsc_info lists it, read after the run
    info = module("nsc_info", base)
    assert made["store"] == dict(operators=info["operators"], accounts=info["accounts"]), (made["store"], info)
    assert sorted(a["name"] for a in made["store"]["accounts"]) == ["OPS", "REPORTS", "SENSORS", "SYS"]
    seeds = [open(r["creds_file"]).read().split("-----BEGIN USER NKEY SEED-----")[1].split()[0]
             for r in made["user_results"]]
    assert all(seed.startswith("SU") for seed in seeds) and not any(seed in repr(made) for seed in seeds)

    # a second run changes nothing; neither does any of the four modules that converge one kind each
    before = tree_hash(*roots)
    again = module("nsc_store", args)
    assert again["changed"] is False and not again.get("failed"), again
    assert module("nsc_operator", dict(base, signing_key=True))["changed"] is False
    for name, key, items in (("nsc_account", "accounts", ACCOUNTS), ("nsc_user", "users", USERS),
                             ("nsc_export", "exports", EXPORTS)):
        kept = module(name, dict(base, **{key: items}))
        assert kept["changed"] is False and not kept.get("failed"), (name, kept)
    assert tree_hash(*roots) == before

    # a change in check mode: predicted for that item only, nothing written
    changed_accounts = [dict(ACCOUNTS[0], jetstream=dict(ACCOUNTS[0]["jetstream"], streams=6))] + ACCOUNTS[1:]
    checked = module("nsc_store", dict(args, accounts=changed_accounts), check_mode=True)
    assert checked["changed"] and [r["changed"] for r in checked["account_results"]] == [True, False, False]
    assert not any(r["changed"] for r in checked["user_results"] + checked["export_results"]), checked
    assert tree_hash(*roots) == before

    # what it wrote serves a real server: push the accounts, connect with a user's creds
    port, http = free_port(), free_port()
    server = start_server(binary, operator_mode_conf(tmp_path, made["operator"], port, http), "op", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    url = "nats://127.0.0.1:%d" % port
    pushed = module("nsc_account", dict(base, accounts=changed_accounts, push=True, servers=[url], timeout=2.0,
                                        expected_servers=1))
    assert pushed["changed"] and not pushed.get("failed"), pushed
    limits = js_info(url, made["user_results"][0]["creds_file"])["limits"]
    assert limits["max_streams"] == 6 and limits["max_storage"] == 1024 * 1024, limits
    with NatsClient({"servers": [url], "creds": made["user_results"][2]["creds_file"], "timeout": 2.0}) as client:
        client.publish("ops.status", b"up")


def test_bad_items_are_refused_before_the_store_is_touched(module, tmp_path):
    base = _base(tmp_path)
    odd_user = {"account": "OPS", "name": "x", "colour": "red"}
    unknown = module("nsc_store", dict(base, accounts=ACCOUNTS, users=USERS + [odd_user]))
    assert unknown["failed"] and unknown["msg"].startswith("users[3] (OPS/x): unknown option colour"), unknown
    both = module("nsc_store", dict(base, users=[{"account": "OPS", "name": "x", "expires": "2030-01-01",
                                                  "expires_in": "1d"}]))
    assert both["failed"] and "users[0] (OPS/x)" in both["msg"] and "expires" in both["msg"], both
    no_subject = module("nsc_store", dict(base, exports=[{"account": "OPS", "name": "status"}]))
    assert no_subject["failed"] and no_subject["msg"].startswith("exports[0] (OPS status):"), no_subject
    assert not os.path.exists(base["store_dir"]) and not os.path.exists(base["keys_dir"])

    # a user of an account neither in the store nor among the accounts: refused before the operator is made
    stopped = module("nsc_store", dict(base, accounts=ACCOUNTS[:1], users=[{"account": "NOPE", "name": "u"}]))
    assert stopped["failed"] and stopped["msg"].startswith("users[0] (NOPE/u): user 'u' of account 'NOPE'"), stopped
    assert "account 'NOPE' is not in the store" in stopped["msg"], stopped
    assert stopped["changed"] is False, stopped
    assert not os.path.exists(base["store_dir"]) and not os.path.exists(base["keys_dir"])
    made = module("nsc_store", dict(base, accounts=ACCOUNTS[:1]))
    assert made["changed"] and not made.get("failed"), made
    fixed = module("nsc_store", dict(base, accounts=ACCOUNTS[:1]))
    assert fixed["changed"] is False and not fixed.get("failed"), fixed
