# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One account in an nsc store: plan, write, push (nsc_account and the fleet's store run use it).
Private to the collection.
"""

from __future__ import annotations

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import common as nsc
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import NatsClientError
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import Store, StoreError, valid_name

ARGUMENT_SPEC = dict(
    nsc.STORE_ARGSPEC,
    name=dict(type="str", required=True),
    state=dict(type="str", choices=["present", "absent"], default="present"),
    jetstream=dict(type="dict", options=nsc.JETSTREAM_OPTIONS),
    limits=dict(type="dict", options=dict(
        conn=dict(type="int"), leaf=dict(type="int"), subs=dict(type="int"), data=dict(type="raw"),
        payload=dict(type="raw"), imports=dict(type="int"), exports=dict(type="int"))),
    signing_key=dict(type="bool", default=False),
    scoped_signing_keys=dict(type="list", elements="dict", no_log=False, options=dict(
        role=dict(type="str", required=True), description=dict(type="str"),
        template=dict(type="dict", options=nsc.TEMPLATE_OPTIONS))),
    mappings=dict(type="list", elements="dict", options=nsc.MAPPING_OPTIONS),
    default_permissions=dict(type="dict", options=nsc.PERMISSIONS_OPTIONS),
    force=dict(type="bool", default=False),
    rotate_signing_key=dict(type="bool", default=False),
    retire_signing_keys=dict(type="bool", default=False),
    push=dict(type="bool", default=False),
    expected_servers=dict(type="int"),
)


def label(item):
    """How errors name an item of a list of accounts."""
    return item.get("name")


def identity(params):
    """What makes two items of a list of accounts the same account (listed twice, they would fight on every run)."""
    return [params.get("name")]


def named(params):
    """How converge's errors name the account: ``account 'APP' of operator 'fleet'``."""
    if params.get("operator"):
        return "account %r of operator %r" % (params.get("name"), params["operator"])
    return "account %r" % params.get("name")


def check_item(params):
    """Every check of one account's options that needs no store - its name, JetStream limits and limits (shape,
    -1 and above, at most int64), default permissions (subjects, resp), the signing key options - as StoreError
    naming the option; ``params`` back. nsc_account (each item of ``accounts`` too) and nsc_store run it before
    the first file is written; the fleet's preflight runs it on each of nats_accounts (ItemChecker's ``then``)."""
    valid_name("account", params.get("name"))
    if params.get("state", "present") == "absent":
        return params
    nsc.jetstream_limits(params.get("jetstream"))
    nsc.account_limits(params.get("limits"))
    nsc.permissions(params.get("default_permissions"), "default_permissions")
    nsc.mappings(params.get("mappings"))
    scopes(params.get("scoped_signing_keys"))
    for option in ("rotate_signing_key", "retire_signing_keys"):
        if params.get(option) and not params.get("signing_key"):
            raise StoreError("%s needs signing_key=true" % option)
    return params


def scopes(options):
    """[(role, description, template)] of the scoped signing keys option, checked: each role once."""
    if options is None:
        return []
    if not isinstance(options, list):
        raise StoreError("scoped_signing_keys: %r is not a list of {role, template} items" % (options,))
    result, seen = [], set()
    for index, item in enumerate(options):
        where = "scoped_signing_keys[%d]" % index
        if not isinstance(item, dict):
            raise StoreError("%s: %r is not a mapping of role, description and template" % (where, item))
        role = item.get("role")
        if not isinstance(role, str) or not role.strip() or role != role.strip():
            raise StoreError("%s.role: %r is not a role name" % (where, role))
        where = "%s (%s)" % (where, role)
        if role in seen:
            raise StoreError("%s: role %r is listed twice" % (where, role))
        seen.add(role)
        description = item.get("description")
        if description is not None and not isinstance(description, str):
            raise StoreError("%s.description: %r is not text" % (where, description))
        result.append((role, description or "", nsc.user_template(item.get("template"), where + ".template")))
    return result


