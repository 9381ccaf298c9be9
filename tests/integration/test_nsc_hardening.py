"""The nsc modules against input a new user gets wrong: a typo in system_account, the system account removed, items
listed twice, a run whose last item is bad, values ansible-core would coerce or no server reads - each refused before
the store changes a byte; a system account replaced on purpose, with what every server then needs, shown on a real
server in operator mode; and a diff that lists only what changed."""

import os

import pytest

from conftest import free_port, operator_mode_conf
from test_nsc_modules import tree_hash

ACCOUNTS = [{"name": "APP", "signing_key": True, "jetstream": {"disk_storage": "1MiB", "streams": 2}},
            {"name": "OPS"}]
USERS = [{"account": "APP", "name": "app"}, {"account": "OPS", "name": "ops"}]
EXPORTS = [{"account": "OPS", "name": "status", "subject": "ops.status", "importers": [{"account": "APP"}]}]


def _base(tmp_path):
    return dict(store_dir=str(tmp_path / "stores"), keys_dir=str(tmp_path / "keys"), operator="fleet")


@pytest.fixture
def store(module, tmp_path):
    base = _base(tmp_path)
    made = module("nsc_store", dict(base, signing_key=True, accounts=ACCOUNTS, users=USERS, exports=EXPORTS))
    assert made["changed"] and not made.get("failed"), made
    return base, made


# the last item of each run is the bad one; the items before it are new, so a run that wrote them would show
BAD_LAST = [
    ("export-subject", dict(exports=EXPORTS + [{"account": "NEW", "name": "e", "subject": "e..x"}]),
     "exports[1] (NEW e): operator 'fleet': export 'e' of account 'NEW': subject: 'e..x' is not a subject"),
    ("user-account", dict(users=USERS + [{"account": "NEW", "name": "n"}, {"account": "NOPE", "name": "u"}]),
     "users[3] (NOPE/u): user 'u' of account 'NOPE': account 'NOPE' is not in the store, nor made by an item"),
    ("user-of-removed", dict(accounts=ACCOUNTS + [{"name": "NEW"}, {"name": "GONE", "state": "absent"}],
                             users=USERS + [{"account": "GONE", "name": "g"}]),
     "users[2] (GONE/g): user 'g' of account 'GONE': account 'GONE' is removed by accounts[3]"),
    ("user-name", dict(users=USERS + [{"account": "NEW", "name": "a b"}]),
     "users[2] (NEW/a b): user 'a b' of account 'NEW': user name: 'a b' is not a valid name"),
    ("user-expires-true", dict(users=USERS + [{"account": "NEW", "name": "n", "expires": True}]),
     "users[2] (NEW/n): user 'n' of account 'NEW': expires: true is not a time"),
    ("user-resp-max", dict(users=USERS + [{"account": "NEW", "name": "n", "permissions": {"resp": {"max": -5}}}]),
     "permissions.resp.max: -5"),
    ("account-limit", dict(accounts=ACCOUNTS + [{"name": "NEW"}, {"name": "BIG", "limits": {"conn": 2 ** 63}}]),
     "accounts[3] (BIG): account 'BIG' of operator 'fleet': limits.conn: 9223372036854775808 is larger than any"),
    ("account-jetstream-true", dict(accounts=ACCOUNTS + [{"name": "NEW"}, {"name": "JS", "jetstream": True}]),
     "accounts[3] (JS): jetstream: true is not a mapping; write jetstream: {}"),
    ("account-twice", dict(accounts=ACCOUNTS + [{"name": "NEW"}, dict(ACCOUNTS[0], jetstream={"streams": 9})]),
     "accounts[3] (APP): listed twice, first at accounts[0]"),
    ("user-twice", dict(users=USERS + [{"account": "NEW", "name": "n"},
                                       {"account": "APP", "name": "app", "bearer_token": True}]),
     "users[3] (APP/app): listed twice, first at users[0]"),
    ("export-twice", dict(exports=EXPORTS + [{"account": "NEW", "name": "e", "subject": "e.>"},
                                             {"account": "OPS", "name": "status", "subject": "ops.other"}]),
     "exports[2] (OPS status): listed twice, first at exports[0]"),
    ("system-account-removed", dict(accounts=ACCOUNTS + [{"name": "NEW"}, {"name": "SYS", "state": "absent"}]),
     "accounts[3] (SYS): account 'SYS' of operator 'fleet': it is the operator's system account"),
    ("service-url", dict(service_urls=["nats://hub-1:4222", "not a url"]),
     "operator 'fleet': service_urls[1]: 'not a url' is not a URL"),
    ("system-account-typo", dict(system_account="APP"),
     "operator 'fleet': system_account 'APP' is not the operator's system account, which is 'SYS'"),
]


