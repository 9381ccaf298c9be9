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
  - Every item of every list is checked before the operator is touched, and the run is applied whole or not at all
    (see the notes).
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
  replace_system_account:
    description:
      - Let O(system_account) replace the operator's system account, as M(nats_edge.fleet.nsc_operator)'s option of
        that name; V(false) refuses a run whose O(system_account) is not the operator's system account.
      - When it is replaced, a warning and C(system_account_replaced) in RV(operator) say which account replaced which;
        every server of the operator must be reconfigured with the new one and restarted.
    type: bool
    default: false
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
  - Every item of every list is checked before the first file is written - its options, names, subjects, limits and
    expiries, an item listed twice (the same account, user, export or share; the message names both), the accounts
    each user and export names (in the store or made by an item of O(accounts), not removed by one), an item
    removing the system account. A bad item fails the task naming the list, the item and the option, and the store
    stays as it was.
  - What only the store can tell (an export overlapping another of the account, an import cycle) fails when its
    item is converged, naming it. The run is then undone - the operator's files and creds put back byte for byte
    as they were, the seeds it made removed - and fails with C(changed=false) and RV(undone); the results of the
    operator and of the items before it show what the run had done. The store is locked for the whole run.
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
    C(system_account_id), C(sys_creds), C(files), ..., and C(system_account_replaced) when
    O(replace_system_account=true) replaced the system account).
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
undone:
  description: True when an item failed after others had written, and the run put the store back as it was.
  returned: when an item failed to converge
  type: bool
diff:
  description:
    - Before and after of the operator and of each item the run changes, in that order. An operator or item whose
      claims stay the same has none.
  returned: in diff mode
  type: list
