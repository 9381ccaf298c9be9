"""Parallel runs on one nsc store, as a play over many hosts with forks and
delegate_to: localhost makes them: every edit is kept, one operator is made,
and every JWT in the store verifies and chains to the operator."""

import concurrent.futures
import os

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import Store

from conftest import run_module

PARALLEL = 6


def parallel(calls):
    with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(lambda call: run_module(*call), calls))


def assert_store_chains(base):
    """Every account is issued by the operator (or its signing key) and every
    user by its account (or the account's signing key); signatures verify."""
    store = Store(base["store_dir"], base["keys_dir"], base["operator"])
    _token, operator = store.read_operator()
    accounts = store.accounts()
    assert accounts
    for name in accounts:
        token, claims = store.read_account(name)
        jwt.decode(token, verify=True)
        store.check_account(name, operator, claims)
        users_dir = os.path.join(store.account_dir(name), "users")
        for user_file in sorted(os.listdir(users_dir)) if os.path.isdir(users_dir) else []:
            user = user_file[:-len(".jwt")]
            user_token, user_claims = store.read_user(name, user)
            jwt.decode(user_token, verify=True)
            assert store.check_user(name, user, claims, user_claims), (name, user, user_claims["iss"])
    return store


def test_parallel_operator_runs_on_an_empty_store_make_one_operator(tmp_path):
    base = dict(store_dir=str(tmp_path / "stores"), keys_dir=str(tmp_path / "keys"), operator="fleet")
    results = parallel([("nsc_operator", dict(base, signing_key=True))] * PARALLEL)
    assert not [r for r in results if r.get("failed")], results
    assert len(set(r["operator_public_key"] for r in results)) == 1, results
    assert len(set(r["system_account_id"] for r in results)) == 1, results
    assert sum(1 for r in results if r["changed"]) == 1, [r["changed"] for r in results]
    assert_store_chains(base)


def test_parallel_imports_into_one_account_are_all_kept(tmp_path):
    base = dict(store_dir=str(tmp_path / "stores"), keys_dir=str(tmp_path / "keys"), operator="fleet")
    assert run_module("nsc_operator", dict(base, signing_key=True))["changed"]
    spokes = ["SPOKE%d" % number for number in range(1, PARALLEL + 1)]
    for name in ["HUB"] + spokes:
        assert run_module("nsc_account", dict(base, name=name, signing_key=True))["changed"]
        assert run_module("nsc_user", dict(base, account=name, name="app"))["changed"]

    edits = [("nsc_export", dict(base, account=spoke, name="telemetry", subject="telemetry.%s.>" % spoke.lower(),
                                 importers=[{"account": "HUB"}])) for spoke in spokes]
    results = parallel(edits)
    assert not [r for r in results if r.get("failed")], results
    assert all(r["changed"] for r in results)

    store = assert_store_chains(base)
    _token, hub = store.read_account("HUB")
    imported = sorted(imp["subject"] for imp in hub["nats"].get("imports") or [])
    assert imported == sorted("telemetry.%s.>" % spoke.lower() for spoke in spokes)
    # and a second round finds nothing to do
    assert not [r for r in parallel(edits) if r["changed"] or r.get("failed")]


def test_a_store_held_by_another_run_fails_after_lock_timeout_and_changes_nothing(tmp_path):
    import fcntl

    base = dict(store_dir=str(tmp_path / "stores"), keys_dir=str(tmp_path / "keys"), operator="fleet")
    assert run_module("nsc_operator", base)["changed"]
    handle = os.open(base["store_dir"], os.O_RDONLY)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        result = run_module("nsc_account", dict(base, name="APP", lock_timeout=0.5))
    finally:
        os.close(handle)
    assert result.get("failed") and "stayed locked" in result["msg"] and base["store_dir"] in result["msg"], result
    assert not os.path.exists(os.path.join(base["store_dir"], "fleet", "accounts", "APP"))
