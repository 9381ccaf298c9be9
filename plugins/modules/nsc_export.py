#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nsc_export
short_description: Manage an account export and its imports in an nsc store, or share a JetStream stream
description:
  - Manages one edge of the account graph - an export of O(account) together with the imports of it into
    other accounts (O(importers)). The module owns these exports and imports inside the account JWTs; other
    exports and imports are kept.
  - With O(share_stream) instead, it writes the complete, minimal export/import set that lets one account
    source, mirror or pull from a stream of another, and returns the RV(external) the
    M(nats_edge.fleet.jetstream_stream) module needs.
  - Account JWTs are signed by an operator signing key when the key store has one, else by the operator,
    and only when their exports or imports change (claims compare ignoring issue time, ID and order).
  - Everything is checked before any file is written - unknown accounts, malformed subjects, exports that
    overlap others of the account, imports that overlap others of the importer, import cycles.
  - With O(push=true) each affected account JWT the resolver does not have yet is sent to every server of the
    full resolver on C($SYS.REQ.CLAIMS.UPDATE) and read back. Imports work without a restart.
author:
  - nats_edge.fleet contributors (@nats_edge)
extends_documentation_fragment:
  - nats_edge.fleet.nsc
  - nats_edge.fleet.connection
  - nats_edge.fleet.nsc.push_confirm
attributes:
  check_mode:
    support: full
    description:
      - Writes no file and pushes nothing; with O(push) it asks the resolver for its JWTs to predict C(changed).
  diff_mode:
    support: full
    description: Returns the exports and imports of every affected account before and after.
  idempotent:
    support: full
    description: A second run with the same options signs nothing, changes no file and pushes nothing.
options:
  account:
    description: The exporting account. Required unless O(share_stream) or O(exports) is given.
    type: str
  name:
    description: Name of the export, also the name of its imports unless O(importers[].name) is set.
    type: str
  subject:
    description: The exported subject (wildcards allowed). Required unless O(share_stream) or O(exports) is given.
    type: str
  exports:
    description:
      - Converge many exports (and shares) in one module run, one after another, each as the single form would.
      - Each item takes every option of the single form except the store's (O(operator), O(store_dir),
        O(keys_dir), O(lock_timeout)), the connection's and O(push) and O(expected_servers), which the task gives
        for all items.
      - Every item is checked before the first is converged; an error names the item and the field. The first item
        that fails stops the run, and RV(item_results) shows what the items before it did.
      - An export listed twice (the same account and name, or subject and type, or the same stream shared from one
        account to another) is refused before any is converged, naming both items; so is an item naming an account
        that is not in the store.
    type: list
    elements: dict
  type:
    description: V(stream) for messages the importers receive, V(service) for requests they send.
    type: str
    choices: [stream, service]
    default: stream
  response_type:
    description:
      - How a service answers - V(Singleton) (one reply), V(Stream) or V(Chunked). Any case is accepted, as
        with nsc's flags.
    type: str
  public:
    description:
      - V(false) makes the export private - an activation token signed by the exporting account (or its
        signing key) is written into each import.
    type: bool
    default: true
  account_token_position:
    description:
      - Position (from 1) of a V(*) token of O(subject) that must be the importing account's public key.
        Imports without O(importers[].subject) get the key put there.
    type: int
  description:
    description: Description of the export.
    type: str
  importers:
    description:
      - Accounts that import the export. With O(share_stream) unset the list is complete - imports of this
        export by other accounts are removed.
    type: list
    elements: dict
    default: []
    suboptions:
      account:
        description: The importing account.
        type: str
        required: true
      subject:
        description: The subject imported, a part of O(subject); defaults to O(subject).
        type: str
      local_subject:
        description:
          - For a stream, the subject the messages get in the importing account.
          - For a service, the subject the importing account publishes its requests to.
        type: str
      name:
        description: Name of the import; defaults to O(name).
        type: str
  share_stream:
    description:
      - Share a stream of O(share_stream.from_account) with O(share_stream.to_account) instead of O(account),
        O(subject) and O(importers).
      - For O(share_stream.kind=source) and V(mirror) the owner exports, and the other account imports
        under O(share_stream.api_prefix) - the consumer-create API (C(CONSUMER.CREATE.<stream>), used
        without a filter subject, and C(CONSUMER.CREATE.<stream>.>), used with one), the flow control subjects
        C($JS.FC.<stream>.*.*) and C($JS.FC.*.<account hash>.<stream>.*.*) (without them a catch-up stalls after
        the first window) and the delivery subject C(<deliver_prefix>.>).
      - For V(consumer) - C(CONSUMER.MSG.NEXT.<stream>.<durable>) and the acks C($JS.ACK.<stream>.<durable>.>) and
        C($JS.ACK.*.<account hash>.<stream>.<durable>.>) of a durable pull consumer the owner creates.
      - The subjects with the owner's account hash (8 characters the server derives from the account's public key)
        are the v2 ack and flow control subjects of nats-server 2.14 and later, which carry the JetStream domain and
        the account hash (feature flag C(js_ack_fc_v2)); a server before 2.14 takes them in the account JWT and
        uses the v1 ones.
      - One account cannot read two streams of the same name from different accounts - their flow control
        subjects would overlap; the module refuses such a share.
      - Several shares of one stream (to several accounts) add importers to the same exports; V(absent)
        removes the imports of O(share_stream.to_account) and exports nobody imports any more.
    type: dict
    suboptions:
      stream:
        description: Name of the stream.
        type: str
        required: true
      from_account:
        description: Account that owns the stream.
        type: str
        required: true
      from_domain:
        description: JetStream domain of the stream; the API exported is C($JS.<domain>.API), else C($JS.API).
        type: str
      to_account:
        description: Account that reads the stream.
        type: str
        required: true
      to_domain:
        description: JetStream domain of the reading account (part of the delivery prefix only).
        type: str
      kind:
        description: What the reading account does.
        type: str
        choices: [source, mirror, consumer]
        default: source
      durable:
        description: The durable pull consumer shared; required for O(share_stream.kind=consumer).
        type: str
      api_prefix:
        description: API prefix in the reading account; defaults to C(JS.<from_account>@<from_domain>.API).
        type: str
      deliver_prefix:
        description:
          - Delivery prefix; defaults to C(deliver.<from_account>.<from_domain>.<to_account>.<to_domain>.<stream>)
            (a missing domain is written V(default)), unique for each pair of accounts and stream.
        type: str
  state:
    description: V(present) writes the export and its imports, V(absent) removes them.
    type: str
    choices: [present, absent]
    default: present
  push:
    description: Send the changed account JWTs to the resolver (see the description); needs the connection options.
    type: bool
    default: false
