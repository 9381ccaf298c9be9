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
    JetStream limits (for the account or per replication tier), connection limits, default permissions, an account
    signing key, scoped signing keys (role templates) and subject mappings.
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
      - An account listed twice is refused before any is converged, naming both items (two items would undo each
        other on every run); so is an item removing the operator's system account.
    type: list
    elements: dict
  state:
    description:
      - V(present) creates or updates the account.
      - V(absent) removes its JWT, users and creds from the store. A full resolver keeps the account
        (nothing is pushed to delete it).
      - An account that other accounts import from is not removed unless O(force=true).
      - The operator's system account is never removed (refused, naming it); replace it first with
        M(nats_edge.fleet.nsc_operator)'s O(nats_edge.fleet.nsc_operator#module:replace_system_account).
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
      - JetStream limits of the account; left out, JetStream is disabled for it, and V({}) enables it without limits.
      - Sizes as bytes or strings such as V(1GiB); V(-1) is unlimited, and so is a limit left out. A limit above what a
        server reads (a 64-bit number) is refused, as in O(limits).
      - Either for the whole account or per tier (O(jetstream.tiers)), not both.
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
      max_ack_pending:
        description: Most unacknowledged messages a consumer may allow (its C(max_ack_pending)); claim C(max_ack_pending). Left out, no limit.
        type: int
      disk_max_stream_bytes:
        description: Largest C(max_bytes) a file stream may have (claim C(disk_max_stream_bytes)); a size. Left out, no limit.
        type: raw
      mem_max_stream_bytes:
        description: Largest C(max_bytes) a memory stream may have (claim C(mem_max_stream_bytes)); a size. Left out, no limit.
        type: raw
      max_bytes_required:
        description: Every stream must set C(max_bytes); a stream without it is refused by the server.
        type: bool
      tiers:
        description:
          - Limits per replication tier (the JWT's C(tiered_limits)) instead of for the whole account - a stream with
            three replicas counts against V(R3), one with one against V(R1). A stream of a tier the account has no
            limits for is refused by the server.
          - Each tier takes the limits of O(jetstream) (but O(jetstream.tiers)); a server reports the usage and the
            limits of each tier in C($JS.API.INFO) (C(tiers)).
        type: dict
        suboptions:
          R1:
            description: Limits of the streams with 1 replica.
            type: dict
            suboptions: &tier_limits
              disk_storage:
                description: File storage the account may use in the tier.
                type: raw
              mem_storage:
                description: Memory storage the account may use in the tier.
                type: raw
              streams:
                description: Most streams.
                type: int
              consumers:
                description: Most consumers.
                type: int
              max_ack_pending:
                description: Most unacknowledged messages a consumer may allow (its C(max_ack_pending)); claim C(max_ack_pending). Left out, no limit.
                type: int
              disk_max_stream_bytes:
                description: Largest C(max_bytes) a file stream may have (claim C(disk_max_stream_bytes)); a size. Left out, no limit.
                type: raw
              mem_max_stream_bytes:
                description: Largest C(max_bytes) a memory stream may have (claim C(mem_max_stream_bytes)); a size. Left out, no limit.
                type: raw
              max_bytes_required:
                description: Every stream must set C(max_bytes); a stream without it is refused by the server.
                type: bool
          R3:
            description: Limits of the streams with 3 replicas.
            type: dict
            suboptions: *tier_limits
          R5:
            description: Limits of the streams with 5 replicas.
            type: dict
            suboptions: *tier_limits
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
  scoped_signing_keys:
    description:
      - Scoped signing keys (role templates) of the account, one per role. A user that
        M(nats_edge.fleet.nsc_user) issues with one (its O(nats_edge.fleet.nsc_user#module:signing_role)) has no
        permissions or limits of its own; the server gives it the role's O(scoped_signing_keys[].template).
      - A role keeps its key while the key store holds its seed; changing a template changes what every user of the
        role may do once the account is pushed, without issuing them again.
      - A role taken off the list loses its key, and servers refuse the users it issued once the account is pushed
        (the next M(nats_edge.fleet.nsc_user) run of such a user issues it again).
      - Left out or V([]), the account has none. Independent of O(signing_key).
    type: list
    elements: dict
    suboptions:
      role:
        description: Name of the role.
        type: str
        required: true
      description:
        description: What the role is for.
        type: str
      template:
        description:
          - The permissions and limits of the users the key issues.
          - O(scoped_signing_keys[].template.pub), O(scoped_signing_keys[].template.sub) and
            O(scoped_signing_keys[].template.resp) as in M(nats_edge.fleet.nsc_user)'s permissions.
        type: dict
        suboptions:
          pub:
            description: Subjects the users may publish to.
            type: dict
            suboptions:
              allow:
                description: Subjects allowed.
                type: list
                elements: str
              deny:
                description: Subjects denied.
                type: list
                elements: str
          sub:
            description: Subjects the users may subscribe to.
            type: dict
            suboptions:
              allow:
                description: Subjects allowed.
                type: list
                elements: str
              deny:
                description: Subjects denied.
                type: list
                elements: str
          resp:
            description: Let the users reply to requests they received, without publish permission on the reply subjects.
            type: dict
            suboptions:
              max:
                description: Replies allowed per request; V(-1) for no limit.
                type: int
                default: 1
              ttl:
                description: How long a reply may follow its request (V(0) for no limit).
                type: raw
                default: 0
          bearer_token:
            description: The users connect with their JWT alone, without proving they hold the seed.
            type: bool
            default: false
          subs:
            description: Most subscriptions of a user; left out or V(-1), no limit.
            type: int
          data:
            description: Most data of a user (a size); left out or V(-1), no limit.
            type: raw
          payload:
            description: Largest message payload of a user (a size); left out or V(-1), no limit.
            type: raw
          allowed_connection_types:
            description: As M(nats_edge.fleet.nsc_user)'s O(nats_edge.fleet.nsc_user#module:allowed_connection_types).
            type: list
            elements: str
          src:
            description: As M(nats_edge.fleet.nsc_user)'s O(nats_edge.fleet.nsc_user#module:src).
            type: list
            elements: str
  mappings:
    description:
      - Subject mappings of the account (the JWT's C(mappings)) - a message published in the account to
        O(mappings[].subject) goes to one of O(mappings[].to), picked by weight.
      - Left out, the mappings the JWT has are kept as they are; given (V([]) too), they are the account's.
      - Each subject is mapped once; the weights of its destinations (per cluster) add up to 100 at most.
    type: list
    elements: dict
    suboptions:
      subject:
        description: The subject published to (wildcards allowed).
        type: str
        required: true
      to:
        description: Where the messages go.
        type: list
        elements: dict
        required: true
        suboptions:
          subject:
            description:
              - The subject they go to; it may use the source's wildcards as mapping functions, such as
                V(orders.{{wildcard(1\)}}) or V({{partition(3,1\)}}).
              - In a playbook, mark a subject with a mapping function C(!unsafe), so that Ansible does not read it as
                a template.
            type: str
            required: true
          weight:
            description: Percentage of the messages (1 to 100); left out, 100.
            type: int
          cluster:
            description: Only in this cluster; weights add up per cluster.
            type: str
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

- name: Tiered JetStream limits, a role for sensors and a subject mapping
  nats_edge.fleet.nsc_account:
    operator: fleet
    name: SENSORS
    jetstream:
      tiers:
        R1: {disk_storage: 2GiB, disk_max_stream_bytes: 512MiB, max_bytes_required: true}
        R3: {disk_storage: 10GiB, max_ack_pending: 10000}
    scoped_signing_keys:
      - role: sensor
        description: Publishes readings only, from the plant network
        template:
          pub: {allow: ["readings.>"]}
          sub: {allow: ["_INBOX.>"]}
          src: ["10.20.0.0/16"]
    mappings:
      - subject: "readings.legacy.*"
        # readings.v2.{{wildcard(1)}}, escaped so that Ansible does not read it as a template
        to: [{subject: "readings.v2.{{ '{{' }}wildcard(1){{ '}}' }}"}]
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
  description: Public signing keys of the account (not the scoped ones).
  returned: state is present
  type: list
  elements: str
scoped_signing_keys:
  description: The scoped signing keys of the account, as C(role) and C(key) (its public key).
  returned: state is present
  type: list
  elements: dict
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

from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import account, bulk
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import common as nsc
from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError, fail_from
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import nats_module
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.account import ARGUMENT_SPEC, converge, label


def main():
    spec = bulk.bulk_spec(ARGUMENT_SPEC, "accounts", required=("name",))
    # what ansible-core would coerce or trip over (jetstream: true) is refused, named
    module, given = nsc.build_module(lambda spec: nats_module(
        spec, jetstream=False, supports_check_mode=True, required_one_of=[["name", "accounts"]],
        mutually_exclusive=[["name", "accounts"]]), spec)
    if given:
        fail_from(module, given)
    p = module.params
    try:
        result = bulk.task(module, converge, "accounts", ARGUMENT_SPEC, label, kind=account,
                           push=p["push"] and (p["state"] == "present" or p["accounts"] is not None))
    except NatsEdgeError as exc:
        fail_from(module, exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
