#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nsc_account
short_description: Manage a NATS account JWT in an nsc store and push it to the resolver
description:
  - Creates or updates an account of an operator made with M(nats_edge.fleet.nsc_operator) (or nsc) -
    JetStream limits, connection limits, default permissions and an account signing key.
  - The JWT is signed by an operator signing key when the key store has one, else by the operator.
    It is signed again only when what it says changes; exports, imports and other claims this module
    does not manage are kept.
  - With O(push=true) the JWT is sent to every server of the full resolver on C($SYS.REQ.CLAIMS.UPDATE),
    each server's answer is gathered, and the JWT is read back with C($SYS.REQ.ACCOUNT.<id>.CLAIMS.LOOKUP).
    It is only sent when the resolver's JWT says something else. Changes take effect without a restart.
author:
  - nats_edge.fleet contributors (@nats_edge)
extends_documentation_fragment:
  - nats_edge.fleet.nsc
  - nats_edge.fleet.nsc.default_permissions
  - nats_edge.fleet.connection
  - nats_edge.fleet.nsc.push_confirm
attributes:
  check_mode:
    support: full
    description:
      - Writes no file and pushes nothing.
      - With O(push) it asks the resolver for the JWT it has, to predict C(changed).
  diff_mode:
    support: full
    description: Returns the account claims before and after.
  idempotent:
    support: full
    description: A second run with the same options changes no file and pushes nothing.
options:
  name:
    description:
      - Name of the account (no whitespace, V(.), V(*), V(>), V(/)). Required unless O(accounts) is used; cannot be
        combined with it.
    type: str
  accounts:
    description:
      - Converge many accounts in one module run, one after another, each as the single form would - with
        O(push), each is pushed in turn, in the order given.
      - Each item takes O(name) and every other option of the single form except the store's (O(operator),
        O(store_dir), O(keys_dir), O(lock_timeout)), the connection's and O(push) and O(expected_servers), which the
        task gives for all items.
      - Every item is checked before the first is converged; an error names the item (V(accounts[2] (APP))) and the
        field. The first item that fails stops the run, and RV(item_results) shows what the items before it did.
    type: list
    elements: dict
  state:
    description:
      - V(present) creates or updates the account.
      - V(absent) removes its JWT, users and creds from the store. A full resolver keeps the account
        (nothing is pushed to delete it).
      - An account that other accounts import from is not removed unless O(force=true).
    type: str
    choices: [present, absent]
    default: present
  force:
    description:
      - With O(state=absent), remove the account even though other accounts import from it. Their imports
        are left dangling (a warning names them); remove them with M(nats_edge.fleet.nsc_export) first.
    type: bool
    default: false
  jetstream:
    description:
      - JetStream limits of the account; left out, JetStream is disabled for it.
      - Sizes as bytes or strings such as V(1GiB); V(-1) is unlimited, and so is a limit left out.
    type: dict
    suboptions:
      disk_storage:
        description: File storage the account may use.
        type: raw
      mem_storage:
        description: Memory storage the account may use.
        type: raw
      streams:
        description: Most streams.
        type: int
      consumers:
        description: Most consumers.
        type: int
  limits:
    description: Account limits; left out or V(-1) is unlimited. O(limits.data) and O(limits.payload) are sizes.
    type: dict
    suboptions:
      conn:
        description: Most client connections.
        type: int
      leaf:
        description: Most leaf node connections.
        type: int
      subs:
        description: Most subscriptions.
        type: int
      data:
        description: Most data.
        type: raw
      payload:
        description: Largest message payload.
        type: raw
      imports:
        description: Most imports.
        type: int
      exports:
        description: Most exports.
        type: int
  signing_key:
    description:
      - Have an account signing key; M(nats_edge.fleet.nsc_user) then issues users with it.
      - V(false) removes the account's signing keys; users they issued are issued again by the next
        M(nats_edge.fleet.nsc_user) run.
    type: bool
    default: false
  rotate_signing_key:
    description:
      - Add a new signing key to the account, which issues every user from then on, and issue every user of the
        store that an older signing key issued again with it (same key and permissions, new JWT and creds;
        RV(reissued_users)).
      - The older keys stay in the account (RV(previous_signing_keys)), so the creds they issued keep working
        while the re-issued ones travel to the hosts. Retire them (O(retire_signing_keys)) and push once nothing
        uses them any more - M(nats_edge.fleet.nsc_export) signs the activations they signed again meanwhile.
        The playbook C(nats_edge.fleet.rotate_creds) does all of this across the fleet.
      - With O(retire_signing_keys) in the same run, the older keys go at once (a key that leaked); once pushed,
        servers refuse every user they issued.
      - Not idempotent - every run with it rotates again. Needs O(signing_key=true).
    type: bool
    default: false
  retire_signing_keys:
    description:
      - Remove the signing keys a rotation replaced (RV(previous_signing_keys)) from the account. Once the account
        is pushed, servers refuse the users and creds those keys issued; users of the store still issued by them
        are issued again with the current key (RV(reissued_users)).
      - Refused, changing nothing, while another account of the store holds an activation one of them signed.
      - Nothing to do when no key is waiting to be retired. Needs O(signing_key=true).
    type: bool
    default: false
  push:
    description: Send the JWT to the resolver (see the description); needs the connection options.
    type: bool
    default: false
