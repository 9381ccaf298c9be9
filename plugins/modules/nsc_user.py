#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nsc_user
short_description: Manage a NATS user JWT and its creds file over its whole life - issue, renew, rotate, revoke
description:
  - Creates or updates a user of an account made with M(nats_edge.fleet.nsc_account) (or nsc) and writes
    its creds file (mode 0600, written whole) in the key store.
  - The user is issued by an account signing key when the account has one whose seed is in the key store
    (then C(issuer_account) names the account), else by the account's own key.
  - The JWT is signed again only when what it says changes, when its issuer no longer belongs to the
    account, or when it is due for renewal (O(renew_before)).
  - Removing a user revokes it - its key goes into the account's C(revocations) - before its files are
    removed, so a copy of its creds kept elsewhere stops working once the account is pushed (O(push)).
  - Key rotation without an outage - O(rotate=true) issues a new key while the old one keeps working; once
    the new creds are on every host, O(revoke_previous=true) revokes the old key.
author:
  - nats_edge.fleet contributors (@nats_edge)
extends_documentation_fragment:
  - nats_edge.fleet.nsc
  - nats_edge.fleet.nsc.user_permissions
  - nats_edge.fleet.connection
  - nats_edge.fleet.nsc.push_confirm
attributes:
  check_mode:
    support: full
    description: Writes no file and pushes nothing; with O(push) it asks the resolver for the account JWT it has.
  diff_mode:
    support: full
    description: Returns the user claims before and after.
  idempotent:
    support: partial
    description:
      - A second run with the same options changes nothing, except that O(rotate=true) issues a new key on every run
        and O(renew_before) renews the JWT once it is due.
options:
  account:
    description: Name of the account. Required unless O(users) is used; cannot be combined with it.
    type: str
  name:
    description:
      - Name of the user (no whitespace, V(.), V(*), V(>), V(/)). Required unless O(users) is used; cannot be
        combined with it.
    type: str
  users:
    description:
      - Converge many users in one module run, one after another, each as the single form would.
      - Each item takes C(account), C(name) and every other option of the single form except the
        store's (O(operator), O(store_dir), O(keys_dir), O(lock_timeout)), the connection's and O(push) and
        O(expected_servers), which the task gives for all items.
      - Every item is checked before the first is converged; an error names the item (V(users[2] (APP/web))) and
        the field. The first item that fails stops the run, and RV(item_results) shows what the items before it did.
    type: list
    elements: dict
  state:
    description:
      - V(present) creates or updates the user and its creds.
      - V(absent) revokes the user in its account (unless O(revoke=false)), then removes its JWT and creds.
      - V(revoked) revokes the user and keeps its files; a later V(present) issues a new JWT, which the servers
        accept again.
    type: str
    choices: [present, absent, revoked]
    default: present
  revoke:
    description:
      - With O(state=absent), revoke the user's key in the account before removing its files.
      - V(false) only removes the files, with a warning - copies of the creds stay valid.
    type: bool
    default: true
  bearer_token:
    description: Let the JWT alone authenticate the user, without proving the seed.
    type: bool
    default: false
  expires:
    description:
      - When the user stops being valid, as epoch seconds or an RFC 3339 time. Left out, never.
      - A time already past is accepted with a warning (the user cannot connect).
    type: raw
  expires_in:
    description:
      - How long a JWT is valid from when it is issued, as seconds or a duration such as V(30d). Not with O(expires).
      - The JWT is re-issued only when something else changes or, with O(renew_before), when it is due.
    type: raw
  renew_before:
    description:
      - Re-issue the JWT, with a fresh expiry of O(expires_in), once its expiry is less than this far away
        (seconds or a duration such as V(7d)). Needs O(expires_in), and must be shorter than it.
    type: raw
  rotate:
    description:
      - Issue the user a new key, new JWT and new creds. The old key keeps working and is remembered beside the
        user in the store until O(revoke_previous) revokes it.
      - Not idempotent - every run with it rotates again; set it for the run that rotates.
    type: bool
    default: false
  revoke_previous:
    description:
      - Revoke the keys earlier rotations replaced (RV(previous_keys)) in the account, and forget them.
      - Run it after the new creds reached every host and the servers or services using them were reloaded.
    type: bool
    default: false
  push:
    description:
      - Send the account JWT to the resolver when a revocation changed it (see M(nats_edge.fleet.nsc_account));
        needs the connection options. A revocation takes effect on a server only once it has the account JWT.
    type: bool
    default: false
notes:
  - For O(push), O(creds) defaults to the system user's creds file in the store; creds of a user of another
    account are refused before anything is written.
  - A revocation covers the JWTs of the key issued at or before its time, so a user issued again later with the
    same key is accepted again.
