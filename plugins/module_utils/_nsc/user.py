# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One user of an account in an nsc store: read, decide, write, push (nsc_user and the fleet's store
run use it). Private to the collection.
"""

from __future__ import annotations

import time

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import common as nsc
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import NatsClientError
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import Store, StoreError, valid_name
from ansible_collections.nats_edge.fleet.plugins.module_utils._units import duration_ns

ARGUMENT_SPEC = dict(
    nsc.STORE_ARGSPEC,
    account=dict(type="str", required=True),
    name=dict(type="str", required=True),
    state=dict(type="str", choices=["present", "absent", "revoked"], default="present"),
    revoke=dict(type="bool", default=True),
    permissions=dict(type="dict", options=nsc.PERMISSIONS_OPTIONS),
    bearer_token=dict(type="bool", default=False),
    allowed_connection_types=dict(type="list", elements="str"),
    src=dict(type="list", elements="str"),
    signing_role=dict(type="str"),
    expires=dict(type="raw"),
    expires_in=dict(type="raw"),
    renew_before=dict(type="raw"),
    rotate=dict(type="bool", default=False),
    revoke_previous=dict(type="bool", default=False),
    push=dict(type="bool", default=False),
    expected_servers=dict(type="int"),
)

# an item of the bulk forms: the constraints of one user that are not about the task
CONSTRAINTS = dict(mutually_exclusive=[["expires", "expires_in"]])


def label(item):
    """How errors name an item of a list of users."""
    return "%s/%s" % (item.get("account"), item.get("name"))


def identity(params):
    """What makes two items of a list of users the same user (listed twice, they would fight on every run)."""
    return [(params.get("account"), params.get("name"))]


def named(params):
    """How converge's errors name the user: ``user 'web' of account 'APP'``."""
    return "user %r of account %r" % (params.get("name"), params.get("account"))


def check_item(params):
    """Every check of one user's options that needs no store - the account's and its own name, permissions
    (subjects, resp), expires (a time after 1970 that a server reads), expires_in and renew_before - as StoreError
    naming the option; ``params`` back. nsc_user (each item of ``users`` too) and nsc_store run it before the first
    file is written; the fleet's preflight runs it on each user of nats_accounts (ItemChecker's ``then``; there an
    item has no ``account``, the account it is listed under)."""
    if "account" in params:
        valid_name("account", params["account"])
    valid_name("user", params.get("name"))
    if params.get("state", "present") != "present":
        return params
    nsc.permissions(params.get("permissions"), "permissions")
    nsc.user_policy(params, "")
    role = params.get("signing_role")
    if role is not None:
        if not isinstance(role, str) or not role.strip():
            raise StoreError("signing_role: %r is not a role name" % (role,))
        own = [option for option in ("permissions", "bearer_token", "allowed_connection_types", "src")
               if params.get(option)]
        if own:
            raise StoreError("signing_role: a user issued with the scoped signing key of role %r gets its permissions "
                             "and limits from the key's template; %s cannot be given too (set them in the role's "
                             "template, nsc_account's scoped_signing_keys)" % (role, ", ".join(own)))
    if params.get("expires") is not None and params.get("expires_in") is not None:
        raise StoreError("expires and expires_in cannot be combined: expires is a fixed time, expires_in a lifetime "
                         "from each issue")
    nsc.expiry(params.get("expires"))
    lifetime(params)
    return params


def _seconds(value, option):
    try:
        return duration_ns(value) // 10**9
    except ValueError as exc:
        raise StoreError("%s: %s" % (option, exc)) from exc


def lifetime(params):
    """(seconds a JWT lives, seconds before expiry it is renewed), either may be None."""
    expires_in, renew_before = params.get("expires_in"), params.get("renew_before")
    life = _seconds(expires_in, "expires_in") if expires_in is not None else None
    renew = _seconds(renew_before, "renew_before") if renew_before is not None else None
    if life is not None and life <= 0:
        raise StoreError("expires_in: %r must be longer than 0" % (expires_in,))
    if renew is not None and life is None:
        raise StoreError("renew_before needs expires_in: a JWT with a fixed expiry cannot get a fresh one")
    if renew is not None and renew >= life:
        raise StoreError("renew_before (%s) is not shorter than the user's lifetime, expires_in (%s): every run "
                         "would renew it" % (renew_before, expires_in))
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