def scoped_keys(store, claims, wanted, new_seeds):
    """The scoped signing keys (claims) of the roles ``wanted`` (from scopes): a role keeps its key while the key
    store holds its seed; a new role gets a new key (its seed added to ``new_seeds``)."""
    current = dict((key.get("role"), key.get("key")) for key in jwt.scoped_signing_keys(claims)
                   if key.get("kind") == "user_scope" and store.read_seed(key.get("key") or ""))
    result = []
    for role, description, template in wanted:
        public = current.get(role)
        if not public:
            seed = jwt.new_seed("account")
            new_seeds.append(seed)
            public = jwt.public_key(seed)
        result.append({"kind": "user_scope", "key": public, "role": role, "template": template,
                       "description": description})
    return result


def refuse_system_account(name, public, op_claims, operator):
    """Refuse to remove the operator's system account: servers are configured with its key, and a later run would
    make a new one that no server knows."""
    system = ((op_claims or {}).get("nats") or {}).get("system_account")
    if public and public == system:
        raise StoreError("%r is the system account of operator %r (%s); it is not removed: every server of the "
                         "operator is configured with it, and its users run the resolver's pushes. To replace it, "
                         "make another with nsc_operator (system_account, replace_system_account=true) and "
                         "reconfigure the servers first" % (name, operator, public))


def plan(run, store):
    """(result, files to write as (writer, args), new seeds)."""
    p = run.params
    name = p["name"]
    _op_token, op_claims = store.read_operator()
    token, claims = store.read_account(name)
    if claims is not None:
        store.check_account(name, op_claims, claims)
    if p["state"] == "absent":
        refuse_system_account(name, (claims or {}).get("sub"), op_claims, store.operator)
        return dict(changed=claims is not None, jwt_path=store.account_jwt_path(name)), token, None, []

    new_seeds = []
    if claims:
        public = claims["sub"]
    else:
        seed = jwt.new_seed("account")
        new_seeds.append(seed)
        public = jwt.public_key(seed)
    signing = []
    stored_previous = store.read_previous_signing_keys(name) if claims else []
    previous = stored_previous
    if p["signing_key"]:
        signing = [key for key in jwt.plain_signing_keys(claims) if store.read_seed(key)]
        if not signing or p["rotate_signing_key"]:
            seed = jwt.new_seed("account")
            new_seeds.append(seed)
            # the replaced keys stay in the account, so what they issued keeps working until retired
            previous = sorted(set(previous) | set(signing))
            signing = [jwt.public_key(seed)] + signing
    previous = [key for key in previous if key in signing]
    retired = []
    if p["retire_signing_keys"] and previous:
        retired, signing, previous = previous, [key for key in signing if key not in previous], []
        blocked = nsc.activations_by(store, name, retired)
        if blocked:
            raise StoreError("cannot retire signing keys %s: the activations of %s were signed with them and would "
                             "stop working; sign them again first (nsc_export, with the account's current signing "
                             "key)" % (", ".join(retired), ", ".join(blocked)))
    scoped = scoped_keys(store, claims, scopes(p.get("scoped_signing_keys")), new_seeds)
    mappings = nsc.mappings(p.get("mappings"))
    # mappings left out keep what the JWT has (made with nsc); given, even [], they are the module's
    desired = nsc.merged(claims, jwt.account_claims(
        name, public, jetstream=nsc.jetstream_limits(p["jetstream"]), limits=nsc.account_limits(p["limits"]),
        signing_keys=signing + scoped, mappings=mappings,
        default_permissions=nsc.permissions(p["default_permissions"], "default_permissions")),
        nsc.ACCOUNT_MANAGED | (set() if mappings is None else {"mappings"}))
    changed = nsc.needs_signing(claims, desired)
    new_claims = claims
    if changed:
        signer, _via_signing_key = nsc.signer_of(store, op_claims, "operator %r" % store.operator)
        token = jwt.encode(desired, signer)
        new_claims = jwt.decode(token, verify=False)
    changed = changed or sorted(previous) != sorted(stored_previous)
    result = dict(changed=changed, account_id=public, jwt=token, jwt_path=store.account_jwt_path(name),
                  signing_keys=sorted(signing), previous_signing_keys=sorted(previous),
                  scoped_signing_keys=[{"role": key["role"], "key": key["key"]} for key in scoped])
    if run.diff:
        result["diff"] = nsc.diff(claims, new_claims)
    if p["rotate_signing_key"] or retired:
        # every user an older key issued, issued again by the current one
        result["reissued_users"] = reissued(store, name, claims, [key for key in signing if key not in previous])
    if p["retire_signing_keys"]:
        result["retired_signing_keys"] = sorted(retired)
    return result, token, op_claims, new_seeds