notes:
  - For O(push), O(creds) defaults to the system user's creds file in the store. Creds of a user of another
    account are refused before anything is sent.
  - The store is written before the push. When the push fails the module fails with C(changed=true) and the
    servers that did not confirm in RV(unconfirmed); the store keeps the new JWT, and the next run pushes it again
    because the resolver's JWT still differs.
"""

EXAMPLES = r"""
---
- name: Many accounts in one run
  nats_edge.fleet.nsc_account:
    operator: fleet
    accounts:
      - {name: SENSORS, jetstream: {disk_storage: 1GiB, streams: 10}}
      - {name: REPORTS, limits: {conn: 100}}
  delegate_to: localhost

- name: An account with JetStream limits, pushed to the resolver
  nats_edge.fleet.nsc_account:
    operator: fleet
    name: APP
    signing_key: true
    jetstream:
      disk_storage: 10GiB
      mem_storage: 256MiB
      streams: 20
      consumers: -1
    limits:
      conn: 1000
    push: true
    servers: ["nats://hub-1:4222"]
    expected_servers: 3
  delegate_to: localhost
"""

RETURN = r"""
item_results:
  description: With O(accounts), the result of each item, in the order given, with the keys the single form returns.
  returned: when O(accounts) is used
  type: list
  elements: dict
account_id:
  description: Public key of the account.
  returned: state is present
  type: str
jwt:
  description: The account JWT (not secret).
  returned: state is present
  type: str
jwt_path:
  description: Path of the account JWT in the store.
  returned: always
  type: str
signing_keys:
  description: Public signing keys of the account.
  returned: state is present
  type: list
  elements: str
pushed:
  description: The answer of every server to the push (server name, whether it accepted the JWT, its message).
  returned: when pushed
  type: list
  elements: dict
unconfirmed:
  description: Servers that did not confirm the push.
  returned: when push is true
  type: list
  elements: str
push_needed:
  description: Whether the resolver's JWT differed from the store's (and so was, or in check mode would be, sent).
  returned: when push is true
  type: bool
reissued_users:
  description: Users issued again with the current signing key.
  returned: when O(rotate_signing_key) is true, or O(retire_signing_keys) retired a key
  type: list
  elements: str
previous_signing_keys:
  description: Signing keys a rotation replaced that are still in the account, waiting for O(retire_signing_keys).
  returned: state is present
  type: list
  elements: str
retired_signing_keys:
  description: Signing keys this run removed from the account.
  returned: when O(retire_signing_keys) is true
  type: list
  elements: str