class UserRun(object):
    """One user's converge: what it reads from the store, decides and writes (``run``: the bulk.Run)."""

    def __init__(self, run, store):
        self.run = run
        self.p = run.params
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
            self.run.warn("user %r of account %r: removed without revoking it (revoke=false); copies of its "
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
        role = p.get("signing_role")
        if role:
            signer, via_signing_key = self.scoped_signer(role), True
        else:
            signer, via_signing_key = nsc.signer_of(self.store, self.acc_claims, "account %r" % self.account, retiring)
        # a user moves onto (or off) a role's key: issued again by the key it should have
        scoped_issuers = dict((key.get("key"), key.get("role")) for key in jwt.scoped_signing_keys(self.acc_claims))
        wrong_issuer = bool(self.claims) and (self.claims.get("iss") != jwt.public_key(signer) if role else
                                              self.claims.get("iss") in scoped_issuers)
        expires = expiry(p, self.claims if not new_seed else None, self.now, self.result)
        if p["expires"] is not None and expires is not None and expires <= self.now:
            self.run.warn("user %r of account %r: expires (%s) is already past; the user cannot connect" % (
                self.name, self.account, p["expires"]))
        desired = jwt.user_claims(
            self.name, public, issuer_account=self.acc_claims["sub"] if via_signing_key else None,
            permissions=None if role else nsc.permissions(p["permissions"], "permissions"),
            bearer_token=p["bearer_token"], limits=nsc.user_policy(p, ""), expires=expires, scoped=bool(role))
        revoked_since = nsc.revoked_at(self.acc_claims, public)
        still_revoked = revoked_since is not None and (self.claims or {}).get("iat", 0) <= revoked_since
        # a user a replaced signing key issued is issued again by the current one
        on_retiring_key = bool(self.claims) and self.claims.get("iss") in retiring
        signing = (new_seed is not None or not valid or still_revoked or on_retiring_key or wrong_issuer
                   or nsc.needs_signing(self.claims, desired))
        token = self.token
        if signing:
            # one second after a revocation of this key, so the new JWT is not revoked with the old one
            token = jwt.encode(desired, signer, issued_at=max(self.now, (revoked_since or 0) + 1))
        creds = jwt.creds(token, seed)
        rewrite_creds = self.store.read_creds(self.account, self.name) != creds
        new_claims = jwt.decode(token, verify=False)
        self.result.update(user_public_key=public, issuer=new_claims["iss"], expires_at=new_claims.get("exp"),
                           previous_keys=sorted(set(previous)), signing_role=scoped_issuers.get(new_claims["iss"]))
        if signing or rewrite_creds or sorted(set(previous)) != sorted(set(self.previous)):
            self.result["changed"] = True
        if self.run.diff:
            self.result["diff"] = nsc.diff(self.claims, new_claims)
        if new_seed:
            self.writes.append((self.store.write_seed, (new_seed,)))
        if signing:
            self.writes.append((self.store.write_user, (self.account, self.name, token)))
        if rewrite_creds:
            self.writes.append((self.store.write_creds, (self.account, self.name, creds)))
        if sorted(set(previous)) != sorted(set(self.previous)):
            self.writes.append((self.store.write_previous_keys, (self.account, self.name, previous)))

    def scoped_signer(self, role):
        """The seed of the account's scoped signing key of ``role``."""
        keys = [key for key in jwt.scoped_signing_keys(self.acc_claims) if key.get("role") == role]
        if not keys:
            roles = sorted(key.get("role") for key in jwt.scoped_signing_keys(self.acc_claims) if key.get("role"))
            raise StoreError("signing_role: account %r has no scoped signing key of role %r (%s); add it with "
                             "nsc_account's scoped_signing_keys" % (self.account, role, "its roles: %s" % ", ".join(
                                 roles) if roles else "it has none"))
        seed = self.store.read_seed(keys[0].get("key") or "")
        if not seed:
            raise StoreError("signing_role: no seed for %s, the key of role %r, in %s" % (
                keys[0].get("key"), role, self.store.keys_dir))
        return seed

    def write(self):
        if self.run.check_mode:
            return False
        for writer, args in self.writes:
            writer(*args)
        return bool(self.writes)


def converge(run):
    """One user, as the single form converges it (also each item of ``users``): the result, or
    nsc.ConvergeFailed carrying what was done."""
    p = run.params
    user, written = None, False
    try:
        check_item(p)
        store = Store(p["store_dir"], p["keys_dir"], p["operator"])
        with store.locked(p["lock_timeout"], create=False):
            user = UserRun(run, store)
            user.read()
            getattr(user, p["state"])()
            # refuse unusable push credentials before the store changes
            push_with = nsc.push_params(store, user.op_claims, p) if p["push"] else None
            written = user.write()
            if p["push"]:
                token = user.account_token or store.read_account(p["account"])[0]
                if nsc.push_if_needed(push_with, user.acc_claims["sub"], token, run.check_mode,
                                      p["expected_servers"], user.result):
                    user.result["changed"] = True
    except (NatsEdgeError, OSError) as exc:
        result = user.result if user else {}
        result["changed"] = written or bool(result.get("pushed"))
        again = "; the store holds the revocation and the next run pushes it again" if (
            written and isinstance(exc, (nsc.PushFailed, NatsClientError))) else ""
        raise nsc.ConvergeFailed("%s: %s%s" % (named(p), exc, again), **result) from exc
    if user.result["account_jwt_changed"] and not p["push"]:
        run.warn("user %r of account %r: the account JWT changed (%s); servers enforce it only once it is pushed "
                 "(push: true, or nsc_account with push)" % (p["name"], p["account"], "revoked " + ", ".join(
                     user.result["revoked_keys"])))
    return user.result
