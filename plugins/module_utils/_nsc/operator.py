# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The operator and its system account in an nsc store: read, plan, write (nsc_operator and the
fleet's store run use it). Private to the collection.
"""

from __future__ import annotations

from urllib.parse import urlsplit

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
    replace_system_account=dict(type="bool", default=False),
)

SERVICE_URL_SCHEMES = ("nats", "tls")
ACCOUNT_SERVER_URL_SCHEMES = ("http", "https", "nats", "tls")


def _url(option, value, schemes, paths=True):
    """``value`` if it is a URL of one of ``schemes`` with a host (and a port that is a number), else StoreError."""
    example = "%s://hub-1:4222" % schemes[0] if not paths else "https://hub-1:9090/jwt/v1"
    if not isinstance(value, str) or not value.strip():
        raise StoreError("%s: %r is not a URL; write one such as %r" % (option, value, example))
    try:
        parts = urlsplit(value.strip())
        port = parts.port  # a port that is not a number, or out of range, raises
    except ValueError as exc:
        raise StoreError("%s: %r is not a URL (%s); write one such as %r" % (option, value, exc, example)) from exc
    if parts.scheme.lower() not in schemes or not parts.hostname or " " in value.strip() or port == 0:
        raise StoreError("%s: %r is not a URL a server or nsc can use: write %s with a host, such as %r" % (
            option, value, " or ".join("%s://" % scheme for scheme in schemes), example))
    if parts.username or parts.password:
        raise StoreError("%s: %r holds credentials; the operator JWT is not secret, so a URL in it cannot hold "
                         "them" % (option, "%s://***@%s" % (parts.scheme, parts.netloc.rpartition("@")[2])))
    if not paths and (parts.path not in ("", "/") or parts.query or parts.fragment):
        raise StoreError("%s: %r has a path; a server URL is scheme, host and port only, such as %r" % (
            option, value, example))
    return value


def check_options(params):
    """Every check of the operator's options that needs no store - the operator's, system account's and system
    user's names, service_urls (nats:// or tls:// URLs with a host) and account_server_url - as StoreError naming
    the option; ``params`` back. nsc_operator and nsc_store run it before anything is read or written."""
    valid_name("operator", params.get("operator"))
    valid_name("system account", params.get("system_account"))
    valid_name("system user", params.get("system_user"))
    for index, url in enumerate(params.get("service_urls") or []):
        _url("service_urls[%d]" % index, url, SERVICE_URL_SCHEMES, paths=False)
    if params.get("account_server_url"):
        _url("account_server_url", params["account_server_url"], ACCOUNT_SERVER_URL_SCHEMES)
    return params


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
    replaced = replacement(store, op_claims, sys_name, sys_pub, sys_claims is None, p.get("replace_system_account"))

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
    if replaced:
        result["system_account_replaced"] = replaced
        run.warn(replaced["msg"])
    if run.diff:
        result["diff"] = nsc.diff(op_claims, new_op_claims)
    return result


def replacement(store, op_claims, name, public, new, replace):
    """What replacing the operator's system account with account ``name`` (key ``public``, ``new`` when this run
    makes it) means, as {previous, previous_id, name, account_id, msg}; None when it is the system account already
    (or the operator has none yet). Without ``replace`` a replacement is refused: every server of the operator is
    configured with the system account's key, so a typo in system_account would cut them all off."""
    current = ((op_claims or {}).get("nats") or {}).get("system_account")
    if not current or current == public:
        return None
    previous = nsc.system_account_name(store, op_claims)
    was = "%r (%s)" % (previous, current) if previous else "%s (no account of the store has that key any more)" % (
        current,)
    becomes = "%s account %r (%s)" % ("a new" if new else "the", name, public if not new else "a new key")
    if not replace:
        instead = ("else name the system account %r" % previous if previous else
                   "else bring the system account's JWT back into the store (accounts/<name>/<name>.jwt, issued to %s)"
                   % current)
        raise StoreError(
            "system_account %r is not the operator's system account, which is %s: this run would make %s the system "
            "account, and every server of the operator would have to be reconfigured with it and restarted. If "
            "that is what you want, set replace_system_account=true; %s" % (name, was, becomes, instead))
    return dict(previous=previous, previous_id=current, name=name, account_id=public, msg=(
        "operator %r: the system account is now %r (%s), replacing %s. Every server of the operator must be "
        "reconfigured with system_account %s (the new system account's public key) and with its JWT, and "
        "restarted; until then they keep the old one, and refuse the pushes of %r's users (nsc_account push)" % (
            store.operator, name, public, was, public, name)))


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
        check_options(p)
        store = Store(p["store_dir"], p["keys_dir"], p["operator"])
        with store.locked(p["lock_timeout"], create=not run.check_mode):
            return absent(run, store) if p["state"] == "absent" else present(run, store)
    except (NatsEdgeError, OSError) as exc:
        raise nsc.ConvergeFailed("operator %r: %s" % (p["operator"], exc)) from exc
