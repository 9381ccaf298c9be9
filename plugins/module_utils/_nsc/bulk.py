# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bulk forms of the nsc modules. Private to the collection.

``nsc_account accounts=[...]``, ``nsc_user users=[...]`` and
``nsc_export exports=[...]`` converge a list of items in one module run, one
item after another, each exactly as the single form would (its own store
lock, checks, writes and push). A task with a loop pays Ansible's cost of a
module run per item; a fleet of a few dozen accounts, users and exports
spends most of its idempotent converge there.

Each item takes every option of the single form but the task-level ones
(the store, the connection, push), which apply to all items. The items are
checked against the single form's spec and as their converge checks them
before reading the store (``check_item`` of the kind), an item listed twice is
refused naming both, and the accounts the items name are looked up in the
store (``check_references``) - all of it before the first item is converged.
The first failing item stops the run; RV(item_results) then holds what the
items before it did.
"""

from __future__ import annotations


from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._items import ItemChecker, ItemError, where
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import require_nats_py
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.common import (
    check_given, require_nkeys, system_account_name, warn_loose_keys_dir)
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import Store, directory_lock

# the single form's spec and its constraints, less these task-level options
TASK_LEVEL = ("store_dir", "keys_dir", "operator", "lock_timeout", "push", "expected_servers")


class Run(object):
    """What converging one resource needs of the module run: its options (``params``), ``check_mode``, ``diff``
    (diff mode) and ``warn(text)``. The single form makes it of the module (``Run.of(module)``), the bulk
    form of each item; without ``warn`` the warnings are kept in ``warnings``."""

    def __init__(self, params, check_mode=False, diff=False, warn=None):
        self.params = params
        self.check_mode = check_mode
        self.diff = diff
        self.warnings = []
        self.warn = warn if warn is not None else self.warnings.append

    @classmethod
    def of(cls, module, params=None):
        """The run of ``module``, with its options or ``params``."""
        return cls(module.params if params is None else params, module.check_mode, module._diff, module.warn)


class ItemFailed(NatsEdgeError):
    """The first item that failed to converge: its error's message prefixed with the item's place; ``results``
    holds every item's result so far, the failed one's last."""

    def __init__(self, msg, results, **result):
        super(ItemFailed, self).__init__(msg, **result)
        self.results = results


def bulk_spec(item_spec, key, required=()):
    """The module's spec: the single form's, with the list option ``key`` added and
    the options in ``required`` (required for one item) made optional at task level."""
    spec = dict(item_spec)
    for name in required:
        spec[name] = dict(spec[name], required=False)
    spec[key] = dict(type="list", elements="dict")
    return spec


def checked_items(module, key, item_spec, label, task_params=None, kind=None, **constraints):
    """Every item of ``module.params[key]`` checked against ``item_spec`` (less the task-level options), as
    ``(where, params)``: the item's options with the task-level ones of ``task_params`` (by default the
    module's own). With ``kind`` (the module_utils module of the kind: account, user or export), each item is also
    checked as converging it would check it before reading the store (``kind.check_item``, named as converge names
    it, ``kind.named``), and an item that is the same as an earlier one (``kind.identity``) is refused naming
    both. The first bad item raises ItemError naming it (with ``item_results=[]``), before anything is converged."""
    spec = {name: value for name, value in item_spec.items() if name not in TASK_LEVEL}
    checker = ItemChecker(spec, takes="an item", **constraints)
    if task_params is None:
        # the task-level options (store, connection, push) as the task gives them
        task_params = {name: value for name, value in module.params.items() if name not in spec and name != key}
    items = []
    try:
        for index, item in enumerate(module.params[key] or []):
            # items are dicts: ansible-core's elements=dict check has refused anything else
            place = where(key, index, label(item))
            try:
                check_given(spec, item)
            except NatsEdgeError as exc:
                raise ItemError("%s: %s" % (place, exc)) from exc
            params = dict(task_params)
            params.update(checker.check(place, item))
            if kind is not None:
                check_kind(kind, place, params)
            items.append((place, params))
        if kind is not None:
            refuse_duplicates(key, [params for _place, params in items], kind.identity, label)
    except ItemError as exc:
        exc.result.update(changed=False, item_results=[])
        raise
    finally:
        # an item's secrets stay out of the output, also out of the message naming a bad item
        module.no_log_values.update(checker.no_log_values)
    return items


def check_kind(kind, place, params):
    """``kind.check_item(params)``, its error named as the kind's converge names it and prefixed with ``place``."""
    try:
        kind.check_item(params)
    except NatsEdgeError as exc:
        named = kind.named(params)
        raise ItemError("%s: %s%s" % (place, "%s: " % named if named else "", exc)) from exc


def refuse_duplicates(key, items, identity, label=None):
    """Refuse, as ItemError naming both, an item of the list ``key`` that is the same as an earlier one by
    ``identity(item)`` (a list of keys, any one shared is the same): ``accounts[3] (APP): listed twice, first at
    accounts[0]``. Listed twice, two items would undo each other on every run, so the list never converges."""
    seen = {}
    for index, item in enumerate(items):
        for same in identity(item):
            if same in seen:
                raise ItemError("%s: listed twice, first at %s" % (
                    where(key, index, label(item) if label else None), where(key, seen[same])))
        for same in identity(item):
            seen.setdefault(same, index)


