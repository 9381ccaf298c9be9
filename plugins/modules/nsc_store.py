#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nsc_store
short_description: An operator, its accounts, users, exports and imports in an nsc store, in one run
description:
  - Converges, in one module run, what M(nats_edge.fleet.nsc_operator), M(nats_edge.fleet.nsc_account),
    M(nats_edge.fleet.nsc_user) and M(nats_edge.fleet.nsc_export) converge one kind at a time, with the
    same rules, checks and results - the operator and its system account and user first, then each item
    of O(accounts), of O(users), then of O(exports), in the order given.
  - Every item of every list is checked against its kind's options before the operator is touched.
  - Nothing is pushed; push the accounts with M(nats_edge.fleet.nsc_account) (O(nats_edge.fleet.nsc_account#module:push=true)).
  - It returns the store's operator and accounts as M(nats_edge.fleet.nsc_info) lists them, read after the run,
    so a play that converges the store needs no second run to read it.
  - The site.yml accounts stage runs it once, where the four modules cost a module run each.
author:
  - nats_edge.fleet contributors (@nats_edge)
extends_documentation_fragment:
  - nats_edge.fleet.nsc
attributes:
  check_mode:
    support: full
    description:
      - Reports what would change; writes no file. Each kind is predicted from the store as it is on disk.
      - With no operator in the store yet, every item to be present is reported as made with it
        (C(created_with_the_operator)), as nothing else can be planned against an operator that does not exist.
  diff_mode:
    support: full
    description: Returns, for the operator and each item that changes, its claims before and after.
  idempotent:
    support: full
    description: A second run with the same options changes no file.
options:
  operator:
    description: Name of the operator (a directory and file name - no whitespace, V(.), V(*), V(>), V(/)).
    type: str
    required: true
    aliases: [name]
  signing_key:
    description: The operator's signing key, as M(nats_edge.fleet.nsc_operator)'s option of that name.
    type: bool
    default: false
  service_urls:
    description: The operator's C(operator_service_urls), as M(nats_edge.fleet.nsc_operator)'s option of that name.
    type: list
    elements: str
  account_server_url:
    description: The operator's account server URL, as M(nats_edge.fleet.nsc_operator)'s option of that name.
    type: str
  system_account:
    description: Name of the system account.
    type: str
    default: SYS
  system_user:
    description: Name of the user of the system account that gets a creds file.
    type: str
    default: sys
  accounts:
    description:
      - Accounts, each item with the options of an item of M(nats_edge.fleet.nsc_account)'s C(accounts) (C(name),
        C(jetstream), C(limits), C(signing_key), C(state), ...).
    type: list
    elements: dict
    default: []
  users:
    description:
      - Users, each item with the options of an item of M(nats_edge.fleet.nsc_user)'s C(users) (C(account), C(name),
        C(permissions), C(expires_in), C(state), ...). Converged after every account.
    type: list
    elements: dict
    default: []
  exports:
    description:
      - Exports and their imports, each item with the options of an item of M(nats_edge.fleet.nsc_export)'s
        C(exports) (C(account) and C(subject), or C(share_stream), ...). Converged after every user.
    type: list
    elements: dict
    default: []
notes:
  - An item that fails its kind's checks fails the task before anything is written, naming the list, the item
    and the option. A failure after the first change names the item; the results of the operator and of the
    items before it show what was written.
seealso:
  - module: nats_edge.fleet.nsc_operator
  - module: nats_edge.fleet.nsc_account
  - module: nats_edge.fleet.nsc_user
  - module: nats_edge.fleet.nsc_export
  - module: nats_edge.fleet.nsc_info
"""

EXAMPLES = r"""
---
- name: The fleet's operator, two accounts, their users and a shared stream, in one run
  nats_edge.fleet.nsc_store:
    operator: fleet
    signing_key: true
    accounts:
      - {name: SENSORS, jetstream: {disk_storage: 1GiB, streams: 10}}
      - {name: REPORTS}
    users:
      - {account: SENSORS, name: edge}
      - {account: REPORTS, name: reader, expires_in: 30d, renew_before: 7d}
    exports:
      - share_stream: {stream: readings, from_account: SENSORS, to_account: REPORTS, kind: mirror}
  delegate_to: localhost
  register: fleet_store

- name: The system account's public key, for the servers' config
  ansible.builtin.debug:
    msg: "{{ fleet_store.operator.system_account_id }}"
"""

RETURN = r"""
operator:
  description: What M(nats_edge.fleet.nsc_operator) returns for the operator (C(operator_public_key),
    C(system_account_id), C(sys_creds), C(files), ...).
  returned: always
  type: dict
account_results:
  description:
    - One entry per item of O(accounts), as M(nats_edge.fleet.nsc_account) returns them in its C(item_results).
    - In check mode with no operator in the store yet, only C(changed) and C(created_with_the_operator) (also in
      RV(user_results) and RV(export_results)).
  returned: always
  type: list
  elements: dict