"""

from ansible_collections.nats_edge.fleet.plugins.module_utils import _bulk as bulk
from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
from ansible_collections.nats_edge.fleet.plugins.module_utils import _nsc as nsc
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import (
    NatsClientError, nats_module, require_nats_py)
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc_store import Store, StoreError, valid_name

ARGUMENT_SPEC = dict(
    nsc.STORE_ARGSPEC,
    name=dict(type="str", required=True),
    state=dict(type="str", choices=["present", "absent"], default="present"),
    jetstream=dict(type="dict", options=dict(
        disk_storage=dict(type="raw"), mem_storage=dict(type="raw"),
        streams=dict(type="int"), consumers=dict(type="int"))),
    limits=dict(type="dict", options=dict(
        conn=dict(type="int"), leaf=dict(type="int"), subs=dict(type="int"), data=dict(type="raw"),
        payload=dict(type="raw"), imports=dict(type="int"), exports=dict(type="int"))),
    signing_key=dict(type="bool", default=False),
    default_permissions=dict(type="dict", options=nsc.PERMISSIONS_OPTIONS),
    force=dict(type="bool", default=False),
    rotate_signing_key=dict(type="bool", default=False),
    retire_signing_keys=dict(type="bool", default=False),
    push=dict(type="bool", default=False),
    expected_servers=dict(type="int"),
)


def plan(module, store):
    """(result, files to write as (writer, args), new seeds)."""
    p = module.params
    name = p["name"]
    _op_token, op_claims = store.read_operator()
    token, claims = store.read_account(name)
    if claims is not None:
        store.check_account(name, op_claims, claims)
    if p["state"] == "absent":
        return dict(changed=claims is not None, jwt_path=store.account_jwt_path(name)), token, None, []

    new_seeds = []
    if claims:
        public = claims["sub"]
    else:
        seed = jwt.new_seed("account")
        new_seeds.append(seed)
        public = jwt.public_key(seed)
    signing = []
    for option in ("rotate_signing_key", "retire_signing_keys"):
        if p[option] and not p["signing_key"]:
            raise StoreError("%s needs signing_key=true" % option)
    stored_previous = store.read_previous_signing_keys(name) if claims else []
    previous = stored_previous
    if p["signing_key"]:
        signing = [key for key in (claims or {}).get("nats", {}).get("signing_keys") or [] if store.read_seed(key)]
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
    desired = nsc.merged(claims, jwt.account_claims(
        name, public, jetstream=nsc.jetstream_limits(p["jetstream"]), limits=nsc.account_limits(p["limits"]),
        signing_keys=signing,
        default_permissions=nsc.permissions(p["default_permissions"], "default_permissions")),
        nsc.ACCOUNT_MANAGED)
    changed = nsc.needs_signing(claims, desired)
    new_claims = claims
    if changed:
        signer, _via_signing_key = nsc.signer_of(store, op_claims, "operator %r" % store.operator)
        token = jwt.encode(desired, signer)
        new_claims = jwt.decode(token, verify=False)
    changed = changed or sorted(previous) != sorted(stored_previous)
    result = dict(changed=changed, account_id=public, jwt=token, jwt_path=store.account_jwt_path(name),
                  signing_keys=sorted(signing), previous_signing_keys=sorted(previous))
    if module._diff:
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
    old_keys = set(((old_claims or {}).get("nats") or {}).get("signing_keys") or []) - set(current)
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


def remove(module, store, result):
    """Remove the account, unless others import from it and force is off."""
    p = module.params
    token, claims = store.read_account(p["name"])
    importers = nsc.importers_of(store, p["name"], claims["sub"]) if claims else []
    if importers and not p["force"]:
        raise StoreError("other accounts import from it: %s. Remove those imports first (nsc_export "
                         "state=absent), or set force=true to leave them dangling" % ", ".join(importers))
    if importers:
        module.warn("account %r was removed although other accounts import from it; these imports now dangle: %s"
                    % (p["name"], ", ".join(importers)))
    if result["changed"] and not module.check_mode:
        store.remove_account(p["name"])
    if result["changed"] and p["push"]:
        module.warn("account %r was removed from the store; the resolver keeps it" % p["name"])


def main():
    module = nats_module(bulk.bulk_spec(ARGUMENT_SPEC, "accounts", required=("name",)), jetstream=False,
                         supports_check_mode=True, required_one_of=[["name", "accounts"]],
                         mutually_exclusive=[["name", "accounts"]])
    p = module.params
    if jwt.nkeys is None:
        from ansible.module_utils.basic import missing_required_lib
        module.fail_json(msg=missing_required_lib(jwt.NKEYS), exception=jwt._IMPORT_ERROR)
    if p["push"] and (p["state"] == "present" or p["accounts"] is not None):
        require_nats_py(module)
    nsc.warn_loose_keys_dir(module, p["keys_dir"])
    if p["accounts"] is not None:
        bulk.run(module, "accounts", ARGUMENT_SPEC, converge, lambda item: item.get("name"))
    converge(module)


def converge(module):
    """One account, as the single form converges it (also each item of ``accounts``)."""
    p = module.params
    result, written = {}, False
    try:
        valid_name("account", p["name"])
        store = Store(p["store_dir"], p["keys_dir"], p["operator"])
        with store.locked(p["lock_timeout"], create=False):
            result, token, op_claims, new_seeds = plan(module, store)
            if p["state"] == "absent":
                remove(module, store, result)
                module.exit_json(**result)
            # refuse unusable push credentials before the store changes
            push_with = nsc.push_params(store, op_claims, p) if p["push"] else None
            if result["changed"] and not module.check_mode:
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
                    if nsc.push_if_needed(push_with, result["account_id"], token, module.check_mode,
                                          p["expected_servers"], result):
                        result["changed"] = True
                except (NatsClientError, nsc.PushFailed) as exc:
                    result["unconfirmed"] = result.get("unconfirmed") or ["(no server was reached)"]
                    raise nsc.PushFailed("%s%s" % ("the store holds the new JWT, but " if written else "", exc))
    except (StoreError, jwt.JWTError, OSError, NatsClientError, nsc.PushFailed) as exc:
        # changed says what really happened: the store written, or a JWT sent
        result["changed"] = written or bool(result.get("pushed"))
        again = "; the next run pushes it again" if written and isinstance(exc, nsc.PushFailed) else ""
        module.fail_json(msg="account %r of operator %r: %s%s" % (p["name"], p["operator"], exc, again), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
