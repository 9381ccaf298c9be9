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
      - A user listed twice (the same account and name) is refused before any is converged, naming both items; so is
        an item of an account that is not in the store.
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
  allowed_connection_types:
    description:
      - The kinds of connection the user may make (the JWT's C(allowed_connection_types)); left out or V([]), any.
      - V(STANDARD) (a client), V(WEBSOCKET), V(LEAFNODE), V(LEAFNODE_WS), V(MQTT), V(MQTT_WS), V(IN_PROCESS).
        A user limited to V(LEAFNODE) is the one a leaf node's remote uses; a server refuses it as a client.
      - V(IN_PROCESS) needs nats-server 2.11 or later; an older server ignores it beside other types and refuses a
        user that allows only it.
    type: list
    elements: str
  src:
    description:
      - The networks the user may connect from, in CIDR notation (V(10.20.0.0/16), V(2001:db8::/32); a single
        address as V(192.0.2.7/32)); left out or V([]), any. The JWT's C(src).
    type: list
    elements: str
  signing_role:
    description:
      - Issue the user with the account's scoped signing key of this role (M(nats_edge.fleet.nsc_account)'s
        O(nats_edge.fleet.nsc_account#module:scoped_signing_keys)). The user gets the role's template as its
        permissions and limits, and changes to the template apply to it without issuing it again.
      - Cannot be combined with O(permissions), O(bearer_token), O(allowed_connection_types) or O(src) (the
        template sets them). A user moved onto or off a role is issued again.
    type: str
  expires:
    description:
      - When the user stops being valid, as epoch seconds or an RFC 3339 time. Left out (or V(0)), never.
      - A time already past is accepted with a warning (the user cannot connect). A boolean, a time before 1970 and
        one past what a server reads (a 64-bit number of seconds) are refused.
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

- name: The user a leaf node's remote connects with, only as a leaf node and from the sites' network
  nats_edge.fleet.nsc_user:
    operator: fleet
    account: APP
    name: site-leaf
    allowed_connection_types: [LEAFNODE]
    src: ["10.30.0.0/16"]
  delegate_to: localhost

- name: A user issued with the scoped signing key of role sensor (its permissions are the role's)
  nats_edge.fleet.nsc_user:
    operator: fleet
    account: SENSORS
    name: sensor-17
    signing_role: sensor
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
signing_role:
  description: The role of the scoped signing key that issued the user, or null when another key issued it.
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


from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import bulk, user
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import common as nsc
from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError, fail_from
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import nats_module
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.user import ARGUMENT_SPEC, CONSTRAINTS, converge, label


def main():
    spec = bulk.bulk_spec(ARGUMENT_SPEC, "users", required=("account", "name"))
    # what ansible-core would coerce or trip over is refused, named
    module, given = nsc.build_module(lambda spec: nats_module(
        spec, jetstream=False, supports_check_mode=True,
        mutually_exclusive=[["expires", "expires_in"], ["users", "name"], ["users", "account"]],
        required_one_of=[["name", "users"]], required_together=[["account", "name"]]), spec)
    if given:
        fail_from(module, given)
    p = module.params
    try:
        result = bulk.task(module, converge, "users", ARGUMENT_SPEC, label, push=p["push"], kind=user, **CONSTRAINTS)
    except NatsEdgeError as exc:
        fail_from(module, exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