@pytest.mark.parametrize("case, change, fragment", BAD_LAST, ids=[row[0] for row in BAD_LAST])
def test_a_run_whose_last_item_is_bad_leaves_the_store_as_it_was(store, module, case, change, fragment):
    base, _made = store
    roots = (base["store_dir"], base["keys_dir"])
    before = tree_hash(*roots)
    args = dict(base, signing_key=True, accounts=ACCOUNTS + [{"name": "NEW"}], users=USERS + [
        {"account": "NEW", "name": "n"}], exports=EXPORTS)
    args.update(change)
    result = module("nsc_store", args)
    assert result.get("failed") and fragment in result["msg"], (case, result.get("msg"))
    assert result["changed"] is False, result
    assert tree_hash(*roots) == before, case
    # the same items, the bad one left out, converge: nothing stood in their way but it
    good = module("nsc_store", dict(base, signing_key=True, accounts=ACCOUNTS + [{"name": "NEW"}],
                                    users=USERS + [{"account": "NEW", "name": "n"}], exports=EXPORTS))
    assert good["changed"] and not good.get("failed"), good


def test_a_first_run_whose_last_item_is_bad_makes_no_store(module, tmp_path):
    base = _base(tmp_path)
    result = module("nsc_store", dict(base, accounts=ACCOUNTS, users=USERS, exports=EXPORTS + [
        {"account": "OPS", "name": "e", "subject": "e.>", "importers": [{"account": "OPS"}]}]))
    assert result.get("failed") and "exports[1] (OPS e)" in result["msg"], result
    assert "account 'OPS' cannot import its own export" in result["msg"], result
    assert not os.path.exists(base["store_dir"]) and not os.path.exists(base["keys_dir"])


def test_the_bulk_forms_refuse_an_item_listed_twice_before_any_is_written(store, module):
    base, _made = store
    roots = (base["store_dir"], base["keys_dir"])
    before = tree_hash(*roots)
    for name, key, items, fragment in (
            ("nsc_account", "accounts", [{"name": "NEW"}, {"name": "OPS"}, {"name": "NEW", "limits": {"conn": 1}}],
             "accounts[2] (NEW): listed twice, first at accounts[0]"),
            ("nsc_user", "users", [{"account": "OPS", "name": "new"},
                                   {"account": "OPS", "name": "new", "expires_in": "1d"}],
             "users[1] (OPS/new): listed twice, first at users[0]"),
            ("nsc_export", "exports", [{"account": "OPS", "name": "new", "subject": "new.>"},
                                       {"account": "OPS", "name": "again", "subject": "new.>"}],
             "exports[1] (OPS again): listed twice, first at exports[0]")):
        result = module(name, dict(base, **{key: items}))
        assert result.get("failed") and result["msg"] == fragment and result["changed"] is False, (name, result)
        assert result["item_results"] == [], result
    assert tree_hash(*roots) == before