def store_accounts(params):
    """(the store's account names, the name of its operator's system account or None) - nothing while the operator
    is not in the store - read under the store's shared lock."""
    store = Store(params["store_dir"], params["keys_dir"], params["operator"])
    with directory_lock(store.store_dir, params["lock_timeout"], shared=True, create=False):
        if not store.has_operator():
            return set(), None
        _token, op_claims = store.read_operator()
        return set(store.accounts()), system_account_name(store, op_claims)


def check_references(in_store, system_accounts, accounts=(), users=(), exports=()):
    """Refuse, as ItemError naming the item, what would fail only once earlier items are written: an account item
    removing a system account (``system_accounts``: its names); a user or export naming an account that is neither in
    the store (``in_store``: its account names) nor made by an item of ``accounts`` (nor a system account), or that
    an item of ``accounts`` removes. Lists of ``(where, params)``, as checked_items returns them."""
    removed, made = {}, set(name for name in system_accounts if name)
    for place, params in accounts:
        if params.get("state") == "absent":
            if params["name"] in system_accounts:
                raise ItemError("%s: account %r of operator %r: it is the operator's system account; it is not removed "
                                "(every server of the operator is configured with its key)" % (
                                    place, params["name"], params.get("operator")))
            removed.setdefault(params["name"], place)
        else:
            made.add(params["name"])
    known = (set(in_store) | made) - set(removed)

    def refer(place, what, role, name):
        if name in removed:
            raise ItemError("%s: %s: %saccount %r is removed by %s" % (place, what, role, name, removed[name]))
        if name not in known:
            raise ItemError("%s: %s: %saccount %r is not in the store, nor made by an item of accounts" % (
                place, what, role, name))

    for place, params in users:
        refer(place, "user %r of account %r" % (params["name"], params["account"]), "", params["account"])
    for place, params in exports:
        share = params.get("share_stream")
        what = "operator %r" % params.get("operator")
        if share:
            for role in ("from_account", "to_account"):
                refer(place, what, "share_stream.%s: " % role, share[role])
            continue
        refer(place, what, "", params["account"])
        for index, importer in enumerate(params.get("importers") or []):
            refer(place, what, "importers[%d]: " % index, importer["account"])


def converge_items(module, items, converge):
    """Converge the checked ``items`` one after another with ``converge(run)``, each with its own Run; their
    results, or ItemFailed naming the failed item (by its ``where``, unless empty)."""
    results = []
    for place, params in items:
        try:
            results.append(converge(Run.of(module, params)))
        except NatsEdgeError as exc:
            results.append(exc.result)
            raise ItemFailed("%s: %s" % (place, exc) if place else str(exc), results) from exc
    return results


def run(module, key, item_spec, converge, label, kind=None, **constraints):
    """Converge ``module.params[key]`` with ``converge(run)``: the module's result (``changed``,
    ``item_results``, ``diff`` in diff mode), or ItemError or ItemFailed carrying it."""
    items = checked_items(module, key, item_spec, label, kind=kind, **constraints)
    if kind is not None and items:
        # what only fails once earlier items are written is refused before the first is converged
        try:
            in_store, system = store_accounts(module.params)
            check_references(in_store, [system], **{key: items})
        except ItemError as exc:
            exc.result.update(changed=False, item_results=[])
            raise
    try:
        results = converge_items(module, items, converge)
    except ItemFailed as exc:
        exc.result.update(summary(exc.results, module._diff))
        raise
    return summary(results, module._diff)


def task(module, converge, key=None, item_spec=None, label=None, push=False, kind=None, **constraints):
    """An nsc module's run once its options are parsed: the nkeys library, the keys directory's mode, nats-py
    when the run pushes, then the bulk form (``module.params[key]`` set) or the single one. The module's result,
    or a NatsEdgeError carrying it; the module's main() exits or fails with it."""
    require_nkeys()
    warn_loose_keys_dir(module, module.params["keys_dir"])
    if push:
        require_nats_py(module.params)
    if key and module.params[key] is not None:
        return run(module, key, item_spec, converge, label, kind=kind, **constraints)
    return converge(Run.of(module))


def summary(results, diff):
    """The bulk form's result of the items' ``results``: changed if any changed; their diffs as one list."""
    out = dict(changed=any(result.get("changed") for result in results), item_results=results)
    if diff:
        out["diff"] = changed_diffs(results)
    return out


def changed_diffs(results):
    """The diffs of ``results`` (taken out of them) that show a change: one whose before and after are the same
    claims is left out, so diff mode lists only what changed."""
    diffs = [result.pop("diff") for result in results if "diff" in result]
    return [one for one in diffs if not isinstance(one, dict) or one.get("before") != one.get("after")]
