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
checked against the single form's spec, all of them before the first is
converged. The first failing item stops the run; RV(item_results) then holds what
the items before it did.
"""

from __future__ import annotations

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._items import ItemChecker, ItemError, where
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import require_nats_py
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.common import warn_loose_keys_dir

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


def checked_items(module, key, item_spec, label, task_params=None, **constraints):
    """Every item of ``module.params[key]`` checked against ``item_spec`` (less the task-level options), as
    ``(where, params)``: the item's options with the task-level ones of ``task_params`` (by default the
    module's own). The first bad item raises ItemError naming it (with ``item_results=[]``), before anything
    is converged."""
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
            params = dict(task_params)
            params.update(checker.check(place, item))
            items.append((place, params))
    except ItemError as exc:
        exc.result.update(changed=False, item_results=[])
        raise
    finally:
        # an item's secrets stay out of the output, also out of the message naming a bad item
        module.no_log_values.update(checker.no_log_values)
    return items


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


def run(module, key, item_spec, converge, label, **constraints):
    """Converge ``module.params[key]`` with ``converge(run)``: the module's result (``changed``,
    ``item_results``, ``diff`` in diff mode), or ItemError or ItemFailed carrying it."""
    items = checked_items(module, key, item_spec, label, **constraints)
    try:
        results = converge_items(module, items, converge)
    except ItemFailed as exc:
        exc.result.update(summary(exc.results, module._diff))
        raise
    return summary(results, module._diff)


def task(module, converge, key=None, item_spec=None, label=None, push=False, **constraints):
    """An nsc module's run once its options are parsed: the nkeys library, the keys directory's mode, nats-py
    when the run pushes, then the bulk form (``module.params[key]`` set) or the single one. The module's result,
    or a NatsEdgeError carrying it; the module's main() exits or fails with it."""
    if jwt.nkeys is None:
        raise NatsEdgeError(missing_required_lib(jwt.NKEYS), exception=jwt._IMPORT_ERROR)
    warn_loose_keys_dir(module, module.params["keys_dir"])
    if push:
        require_nats_py(module.params)
    if key and module.params[key] is not None:
        return run(module, key, item_spec, converge, label, **constraints)
    return converge(Run.of(module))


def summary(results, diff):
    """The bulk form's result of the items' ``results``: changed if any changed; their diffs as one list."""
    out = dict(changed=any(result.get("changed") for result in results), item_results=results)
    if diff:
        out["diff"] = [result.pop("diff") for result in results if "diff" in result]
    return out
