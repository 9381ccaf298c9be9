#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nsc_user
short_description: Manage a NATS user JWT and its creds file in an nsc store
description:
  - Creates or updates a user of an account made with M(nats_edge.fleet.nsc_account) (or nsc) and writes
    its creds file (mode 0600) in the key store.
  - The user is issued by an account signing key when the account has one whose seed is in the key store
    (then C(issuer_account) names the account), else by the account's own key.
  - The JWT is signed again only when what it says changes, or when its issuer no longer belongs to the
    account. Users need no push; servers check them against the account.
author:
  - nats_edge.fleet contributors (@nats_edge)
extends_documentation_fragment:
  - nats_edge.fleet.nsc
  - nats_edge.fleet.nsc.user_permissions
attributes:
  check_mode:
    support: full
    description: Writes no file.
  diff_mode:
    support: full
    description: Returns the user claims before and after.
  idempotent:
    support: full
    description: A second run with the same options changes no file.
options:
  account:
    description: Name of the account.
    type: str
    required: true
  name:
    description: Name of the user (no whitespace, V(.), V(*), V(>), V(/)).
    type: str
    required: true
  state:
    description: V(present) creates or updates the user and its creds; V(absent) removes both.
    type: str
    choices: [present, absent]
    default: present
  bearer_token:
    description: Let the JWT alone authenticate the user, without proving the seed.
    type: bool
    default: false
  expires:
    description:
      - When the user stops being valid, as epoch seconds or an RFC 3339 time. Left out, never.
      - A time already past is accepted with a warning (the user cannot connect).
    type: raw
"""

EXAMPLES = r"""
---
- name: A user that may only work on orders
  nats_edge.fleet.nsc_user:
    operator: fleet
    account: APP
    name: orders
    permissions:
      pub: {allow: ["orders.>", "$JS.API.>"]}
      sub: {allow: ["_INBOX.>", "orders.>"]}
    expires: "2035-01-01T00:00:00Z"
  delegate_to: localhost
  register: orders_user
"""

RETURN = r"""
user_public_key:
  description: Public key of the user.
  returned: state is present
  type: str
creds_file:
  description: Path of the creds file (never its content).
  returned: always
  type: str
jwt_path:
  description: Path of the user JWT in the store.
  returned: always
  type: str
issuer:
  description: Public key that signed the user JWT.
  returned: state is present
  type: str
"""

import time

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
from ansible_collections.nats_edge.fleet.plugins.module_utils import _nsc as nsc
from ansible_collections.nats_edge.fleet.plugins.module_utils._module import FleetModule
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc_store import Store, StoreError, valid_name

ARGUMENT_SPEC = dict(
    nsc.STORE_ARGSPEC,
    account=dict(type="str", required=True),
    name=dict(type="str", required=True),
    state=dict(type="str", choices=["present", "absent"], default="present"),
    permissions=dict(type="dict", options=nsc.PERMISSIONS_OPTIONS),
    bearer_token=dict(type="bool", default=False),
    expires=dict(type="raw"),
)


def run(module, store):
    p = module.params
    account, name = p["account"], p["name"]
    _op_token, op_claims = store.read_operator()
    _acc_token, acc_claims = store.read_account(account)
    if acc_claims is None:
        raise StoreError("account %r is not in the store of operator %r" % (account, store.operator))
    store.check_account(account, op_claims, acc_claims)
    token, claims = store.read_user(account, name)
    result = dict(jwt_path=store.user_jwt_path(account, name), creds_file=store.creds_path(account, name))
    if p["state"] == "absent":
        result["changed"] = claims is not None or store.read_creds(account, name) is not None
        if result["changed"] and not module.check_mode:
            store.remove_user(account, name)
        return result

    valid = claims is not None and store.check_user(account, name, acc_claims, claims)
    new_seed = None
    if claims:
        seed = store.read_seed(claims["sub"])
        if not seed:
            raise StoreError("user %r: no seed for %s in %s" % (name, claims["sub"], store.keys_dir))
    else:
        seed = new_seed = jwt.new_seed("user")
    public = jwt.public_key(seed)
    signer, via_signing_key = nsc.signer_of(store, acc_claims, "account %r" % account)
    expires = nsc.expiry(p["expires"])
    if expires is not None and expires <= time.time():
        module.warn("user %r of account %r: expires (%s) is already past; the user cannot connect" % (
            name, account, p["expires"]))
    desired = jwt.user_claims(
        name, public, issuer_account=acc_claims["sub"] if via_signing_key else None,
        permissions=nsc.permissions(p["permissions"], "permissions"),
        bearer_token=p["bearer_token"], expires=expires)
    signing = not valid or nsc.needs_signing(claims, desired)
    if signing:
        token = jwt.encode(desired, signer)
    creds = jwt.creds(token, seed)
    rewrite_creds = store.read_creds(account, name) != creds
    result.update(changed=signing or rewrite_creds, user_public_key=public,
                  issuer=jwt.decode(token, verify=False)["iss"])
    if module._diff:
        result["diff"] = nsc.diff(claims, jwt.decode(token, verify=False))
    if not module.check_mode:
        if new_seed:
            store.write_seed(new_seed)
        if signing:
            store.write_user(account, name, token)
        if rewrite_creds:
            store.write_creds(account, name, creds)
    return result


def main():
    module = FleetModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    p = module.params
    if jwt.nkeys is None:
        module.fail_json(msg=missing_required_lib(jwt.NKEYS), exception=jwt._IMPORT_ERROR)
    nsc.warn_loose_keys_dir(module, p["keys_dir"])
    try:
        valid_name("account", p["account"])
        valid_name("user", p["name"])
        store = Store(p["store_dir"], p["keys_dir"], p["operator"])
        with store.locked(p["lock_timeout"], create=False):
            result = run(module, store)
    except (StoreError, jwt.JWTError, OSError) as exc:
        module.fail_json(msg="user %r of account %r: %s" % (p["name"], p["account"], exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