def test_values_ansible_core_would_coerce_are_refused_and_expires_0_is_no_expiry(store, module):
    base, _made = store
    roots = (base["store_dir"], base["keys_dir"])
    before = tree_hash(*roots)
    for name, args in (("nsc_operator", dict(base, operator=True)), ("nsc_store", dict(base, operator=True))):
        result = module(name, args)
        assert result.get("failed") and result["msg"].startswith("operator: true is a boolean, not text"), result
    assert not os.path.exists(os.path.join(base["store_dir"], "True"))
    bool_limits = module("nsc_account", dict(base, name="APP", signing_key=True, jetstream=True))
    assert bool_limits.get("failed") and "write jetstream: {} for JetStream without limits" in bool_limits["msg"]
    assert "not iterable" not in bool_limits["msg"], bool_limits
    assert tree_hash(*roots) == before

    never = module("nsc_user", dict(base, account="OPS", name="forever", expires=0))
    assert never["changed"] and never["expires_at"] is None and not never.get("warnings"), never
    again = module("nsc_user", dict(base, account="OPS", name="forever", expires="0"))
    assert again["changed"] is False and not again.get("warnings"), again


def test_a_diff_lists_only_what_changed(store, module):
    base, _made = store
    args = dict(base, signing_key=True, accounts=ACCOUNTS, users=USERS, exports=EXPORTS)
    unchanged = module("nsc_store", args, diff=True)
    assert unchanged["changed"] is False and unchanged["diff"] == [], unchanged["diff"]
    one = [dict(ACCOUNTS[0], jetstream={"disk_storage": "1MiB", "streams": 3})] + ACCOUNTS[1:]
    changed = module("nsc_store", dict(args, accounts=one), diff=True)
    assert changed["changed"] and len(changed["diff"]) == 1, changed["diff"]
    assert changed["diff"][0]["before"]["name"] == "APP" and changed["diff"][0]["after"]["nats"]["limits"][
        "streams"] == 3, changed["diff"]
    bulk = module("nsc_account", dict(base, accounts=one), diff=True)
    assert bulk["changed"] is False and bulk["diff"] == [], bulk