def reissued(store, account, old_claims, current):
    """The users a signing key other than ``current`` issued, to issue again with a current one (written
    later, by write_reissued)."""
    old_keys = set(jwt.plain_signing_keys(old_claims)) - set(current)
    return [user for user in store.users(account)
            if (store.read_user(account, user)[1] or {}).get("iss") in old_keys] if old_claims else []


def write_reissued(store, account, users, new_claims, previous):
    """Issue ``users`` again with the account's current signing key (its seed already in the key store):
    same claims, new JWT and creds."""
    signer, _via_signing_key = nsc.signer_of(store, new_claims, "account %r" % account, previous)
    for user in users:
        _token, claims = store.read_user(account, user)
        seed = store.read_seed(claims["sub"])
        if not seed:
            raise StoreError("user %r: no seed for %s in %s, cannot issue it again" % (user, claims["sub"], store.keys_dir))
        token = jwt.encode(dict(nsc.body(claims), nats=dict(claims["nats"], issuer_account=new_claims["sub"])), signer)
        store.write_user(account, user, token)
        store.write_creds(account, user, jwt.creds(token, seed))


def remove(run, store, result):
    """Remove the account, unless others import from it and force is off."""
    p = run.params
    token, claims = store.read_account(p["name"])
    importers = nsc.importers_of(store, p["name"], claims["sub"]) if claims else []
    if importers and not p["force"]:
        raise StoreError("other accounts import from it: %s. Remove those imports first (nsc_export "
                         "state=absent), or set force=true to leave them dangling" % ", ".join(importers))
    if importers:
        run.warn("account %r was removed although other accounts import from it; these imports now dangle: %s"
                 % (p["name"], ", ".join(importers)))
    if result["changed"] and not run.check_mode:
        store.remove_account(p["name"])
    if result["changed"] and p["push"]:
        run.warn("account %r was removed from the store; the resolver keeps it" % p["name"])


def converge(run):
    """One account, as the single form converges it (also each item of ``accounts``): the result, or
    nsc.ConvergeFailed carrying what was done."""
    p = run.params
    result, written = {}, False
    try:
        check_item(p)
        store = Store(p["store_dir"], p["keys_dir"], p["operator"])
        with store.locked(p["lock_timeout"], create=False):
            result, token, op_claims, new_seeds = plan(run, store)
            if p["state"] == "absent":
                remove(run, store, result)
                return result
            # refuse unusable push credentials before the store changes
            push_with = nsc.push_params(store, op_claims, p) if p["push"] else None
            if result["changed"] and not run.check_mode:
                for seed in new_seeds:
                    store.write_seed(seed)
                store.write_account(p["name"], token)
                written = True
                store.write_previous_signing_keys(p["name"], result["previous_signing_keys"])
                if result.get("reissued_users"):
                    write_reissued(store, p["name"], result["reissued_users"], jwt.decode(token, verify=False),
                                   result["previous_signing_keys"])
            if p["push"]:
                try:
                    if nsc.push_if_needed(push_with, result["account_id"], token, run.check_mode,
                                          p["expected_servers"], result):
                        result["changed"] = True
                except (NatsClientError, nsc.PushFailed) as exc:
                    result["unconfirmed"] = result.get("unconfirmed") or ["(no server was reached)"]
                    raise nsc.PushFailed("%s%s" % ("the store holds the new JWT, but " if written else "", exc)) from exc
    except (NatsEdgeError, OSError) as exc:
        # changed says what really happened: the store written, or a JWT sent
        result["changed"] = written or bool(result.get("pushed"))
        again = "; the next run pushes it again" if written and isinstance(exc, nsc.PushFailed) else ""
        raise nsc.ConvergeFailed("%s: %s%s" % (named(p), exc, again), **result) from exc
    return result
