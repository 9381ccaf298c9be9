#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nsc_info
short_description: List the operators, accounts, users, exports and imports of an nsc store, with the import graph
description:
  - Reads an nsc store made by M(nats_edge.fleet.nsc_operator), M(nats_edge.fleet.nsc_account),
    M(nats_edge.fleet.nsc_user) or nsc and lists its operators, accounts (with JetStream limits, exports
    and imports) and users.
  - Returns the account import/export graph as data (RV(graph)) and in Graphviz dot (RV(dot)), an edge per
    import from the exporting account to the importing one, as C(nsc generate diagram component) draws it in
    PlantUML. Imports whose exporter is not in the store, or that no export of it covers, are marked.
  - Reads JWTs only; seeds and the content of creds files are never read into the result.
author:
  - nats_edge.fleet contributors (@nats_edge)
extends_documentation_fragment:
  - nats_edge.fleet.read_only
  - nats_edge.fleet.nsc
options:
  operator:
    description: Name of the operator; left out, every operator in O(store_dir).
    type: str
    required: false
  accounts:
    description:
      - Only these accounts (by name) in RV(accounts) and RV(users); the graph keeps the imports that touch
        them and the accounts at their other end.
      - A name no listed operator has fails the module.
    type: list
    elements: str
"""

EXAMPLES = r"""
---
- name: See what the store holds
  nats_edge.fleet.nsc_info:
    operator: fleet
  delegate_to: localhost
  register: fleet_store

- name: Draw the account graph
  ansible.builtin.copy:
    content: "{{ fleet_store.dot }}"
    dest: /tmp/fleet-accounts.dot
    mode: "0644"
  delegate_to: localhost

- name: The imports of one account
  nats_edge.fleet.nsc_info:
    operator: fleet
    accounts: [APP]
  delegate_to: localhost
"""

RETURN = r"""
operators:
  description: Each operator (name, public_key, signing_keys, system_account public key, service_urls).
  returned: always
  type: list
  elements: dict
accounts:
  description:
    - Each account (name, operator, public_key, system_account, signing_keys, scoped_signing_keys as role and key,
      jetstream limits or null when JetStream is off for it, mappings, exports, imports).
    - C(jetstream) has disk_storage, mem_storage, streams and consumers, and max_ack_pending,
      disk_max_stream_bytes, mem_max_stream_bytes and max_bytes_required when set; with tiered limits, C(tiers)
      with those of each tier (V(R1), V(R3)) instead.
    - C(exports) has name, subject, type, public, token_req, response_type (services), account_token_position.
    - C(imports) has name, subject, local_subject, from_account (the name when the exporter is in the store,
      else its public key), from_account_key, type, token (whether an activation token is present).
  returned: always
  type: list
  elements: dict
users:
  description:
    - Each user (operator, account, name, public_key, issuer, issuer_account, bearer, expires as epoch seconds
      or null, creds_file path or null when there is none).
  returned: always
  type: list
  elements: dict
graph:
  description:
    - C(nodes) (id C(<operator>/<account>), or the public key of an exporter not in the store; account, operator,
      public_key, in_store) and C(edges) (from, to, from_account, to_account, subject, local_subject, type,
      import_name, dangling, reason).
  returned: always
  type: dict
dot:
  description:
    - The graph in Graphviz dot - a cluster per operator, stream imports solid, service imports dashed, dangling
      imports red. Render with C(dot -Tsvg).
  returned: always
  type: str
"""


from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError, fail_from
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import common as nsc
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import graph
from ansible_collections.nats_edge.fleet.plugins.module_utils._module import FleetModule
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import StoreError, directory_lock

ARGUMENT_SPEC = dict(
    nsc.STORE_ARGSPEC,
    operator=dict(type="str"),
    accounts=dict(type="list", elements="str"),
)


def main():
    # what ansible-core would coerce (operator: true becomes the name 'True') is refused, named
    module, given = nsc.build_module(lambda spec: FleetModule(argument_spec=spec, supports_check_mode=True),
                                     ARGUMENT_SPEC)
    if given:
        fail_from(module, given)
    try:
        nsc.require_nkeys()
        result = listing(module.params)
    except NatsEdgeError as exc:
        fail_from(module, exc)
    module.exit_json(**result)


def listing(p):
    """What the module returns of the store, or StoreError naming the operator (or the store)."""
    where = "operator %r" % p["operator"] if p["operator"] else "store %s" % p["store_dir"]
    try:
        # a shared lock: writers finish first, so what is read holds together
        with directory_lock(p["store_dir"], p["lock_timeout"], shared=True, create=False):
            inventory = graph.read_inventory(p["store_dir"], p["keys_dir"], [p["operator"]] if p["operator"] else None)
        missing = graph.unknown_accounts(inventory, p["accounts"])
        if missing:
            raise StoreError("no account %s" % ", ".join(repr(name) for name in missing))
        operators, accounts, users = graph.listing(inventory, p["accounts"])
        edges = graph.build_graph(inventory, p["accounts"])
    except (NatsEdgeError, OSError) as exc:
        raise StoreError("%s: %s" % (where, exc)) from exc
    return dict(changed=False, operators=operators, accounts=accounts, users=users, graph=edges,
                dot=graph.render_dot(edges))


if __name__ == "__main__":
    main()