def test_the_system_account_is_replaced_only_on_purpose_and_the_servers_are_told(
        nats_binary, start_server, module, tmp_path, store):
    binary, _version = nats_binary
    base, made = store
    roots = (base["store_dir"], base["keys_dir"])
    old = made["operator"]
    port, http = free_port(), free_port()
    server = start_server(binary, operator_mode_conf(tmp_path, old, port, http), "old", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    url = "nats://127.0.0.1:%d" % port
    push = dict(base, accounts=ACCOUNTS, push=True, servers=[url], timeout=2.0)
    assert not module("nsc_account", push).get("failed")

    # a typo names an ordinary account, or one the store lacks: refused, nothing written; SYS cannot be removed
    before = tree_hash(*roots)
    for name, args, fragment in (
            ("nsc_operator", dict(base, signing_key=True, system_account="APP"),
             "system_account 'APP' is not the operator's system account, which is 'SYS' (%s)" % old["system_account_id"]),
            ("nsc_store", dict(base, signing_key=True, system_account="SYSTEM"),
             "system_account 'SYSTEM' is not the operator's system account"),
            ("nsc_account", dict(base, name="SYS", state="absent"),
             "'SYS' is the system account of operator 'fleet' (%s); it is not removed" % old["system_account_id"]),
            ("nsc_store", dict(base, signing_key=True, accounts=[{"name": "SYS", "state": "absent"}]),
             "accounts[0] (SYS): account 'SYS' of operator 'fleet': it is the operator's system account")):
        refused = module(name, args)
        assert refused.get("failed") and fragment in refused["msg"] and refused["changed"] is False, (name, refused)
    assert tree_hash(*roots) == before
    kept = module("nsc_operator", dict(base, signing_key=True))
    assert kept["changed"] is False and kept["system_account_id"] == old["system_account_id"], kept

    # on purpose: done, and the warning and the result say what the servers need
    replaced = module("nsc_store", dict(base, signing_key=True, system_account="OPS", replace_system_account=True,
                                        accounts=[ACCOUNTS[0]], users=[USERS[0]], exports=[]))
    assert replaced["changed"] and not replaced.get("failed"), replaced
    new = replaced["operator"]
    said = new["system_account_replaced"]
    assert said["previous"] == "SYS" and said["previous_id"] == old["system_account_id"], said
    assert said["name"] == "OPS" and said["account_id"] == new["system_account_id"] != old["system_account_id"]
    assert any(said["msg"] == warning for warning in replaced["warnings"]), replaced["warnings"]
    assert ("Every server of the operator must be reconfigured with system_account %s" % new["system_account_id"]
            in said["msg"] and "restarted" in said["msg"]), said["msg"]
    again = module("nsc_store", dict(base, signing_key=True, system_account="OPS", accounts=[ACCOUNTS[0]]))
    assert again["changed"] is False and "system_account_replaced" not in again["operator"], again

    # the server still has the old system account: the new system user's push is not taken
    refused = module("nsc_account", dict(push, accounts=[dict(ACCOUNTS[0], jetstream={"streams": 3})]))
    assert refused.get("failed"), refused
    # reconfigured with the new one and restarted, it takes it
    server.stop()
    port, http = free_port(), free_port()
    server = start_server(binary, operator_mode_conf(tmp_path, new, port, http), "new", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    pushed = module("nsc_account", dict(push, servers=["nats://127.0.0.1:%d" % port],
                                        accounts=[dict(ACCOUNTS[0], jetstream={"streams": 3})]))
    assert pushed["changed"] and not pushed.get("failed"), pushed


def test_an_item_only_the_store_can_refuse_undoes_the_whole_run(store, module, tmp_path):
    """An export overlapping one of the store is found only when its item is converged, after the items before it
    wrote: the run puts the store back as it was, the seeds it made included."""
    base, _made = store
    roots = (base["store_dir"], base["keys_dir"])
    before = tree_hash(*roots)
    keys = sorted(os.path.join(d, f) for d, _dirs, files in os.walk(base["keys_dir"]) for f in files)
    result = module("nsc_store", dict(base, signing_key=True, accounts=ACCOUNTS + [{"name": "NEW"}],
                                      users=USERS + [{"account": "NEW", "name": "n"}],
                                      exports=EXPORTS + [{"account": "OPS", "name": "all", "subject": "ops.>"}]))
    assert result.get("failed") and result["msg"].startswith("exports[1] (OPS all): operator 'fleet': "), result
    assert "overlaps export 'status'" in result["msg"], result["msg"]
    assert result["msg"].endswith("; nothing was written: the store is as it was before the run"), result["msg"]
    assert result["changed"] is False and result["undone"] is True, result
    assert result["account_results"][2]["changed"] and result["user_results"][2]["changed"], result
    assert tree_hash(*roots) == before
    assert sorted(os.path.join(d, f) for d, _dirs, files in os.walk(base["keys_dir"]) for f in files) == keys
    assert sorted(os.listdir(base["store_dir"])) == ["fleet"], os.listdir(base["store_dir"])

    # the first run of a store: nothing at all is left
    fresh = dict(_base(tmp_path / "fresh"))
    first = module("nsc_store", dict(fresh, accounts=ACCOUNTS, users=USERS, exports=EXPORTS + [
        {"account": "OPS", "name": "all", "subject": "ops.>"}]))
    assert first.get("failed") and first["changed"] is False and first["undone"] is True, first
    assert not os.path.exists(fresh["store_dir"]) and not os.path.exists(fresh["keys_dir"]), (
        list(os.walk(str(tmp_path / "fresh"))))


def test_a_store_locked_by_another_run_is_left_alone(store, module):
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import directory_lock
    base, _made = store
    roots = (base["store_dir"], base["keys_dir"])
    before = tree_hash(*roots)
    with directory_lock(base["store_dir"]):
        waited = module("nsc_store", dict(base, lock_timeout=0.5, accounts=ACCOUNTS + [{"name": "NEW"}]))
    assert waited.get("failed") and waited["changed"] is False, waited
    assert waited["msg"].startswith("operator 'fleet': the store %s stayed locked by another run" % base["store_dir"])
    assert tree_hash(*roots) == before