seealso:
  - module: nats_edge.fleet.nsc_account
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

- name: A user whose JWT lives 90 days and is renewed in its last 30
  nats_edge.fleet.nsc_user:
    operator: fleet
    account: APP
    name: sensor
    expires_in: 90d
    renew_before: 30d
  delegate_to: localhost

- name: Many users in one run
  nats_edge.fleet.nsc_user:
    operator: fleet
    users:
      - {account: APP, name: web, permissions: {pub: {allow: ["web.>"]}}}
      - {account: APP, name: batch, expires_in: 30d}
  delegate_to: localhost

- name: A user that left, revoked everywhere at once
  nats_edge.fleet.nsc_user:
    operator: fleet
    account: APP
    name: orders
    state: absent
    push: true
    servers: ["nats://hub-1:4222"]
  delegate_to: localhost

- name: Rotate a key, step 1 - new key and creds, the old key still works
  nats_edge.fleet.nsc_user:
    operator: fleet
    account: APP
    name: sensor
    expires_in: 90d
    rotate: true
  delegate_to: localhost

# step 2: copy the new creds to the hosts and reload what uses them

- name: Rotate a key, step 3 - revoke the old key
  nats_edge.fleet.nsc_user:
    operator: fleet
    account: APP
    name: sensor
    expires_in: 90d
    revoke_previous: true
    push: true
    servers: ["nats://hub-1:4222"]
  delegate_to: localhost
"""

RETURN = r"""
item_results:
  description: With O(users), the result of each item, in the order given, with the keys the single form returns.
  returned: when O(users) is used
  type: list
  elements: dict
user_public_key:
  description: Public key of the user.
  returned: state is present or revoked
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
expires_at:
  description: When the user JWT expires (epoch seconds), or null.
  returned: state is present
  type: int
renewed:
  description: Whether the JWT was (or would be) re-issued because its expiry was within O(renew_before).
  returned: state is present
  type: bool
rotated_from:
  description: The key a rotation replaced.
  returned: when O(rotate) is true
  type: str
previous_keys:
  description: Keys earlier rotations replaced that are not revoked yet.
  returned: state is present
  type: list
  elements: str
revoked_keys:
  description: Keys revoked in the account by this run.
  returned: always
  type: list
  elements: str
account_jwt_changed:
  description: Whether the account JWT changed (a revocation), and so needs a push to take effect.
  returned: always
  type: bool
push_needed:
  description: Whether the resolver's account JWT differed from the store's.
  returned: when O(push) is true
  type: bool
pushed:
  description: The answer of every server to the push.
  returned: when pushed
  type: list
  elements: dict
unconfirmed:
  description: Servers that did not confirm the push.
  returned: when O(push) is true
  type: list
  elements: str
