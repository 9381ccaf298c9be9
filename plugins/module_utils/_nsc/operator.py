# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The operator and its system account in an nsc store: read, plan, write (nsc_operator and the
fleet's store run use it). Private to the collection.
"""

from __future__ import annotations

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import common as nsc
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import Store, StoreError, valid_name

ARGUMENT_SPEC = dict(
    nsc.STORE_ARGSPEC,
    operator=dict(type="str", required=True, aliases=["name"]),
    state=dict(type="str", choices=["present", "absent"], default="present"),
    signing_key=dict(type="bool", default=False),
    service_urls=dict(type="list", elements="str"),
    account_server_url=dict(type="str"),
    system_account=dict(type="str", default="SYS"),
    system_user=dict(type="str", default="sys"),
)


def _key(store, public, kind, new_seeds):
    """The seed of ``public`` or, with no public key yet, a new seed."""
    if public:
        return public
    seed = jwt.new_seed(kind)
    new_seeds.append(seed)
    return jwt.public_key(seed)


def _seed(store, public, new_seeds):
    for seed in new_seeds:
        if jwt.public_key(seed) == public:
            return seed
    seed = store.read_seed(public)
    if not seed:
        raise StoreError("no seed for %s in %s" % (public, store.keys_dir))
    return seed


def present(run, store):
    p = run.params
    changed_files = []
    new_seeds = []
    op_token, op_claims = (store.read_operator() if store.has_operator() else (None, None))
    marker_ok = store.check_marker() if op_token else False
    op_pub = _key(store, op_claims and op_claims["sub"], "operator", new_seeds)

    existing_signing = list((op_claims or {}).get("nats", {}).get("signing_keys") or [])
    signing = list(existing_signing)
    if p["signing_key"] and not any(store.read_seed(key) for key in signing):
        signing.append(_key(store, None, "operator", new_seeds))

    sys_name, sys_user = p["system_account"], p["system_user"]
    sys_token, sys_claims = store.read_account(sys_name)
    sys_pub = _key(store, sys_claims and sys_claims["sub"], "account", new_seeds)

    op_nats = (op_claims or {}).get("nats", {})
    urls = p["service_urls"] if p["service_urls"] is not None else op_nats.get("operator_service_urls", [])
    server_url = p["account_server_url"] if p["account_server_url"] is not None else op_nats.get(
        "account_server_url")
    desired_op = nsc.merged(op_claims, jwt.operator_claims(store.operator, op_pub, signing_keys=signing,
                                                           system_account=sys_pub, service_urls=urls,
                                                           account_server_url=server_url),
                            nsc.OPERATOR_MANAGED | {"operator_service_urls", "account_server_url"})
    if nsc.needs_signing(op_claims, desired_op):
        op_token = jwt.encode(desired_op, _seed(store, op_pub, new_seeds))
        changed_files.append(store.operator_jwt_path)
    new_op_claims = jwt.decode(op_token, verify=False) if op_token else desired_op

    desired_sys = nsc.merged(sys_claims, jwt.account_claims(
        sys_name, sys_pub, exports=nsc.SYSTEM_EXPORTS,
        signing_keys=(sys_claims or {}).get("nats", {}).get("signing_keys") or ()), nsc.ACCOUNT_MANAGED | {"exports"})
    issuers = {op_pub} | set(signing)
    if nsc.needs_signing(sys_claims, desired_sys) or sys_claims.get("iss") not in issuers:
        signer = next((seed for seed in (_maybe_seed(store, key, new_seeds) for key in signing) if seed), None)
        sys_token = jwt.encode(desired_sys, signer or _seed(store, op_pub, new_seeds))
        changed_files.append(store.account_jwt_path(sys_name))
    new_sys_claims = jwt.decode(sys_token, verify=False)

    user_token, user_claims = store.read_user(sys_name, sys_user)
    user_valid = user_claims is not None and store.check_user(sys_name, sys_user, new_sys_claims, user_claims)
    user_pub = _key(store, user_claims and user_claims["sub"], "user", new_seeds)
    desired_user = jwt.user_claims(sys_user, user_pub)
    if not user_valid or nsc.needs_signing(user_claims, desired_user):
        user_token = jwt.encode(desired_user, _seed(store, sys_pub, new_seeds))
        changed_files.append(store.user_jwt_path(sys_name, sys_user))
    creds = jwt.creds(user_token, _seed(store, user_pub, new_seeds))
    if store.read_creds(sys_name, sys_user) != creds:
        changed_files.append(store.creds_path(sys_name, sys_user))
    if not marker_ok:
        changed_files.append(store.marker_path)

    if changed_files and not run.check_mode:
        for seed in new_seeds:
            store.write_seed(seed)
        if not marker_ok:
            store.write_marker()
        store.write_operator(op_token)
        store.write_account(sys_name, sys_token)
        store.write_user(sys_name, sys_user, user_token)
        store.write_creds(sys_name, sys_user, creds)

    result = dict(changed=bool(changed_files), files=changed_files,
                  operator_public_key=op_pub, operator_jwt_path=store.operator_jwt_path,
                  operator_jwt=op_token or "", system_account_id=sys_pub,
                  system_account_jwt=sys_token or "", system_account_jwt_path=store.account_jwt_path(sys_name),
                  sys_creds=store.creds_path(sys_name, sys_user), signing_keys=sorted(signing))
    if run.diff:
        result["diff"] = nsc.diff(op_claims, new_op_claims)
    return result


def _maybe_seed(store, public, new_seeds):
    try:
        return _seed(store, public, new_seeds)
    except StoreError:
        return None


def absent(run, store):
    import os
    import shutil
    creds_dir = os.path.join(store.keys_dir, "creds", store.operator)
    present_paths = [path for path in (store.root, creds_dir) if os.path.exists(path)]
    if present_paths and not run.check_mode:
        for path in present_paths:
            shutil.rmtree(path)
    return dict(changed=bool(present_paths), files=present_paths)


def converge(run):
    """The operator as nsc_operator converges it (also the operator of the fleet's store run): the result, or
    nsc.ConvergeFailed."""
    p = run.params
    try:
        valid_name("system account", p["system_account"])
        valid_name("system user", p["system_user"])
        store = Store(p["store_dir"], p["keys_dir"], p["operator"])
        with store.locked(p["lock_timeout"], create=not run.check_mode):
            return absent(run, store) if p["state"] == "absent" else present(run, store)
    except (NatsEdgeError, OSError) as exc:
        raise nsc.ConvergeFailed("operator %r: %s" % (p["operator"], exc)) from exc