user_results:
  description: One entry per item of O(users), as M(nats_edge.fleet.nsc_user) returns them in its C(item_results).
  returned: always
  type: list
  elements: dict
export_results:
  description: One entry per item of O(exports), as M(nats_edge.fleet.nsc_export) returns them in its C(item_results).
  returned: always
  type: list
  elements: dict
store:
  description:
    - The operator and its accounts as M(nats_edge.fleet.nsc_info) lists them (C(operators), C(accounts)), read
      after the run (in check mode, as they are on disk).
  returned: success
  type: dict
diff:
  description: Before and after of the operator and of each item the run changes, in that order.
  returned: in diff mode
  type: list
"""

import os

from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import bulk
from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError, fail_from
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import common as nsc
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import account
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import export
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import graph
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import operator
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import user
from ansible_collections.nats_edge.fleet.plugins.module_utils._module import FleetModule
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import StoreError, directory_lock

# the operator's options; the kinds' lists are checked against their own modules' specs
OPERATOR_OPTIONS = ("signing_key", "service_urls", "account_server_url", "system_account", "system_user")
ARGUMENT_SPEC = dict(
    {name: operator.ARGUMENT_SPEC[name] for name in tuple(nsc.STORE_ARGSPEC) + OPERATOR_OPTIONS},
    accounts=dict(type="list", elements="dict", default=[]),
    users=dict(type="list", elements="dict", default=[]),
    exports=dict(type="list", elements="dict", default=[]),
)

# (option, its results' key, converge, spec, label, constraints), in the order they are converged
KINDS = (
    ("accounts", "account_results", account.converge, account.ARGUMENT_SPEC, account.label, {}),
    ("users", "user_results", user.converge, user.ARGUMENT_SPEC, user.label, user.CONSTRAINTS),
    ("exports", "export_results", export.converge, export.ARGUMENT_SPEC, export.label, export.CONSTRAINTS),
)


def main():
    module = FleetModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    p = module.params
    if jwt.nkeys is None:
        from ansible.module_utils.basic import missing_required_lib
        module.fail_json(msg=missing_required_lib(jwt.NKEYS), exception=jwt._IMPORT_ERROR)
    nsc.warn_loose_keys_dir(module, p["keys_dir"])
    store_params = {name: p[name] for name in nsc.STORE_ARGSPEC}
    # every item of every kind checked before the store changes, then the operator first
    task_params = dict(store_params, push=False, expected_servers=None)
    # the operator's errors name it already
    stages = [("operator", [("", dict(
        store_params, state="present", **{name: p[name] for name in OPERATOR_OPTIONS}))], operator.converge)]
    try:
        stages += [(results_key, bulk.checked_items(module, key, spec, label, task_params, **constraints), converge)
                   for key, results_key, converge, spec, label, constraints in KINDS]
    except NatsEdgeError as exc:
        fail_from(module, exc)
    result = {results_key: [] for results_key, _items, _converge in stages}
    for results_key, items, converge in stages:
        if module.check_mode and result["operator"] and not os.path.exists(result["operator"][0]["operator_jwt_path"]):
            # check mode, the operator not made yet: nothing to plan against, every item would be made with it
            result[results_key] = [dict(changed=params["state"] == "present", created_with_the_operator=True)
                                   for _where, params in items]
            continue
        try:
            result[results_key] = bulk.converge_items(module, items, converge)
        except bulk.ItemFailed as exc:
            result[results_key] = exc.results
            fail_from(module, exc, **_summary(module, result))
    try:
        result["store"] = read_back(p)
    except NatsEdgeError as exc:
        if not module.check_mode:
            fail_from(module, exc, **_summary(module, result))
        # in check mode a store not made yet has nothing to list
        result["store"] = dict(operators=[], accounts=[])
    module.exit_json(**_summary(module, result))


def read_back(p):
    """The operator and its accounts as nsc_info lists them, or StoreError."""
    try:
        with directory_lock(p["store_dir"], p["lock_timeout"], shared=True, create=False):
            inventory = graph.read_inventory(p["store_dir"], p["keys_dir"], [p["operator"]])
        operators, accounts, _users = graph.listing(inventory, None)
    except (NatsEdgeError, OSError) as exc:
        raise StoreError("operator %r: the store was converged but cannot be read back: %s" % (p["operator"], exc)) from exc
    return dict(operators=operators, accounts=accounts)


def _summary(module, result):
    """changed if any part changed; the operator's result as a dict; the parts' diffs as one list."""
    parts = [part for key in ["operator"] + [kind[1] for kind in KINDS] for part in result[key]]
    out = dict(result, changed=any(part.get("changed") for part in parts),
               operator=result["operator"][0] if result["operator"] else {})
    if module._diff:
        out["diff"] = [part.pop("diff") for part in parts if "diff" in part]
    return out


if __name__ == "__main__":
    main()