"""

import time

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.nats_edge.fleet.plugins.module_utils import _bulk as bulk
from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
from ansible_collections.nats_edge.fleet.plugins.module_utils import _nsc as nsc
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import (
    NatsClientError, nats_module, require_nats_py)
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc_store import Store, StoreError, valid_name
from ansible_collections.nats_edge.fleet.plugins.module_utils._units import duration_ns

ARGUMENT_SPEC = dict(
    nsc.STORE_ARGSPEC,
    account=dict(type="str", required=True),
    name=dict(type="str", required=True),
    state=dict(type="str", choices=["present", "absent", "revoked"], default="present"),
    revoke=dict(type="bool", default=True),
    permissions=dict(type="dict", options=nsc.PERMISSIONS_OPTIONS),
    bearer_token=dict(type="bool", default=False),
    expires=dict(type="raw"),
    expires_in=dict(type="raw"),
    renew_before=dict(type="raw"),
    rotate=dict(type="bool", default=False),
    revoke_previous=dict(type="bool", default=False),
    push=dict(type="bool", default=False),
    expected_servers=dict(type="int"),
)


def _seconds(value, option):
    try:
        return duration_ns(value) // 10**9
    except ValueError as exc:
        raise StoreError("%s: %s" % (option, exc))


def lifetime(params):
    """(seconds a JWT lives, seconds before expiry it is renewed), either may be None."""
    life = _seconds(params["expires_in"], "expires_in") if params["expires_in"] is not None else None
    renew = _seconds(params["renew_before"], "renew_before") if params["renew_before"] is not None else None
    if life is not None and life <= 0:
        raise StoreError("expires_in: %r must be longer than 0" % params["expires_in"])
    if renew is not None and life is None:
        raise StoreError("renew_before needs expires_in: a JWT with a fixed expiry cannot get a fresh one")
    if renew is not None and renew >= life:
        raise StoreError("renew_before (%s) is not shorter than the user's lifetime, expires_in (%s): every run "
                         "would renew it" % (params["renew_before"], params["expires_in"]))
    return life, renew


def expiry(params, claims, now, result):
    """The expiry the JWT should have: fixed, kept, or fresh (renewed)."""
    life, renew = lifetime(params)
    result["renewed"] = False
    if life is None:
        return nsc.expiry(params["expires"])
    current = (claims or {}).get("exp")
    if current and current - now > (renew or 0) and current <= now + life:
        return current
    if current and renew is not None and current - now <= renew:
        result["renewed"] = True
    return now + life


class Run(object):
    """One run of the module: what it reads from the store, decides and writes."""

    def __init__(self, module, store):
        self.module = module
        self.p = module.params
        self.store = store
        self.account, self.name = self.p["account"], self.p["name"]
        self.now = int(time.time())
        self.result = dict(jwt_path=store.user_jwt_path(self.account, self.name),
                           creds_file=store.creds_path(self.account, self.name), changed=False, revoked_keys=[],
                           account_jwt_changed=False)
        self.writes = []  # (writer, args) applied once everything is decided
        self.account_token = None

    def read(self):
        _op_token, self.op_claims = self.store.read_operator()
        _acc_token, self.acc_claims = self.store.read_account(self.account)
        if self.acc_claims is None:
            raise StoreError("account %r is not in the store of operator %r" % (self.account, self.store.operator))
        self.store.check_account(self.account, self.op_claims, self.acc_claims)
        self.token, self.claims = self.store.read_user(self.account, self.name)
        self.previous = self.store.read_previous_keys(self.account, self.name)

    def revoke(self, publics):
        """Revoke ``publics`` in the account claims (once; an older revocation is moved to now
        only when the key has a JWT issued since)."""
        due = []
        for public in publics:
            when = nsc.revoked_at(self.acc_claims, public)
            issued = self.claims.get("iat", 0) if self.claims and self.claims["sub"] == public else 0
            if when is None or when < issued:
                due.append(public)
        if not due:
            return
        desired = nsc.with_revocations(self.acc_claims, due, self.now)
        signer, _via = nsc.signer_of(self.store, self.op_claims, "operator %r" % self.store.operator)
        self.account_token = jwt.encode(desired, signer)
        self.acc_claims = jwt.decode(self.account_token, verify=False)
        self.writes.append((self.store.write_account, (self.account, self.account_token)))
        self.result["revoked_keys"] += due
        self.result.update(changed=True, account_jwt_changed=True)

    def absent(self):
        exists = self.claims is not None or self.store.read_creds(self.account, self.name) is not None
        if self.claims is not None and self.p["revoke"]:
            self.revoke([self.claims["sub"]] + self.previous)
        elif exists and not self.p["revoke"]:
            self.module.warn("user %r of account %r: removed without revoking it (revoke=false); copies of its "
                             "creds stay valid" % (self.name, self.account))
        if exists:
            self.result["changed"] = True
            self.writes.append((self.store.remove_user, (self.account, self.name)))

    def revoked(self):
        if self.claims is None:
            raise StoreError("cannot revoke it: it is not in the store (state=revoked keeps a user's files, so it "
                             "needs them)")
        self.revoke([self.claims["sub"]] + self.previous)
        self.result["user_public_key"] = self.claims["sub"]

    def present(self):
        p = self.p
        valid = self.claims is not None and self.store.check_user(self.account, self.name, self.acc_claims,
                                                                  self.claims)
        new_seed = None
        if self.claims and not p["rotate"]:
            seed = self.store.read_seed(self.claims["sub"])
            if not seed:
                raise StoreError("no seed for %s in %s" % (self.claims["sub"], self.store.keys_dir))
        else:
            seed = new_seed = jwt.new_seed("user")
        public = jwt.public_key(seed)
        previous = list(self.previous)
        if p["rotate"] and self.claims:
            previous.append(self.claims["sub"])
            self.result["rotated_from"] = self.claims["sub"]
        if p["revoke_previous"] and previous:
            self.revoke(previous)
            previous = []
        retiring = self.store.read_previous_signing_keys(self.account)
        signer, via_signing_key = nsc.signer_of(self.store, self.acc_claims, "account %r" % self.account, retiring)
        expires = expiry(p, self.claims if not new_seed else None, self.now, self.result)
        if p["expires"] is not None and expires is not None and expires <= self.now:
            self.module.warn("user %r of account %r: expires (%s) is already past; the user cannot connect" % (
                self.name, self.account, p["expires"]))
        desired = jwt.user_claims(
            self.name, public, issuer_account=self.acc_claims["sub"] if via_signing_key else None,
            permissions=nsc.permissions(p["permissions"], "permissions"),
            bearer_token=p["bearer_token"], expires=expires)
        revoked_since = nsc.revoked_at(self.acc_claims, public)
        still_revoked = revoked_since is not None and (self.claims or {}).get("iat", 0) <= revoked_since
        # a user a replaced signing key issued is issued again by the current one
        on_retiring_key = bool(self.claims) and self.claims.get("iss") in retiring
        signing = (new_seed is not None or not valid or still_revoked or on_retiring_key
                   or nsc.needs_signing(self.claims, desired))
        token = self.token
        if signing:
            # one second after a revocation of this key, so the new JWT is not revoked with the old one
            token = jwt.encode(desired, signer, issued_at=max(self.now, (revoked_since or 0) + 1))
        creds = jwt.creds(token, seed)
        rewrite_creds = self.store.read_creds(self.account, self.name) != creds
        new_claims = jwt.decode(token, verify=False)
        self.result.update(user_public_key=public, issuer=new_claims["iss"], expires_at=new_claims.get("exp"),
                           previous_keys=sorted(set(previous)))
        if signing or rewrite_creds or sorted(set(previous)) != sorted(set(self.previous)):
            self.result["changed"] = True
        if self.module._diff:
            self.result["diff"] = nsc.diff(self.claims, new_claims)
        if new_seed:
            self.writes.append((self.store.write_seed, (new_seed,)))
        if signing:
            self.writes.append((self.store.write_user, (self.account, self.name, token)))
        if rewrite_creds:
            self.writes.append((self.store.write_creds, (self.account, self.name, creds)))
        if sorted(set(previous)) != sorted(set(self.previous)):
            self.writes.append((self.store.write_previous_keys, (self.account, self.name, previous)))

    def write(self):
        if self.module.check_mode:
            return False
        for writer, args in self.writes:
            writer(*args)
        return bool(self.writes)


def main():
    module = nats_module(bulk.bulk_spec(ARGUMENT_SPEC, "users", required=("account", "name")), jetstream=False,
                         supports_check_mode=True, mutually_exclusive=[["expires", "expires_in"], ["users", "name"],
                                                                       ["users", "account"]],
                         required_one_of=[["name", "users"]], required_together=[["account", "name"]])
    p = module.params
    if jwt.nkeys is None:
        module.fail_json(msg=missing_required_lib(jwt.NKEYS), exception=jwt._IMPORT_ERROR)
    if p["push"]:
        require_nats_py(module)
    nsc.warn_loose_keys_dir(module, p["keys_dir"])
    if p["users"] is not None:
        bulk.run(module, "users", ARGUMENT_SPEC, converge, lambda item: "%s/%s" % (item.get("account"), item.get("name")),
                 mutually_exclusive=[["expires", "expires_in"]])
    converge(module)


def converge(module):
    """One user, as the single form converges it (also each item of ``users``)."""
    p = module.params
    run, written = None, False
    try:
        valid_name("account", p["account"])
        valid_name("user", p["name"])
        store = Store(p["store_dir"], p["keys_dir"], p["operator"])
        with store.locked(p["lock_timeout"], create=False):
            run = Run(module, store)
            run.read()
            getattr(run, p["state"])()
            # refuse unusable push credentials before the store changes
            push_with = nsc.push_params(store, run.op_claims, p) if p["push"] else None
            written = run.write()
            if p["push"]:
                token = run.account_token or store.read_account(p["account"])[0]
                if nsc.push_if_needed(push_with, run.acc_claims["sub"], token, module.check_mode,
                                      p["expected_servers"], run.result):
                    run.result["changed"] = True
    except (StoreError, jwt.JWTError, OSError, NatsClientError, nsc.PushFailed) as exc:
        result = run.result if run else {}
        result["changed"] = written or bool(result.get("pushed"))
        again = "; the store holds the revocation and the next run pushes it again" if (
            written and isinstance(exc, (nsc.PushFailed, NatsClientError))) else ""
        module.fail_json(msg="user %r of account %r: %s%s" % (p["name"], p["account"], exc, again), **result)
    if run.result["account_jwt_changed"] and not p["push"]:
        module.warn("user %r of account %r: the account JWT changed (%s); servers enforce it only once it is pushed "
                    "(push: true, or nsc_account with push)" % (p["name"], p["account"], "revoked " + ", ".join(
                        run.result["revoked_keys"])))
    module.exit_json(**run.result)


if __name__ == "__main__":
    main()