"""

import os

from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import bulk
from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError, fail_from
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import common as nsc
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import account
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import export
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import graph
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import operator
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import user
from ansible_collections.nats_edge.fleet.plugins.module_utils._module import FleetModule
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import (
    Snapshot, Store, StoreError, directory_lock)

# the operator's options; the kinds' lists are checked against their own modules' specs
OPERATOR_OPTIONS = ("signing_key", "service_urls", "account_server_url", "system_account", "system_user",
                    "replace_system_account")
ARGUMENT_SPEC = dict(
    {name: operator.ARGUMENT_SPEC[name] for name in tuple(nsc.STORE_ARGSPEC) + OPERATOR_OPTIONS},
    accounts=dict(type="list", elements="dict", default=[]),
    users=dict(type="list", elements="dict", default=[]),
    exports=dict(type="list", elements="dict", default=[]),
)

# (option, its results' key, the kind, constraints), in the order they are converged
KINDS = (
    ("accounts", "account_results", account, {}),
    ("users", "user_results", user, user.CONSTRAINTS),
    ("exports", "export_results", export, export.CONSTRAINTS),
)


def main():
    # what ansible-core would coerce (operator: true becomes the name 'True') is refused, named
    module, given = nsc.build_module(lambda spec: FleetModule(argument_spec=spec, supports_check_mode=True),
                                     ARGUMENT_SPEC)
    if given:
        fail_from(module, given)
    p = module.params
    try:
        nsc.require_nkeys()
        nsc.warn_loose_keys_dir(module, p["keys_dir"])
        stages = checked_stages(module)
    except NatsEdgeError as exc:
        fail_from(module, exc)
    try:
        result, failed = converge_all(module, stages)
    except NatsEdgeError as exc:
        # the store stayed locked by another run: nothing was read or written
        fail_from(module, StoreError("operator %r: %s" % (p["operator"], exc)))
    if failed is not None:
        fail_from(module, failed, **_summary(module, result, undone=not module.check_mode))
    try:
        result["store"] = read_back(p)
    except NatsEdgeError as exc:
        if not module.check_mode:
            fail_from(module, exc, **_summary(module, result))
        # in check mode a store not made yet has nothing to list
        result["store"] = dict(operators=[], accounts=[])
    module.exit_json(**_summary(module, result))


def converge_all(module, stages):
    """Converge ``stages`` in order, under the store's exclusive lock for the whole run: (the results by key, None),
    or (the results so far, the first item's failure). A failure puts the store back as it was before the run (a
    snapshot of the operator's files, the seeds it wrote removed), so a run is applied whole or not at all."""
    p = module.params
    result = {results_key: [] for results_key, _items, _converge in stages}
    store = Store(p["store_dir"], p["keys_dir"], p["operator"])
    made = missing_dirs(store.store_dir)
    failed = None
    with directory_lock(store.store_dir, p["lock_timeout"], create=not module.check_mode):
        try:
            snapshot = None if module.check_mode else Snapshot(store, made)
        except OSError as exc:
            return result, StoreError("operator %r: cannot keep a copy of the store to put back should an item fail, "
                                      "so nothing was written: %s" % (p["operator"], exc))
        try:
            for results_key, items, converge in stages:
                if module.check_mode and result["operator"] and not os.path.exists(
                        result["operator"][0]["operator_jwt_path"]):
                    # check mode, the operator not made yet: nothing to plan against, every item would be made with it
                    result[results_key] = [dict(changed=params["state"] == "present", created_with_the_operator=True)
                                           for _where, params in items]
                    continue
                try:
                    result[results_key] = bulk.converge_items(module, items, converge)
                except bulk.ItemFailed as exc:
                    result[results_key] = exc.results
                    failed = exc
                    break
        except BaseException:
            if snapshot:
                snapshot.restore()
            raise
        if snapshot and failed is not None:
            try:
                snapshot.restore()
            except OSError as exc:
                failed = StoreError("%s; and the store could not be put back as it was: %s" % (failed, exc))
            else:
                failed = StoreError("%s; nothing was written: the store is as it was before the run" % failed)
        elif snapshot:
            snapshot.drop()
    return result, failed


def missing_dirs(path):
    """``path`` and its parents that do not exist, deepest first."""
    missing = []
    while path and not os.path.isdir(path):
        missing.append(path)
        path = os.path.dirname(path)
    return missing


def checked_stages(module):
    """[(results key, [(where, params)], converge)]: the operator, then each kind's items - every one checked as its
    converge would check it before the first file is written (names, subjects, limits, expiries, duplicates, the
    accounts each user and export names, a system account removed), or the NatsEdgeError naming the first bad one."""
    p = module.params
    store_params = {name: p[name] for name in nsc.STORE_ARGSPEC}
    task_params = dict(store_params, push=False, expected_servers=None)
    operator_params = dict(store_params, state="present", **{name: p[name] for name in OPERATOR_OPTIONS})
    try:
        operator.check_options(operator_params)
    except NatsEdgeError as exc:
        # the operator's errors name it, as its converge does
        raise StoreError("operator %r: %s" % (p["operator"], exc)) from exc
    stages = [("operator", [("", operator_params)], operator.converge)]
    checked = {}
    for key, results_key, kind, constraints in KINDS:
        checked[key] = bulk.checked_items(module, key, kind.ARGUMENT_SPEC, kind.label, task_params, kind=kind,
                                          **constraints)
        stages.append((results_key, checked[key], kind.converge))
    try:
        in_store, system = bulk.store_accounts(store_params)
    except (NatsEdgeError, OSError) as exc:
        raise StoreError("operator %r: %s" % (p["operator"], exc)) from exc
    try:
        bulk.check_references(in_store, [p["system_account"], system], **checked)
    except NatsEdgeError as exc:
        exc.result.update(changed=False)
        raise
    return stages


def read_back(p):
    """The operator and its accounts as nsc_info lists them, or StoreError."""
    try:
        with directory_lock(p["store_dir"], p["lock_timeout"], shared=True, create=False):
            inventory = graph.read_inventory(p["store_dir"], p["keys_dir"], [p["operator"]])
        operators, accounts, _users = graph.listing(inventory, None)
    except (NatsEdgeError, OSError) as exc:
        raise StoreError("operator %r: the store was converged but cannot be read back: %s" % (p["operator"], exc)) from exc
    return dict(operators=operators, accounts=accounts)


def _summary(module, result, undone=False):
    """changed if any part changed (none when the run was ``undone``: the store put back as it was); the operator's
    result as a dict; the parts' diffs as one list."""
    parts = [part for key in ["operator"] + [kind[1] for kind in KINDS] for part in result[key]]
    out = dict(result, changed=not undone and any(part.get("changed") for part in parts),
               operator=result["operator"][0] if result["operator"] else {})
    if undone:
        out["undone"] = True
    if module._diff:
        # only what changed: an operator (or item) whose claims stay the same shows no diff
        out["diff"] = bulk.changed_diffs(parts)
    return out


if __name__ == "__main__":
    main()
