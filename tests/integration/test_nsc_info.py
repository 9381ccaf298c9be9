"""nsc_info over a store made by nsc_operator, nsc_account and nsc_user, with exports
and imports added by hand as nsc would add them: listing, graph, dot, no secrets."""

import json
import os

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import common as nsc
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import Store


def add_claims(store, account, **nats):
    """Sign the account again with extra claims, as `nsc add export/import` does."""
    _token, op_claims = store.read_operator()
    _token, claims = store.read_account(account)
    body = nsc.body(claims)
    body["nats"].update(nats)
    signer, _via_signing_key = nsc.signer_of(store, op_claims, "operator")
    store.write_account(account, jwt.encode(body, signer))


def all_seeds(keys_dir):
    seeds = []
    for directory, _dirs, files in os.walk(keys_dir):
        for name in files:
            with open(os.path.join(directory, name)) as handle:
                text = handle.read()
            seeds += [word for word in text.split() if word.startswith("S") and len(word) == 58]
    return seeds


def test_nsc_info_lists_the_store_and_draws_the_imports(module, tmp_path):
    base = dict(store_dir=str(tmp_path / "stores"), keys_dir=str(tmp_path / "keys"), operator="fleet")
    assert not module("nsc_operator", dict(base, signing_key=True)).get("failed")
    orders = module("nsc_account", dict(base, name="ORDERS", signing_key=True,
                                        jetstream=dict(disk_storage="1MiB", mem_storage="64KiB", streams=3)))
    app = module("nsc_account", dict(base, name="APP"))
    user = module("nsc_user", dict(base, account="ORDERS", name="svc", bearer_token=True))
    assert not any(r.get("failed") for r in (orders, app, user)), (orders, app, user)

    store = Store(base["store_dir"], base["keys_dir"], "fleet")
    add_claims(store, "ORDERS", exports=[
        {"name": "orders", "subject": "orders.>", "type": "stream"},
        {"name": "quote", "subject": "quote.*", "type": "service", "response_type": "Singleton"}])
    add_claims(store, "APP", imports=[
        {"name": "orders", "subject": "orders.eu.>", "account": orders["account_id"], "type": "stream",
         "local_subject": "eu.>"},
        {"name": "quote", "subject": "quote.gold", "account": orders["account_id"], "type": "service"},
        {"name": "gone", "subject": "gone.>", "account": orders["account_id"], "type": "stream"}])
    # the account module keeps claims it does not manage
    again = module("nsc_account", dict(base, name="APP"))
    assert again["changed"] is False, again

    info = module("nsc_info", dict(base, operator=None), check_mode=True)
    assert info["changed"] is False and not info.get("failed"), info
    assert [o["name"] for o in info["operators"]] == ["fleet"]
    accounts = {a["name"]: a for a in info["accounts"]}
    assert sorted(accounts) == ["APP", "ORDERS", "SYS"]
    assert accounts["ORDERS"]["jetstream"] == {"disk_storage": 1024 * 1024, "mem_storage": 64 * 1024,
                                               "streams": 3, "consumers": -1}
    assert [e["subject"] for e in accounts["ORDERS"]["exports"]] == ["orders.>", "quote.*"]
    assert {i["from_account"] for i in accounts["APP"]["imports"]} == {"ORDERS"}
    assert {e["name"] for e in accounts["SYS"]["exports"]} == {
        "account-monitoring-services", "account-monitoring-streams"}
    users = {(u["account"], u["name"]): u for u in info["users"]}
    assert users[("ORDERS", "svc")]["bearer"] and users[("ORDERS", "svc")]["creds_file"] == user["creds_file"]
    assert ("SYS", "sys") in users

    assert '"fleet/ORDERS" -> "fleet/APP" [label="stream orders.eu.> \u2192 eu.>", style=solid];' in info["dot"]
    assert '"fleet/ORDERS" -> "fleet/APP" [label="service quote.gold", style=dashed];' in info["dot"]
    [gone] = [e for e in info["graph"]["edges"] if e["dangling"]]
    assert gone["import_name"] == "gone" and "color=red" in info["dot"]

    seeds = all_seeds(base["keys_dir"])
    assert len(seeds) >= 6
    text = json.dumps(info)
    assert not any(seed in text for seed in seeds)
    assert "BEGIN USER NKEY SEED" not in text

    one = module("nsc_info", dict(base, accounts=["APP"]))
    assert [a["name"] for a in one["accounts"]] == ["APP"] and one["users"] == []
    assert {n["id"] for n in one["graph"]["nodes"]} == {"fleet/APP", "fleet/ORDERS"}
    missing = module("nsc_info", dict(base, accounts=["NOPE"]))
    assert missing["failed"] and "'NOPE'" in missing["msg"], missing
    absent = module("nsc_info", dict(base, operator="other"))
    assert absent["failed"] and "other" in absent["msg"], absent