notes:
  - For O(push), O(creds) defaults to the system user's creds file in the store. Creds of a user of another
    account are refused before anything is written or sent.
  - The store is written before the push. When a push fails the module fails with C(changed=true) and the
    servers that did not confirm in RV(unconfirmed); the store keeps the new JWTs and the next run pushes them
    again, because the resolver's JWTs still differ.
  - A full resolver keeps an import until it gets the account JWT without it - push removals too.
"""

EXAMPLES = r"""
---
- name: Many exports in one run
  nats_edge.fleet.nsc_export:
    operator: fleet
    exports:
      - {account: APP, name: metrics, subject: metrics.>, importers: [{account: BILLING}]}
      - {account: APP, name: status, subject: status.>, type: service, public: true}
  delegate_to: localhost

- name: Orders events from APP, readable by BILLING as billing.orders.>
  nats_edge.fleet.nsc_export:
    operator: fleet
    account: APP
    name: orders
    subject: orders.>
    importers:
      - account: BILLING
        local_subject: billing.orders.>
    push: true
    servers: ["nats://hub-1:4222"]
  delegate_to: localhost

- name: A private service, with activation tokens
  nats_edge.fleet.nsc_export:
    operator: fleet
    account: APP
    name: quotes
    subject: quote.request
    type: service
    public: false
    importers:
      - account: BILLING
  delegate_to: localhost

- name: OPS may mirror the stream aggregate of APP in the hub
  nats_edge.fleet.nsc_export:
    operator: fleet
    share_stream:
      stream: aggregate
      from_account: APP
      from_domain: hub
      to_account: OPS
      to_domain: hub
      kind: mirror
    push: true
    servers: ["nats://hub-1:4222"]
  delegate_to: localhost
  register: shared

- name: The mirror in OPS, through the imports
  nats_edge.fleet.jetstream_stream:
    servers: nats://hub-1:4222
    creds: /etc/nats/ops.creds
    name: crossacc
    mirror:
      name: aggregate
      external: "{{ shared.external }}"
"""

RETURN = r"""
item_results:
  description: With O(exports), the result of each item, in the order given, with the keys the single form returns.
  returned: when O(exports) is used
  type: list
  elements: dict
exports_changed:
  description: Whether the exports or imports of any account change.
  returned: always
  type: bool
accounts:
  description: The accounts whose JWT changes (or would), as C(name) and C(account_id).
  returned: always
  type: list
  elements: dict
exports:
  description: The exports the run manages, as C(account) and the export claim.
  returned: always
  type: list
  elements: dict
imports:
  description: The imports the run manages, as C(account) and the import claim (activation tokens blanked).
  returned: always
  type: list
  elements: dict
external:
  description:
    - With O(share_stream) - C(api) (the API prefix in the reading account) and C(deliver) (the delivery prefix)
      for O(share_stream.kind=source) and V(mirror), C(api) and C(next) (the subject to pull from) for V(consumer).
  returned: when share_stream is given
  type: dict
pushed:
  description: Every server's answer to each push, as C(account) and C(answers).
  returned: when push is true
  type: list
  elements: dict
unconfirmed:
  description: Servers that did not confirm a push, as C(<account> on <server>).
  returned: when push is true
  type: list
  elements: str
"""

from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import bulk, export
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import common as nsc
from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError, fail_from
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import nats_module
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.export import ARGUMENT_SPEC, CONSTRAINTS, converge, label


def main():
    spec = bulk.bulk_spec(ARGUMENT_SPEC, "exports")
    # what ansible-core would coerce or trip over is refused, named
    module, given = nsc.build_module(lambda spec: nats_module(
        spec, jetstream=False, supports_check_mode=True, required_one_of=[["subject", "share_stream", "exports"]],
        mutually_exclusive=CONSTRAINTS["mutually_exclusive"] + [
            ["exports", name] for name in ("subject", "share_stream", "account", "name")],
        required_by=CONSTRAINTS["required_by"]), spec)
    if given:
        fail_from(module, given)
    p = module.params
    try:
        result = bulk.task(module, converge, "exports", ARGUMENT_SPEC, label, push=p["push"], kind=export,
                           **CONSTRAINTS)
    except NatsEdgeError as exc:
        fail_from(module, exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
