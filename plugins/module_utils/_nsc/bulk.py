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

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.nats_edge.fleet.plugins.module_utils._items import unknown_options

# the single form's spec and its constraints, less these task-level options
TASK_LEVEL = ("store_dir", "keys_dir", "operator", "lock_timeout", "push", "expected_servers")


class ItemExit(Exception):
    def __init__(self, result):
        super(ItemExit, self).__init__("exit")
        self.result = result


class ItemFailure(Exception):
    def __init__(self, msg, result):
        super(ItemFailure, self).__init__(msg)
        self.msg = msg
        self.result = result


class ItemModule(object):
    """What the single form's code sees of the module while it converges one item."""

    def __init__(self, module, params):
        self._module = module
        self.params = params
        self.check_mode = module.check_mode
        self._diff = module._diff

    def warn(self, warning):
        self._module.warn(warning)

    def exit_json(self, **result):
        raise ItemExit(result)

    def fail_json(self, msg=None, **result):
        raise ItemFailure(msg, result)


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
    module's own). The first bad item fails the module, naming it, before anything is converged."""
    spec = {name: value for name, value in item_spec.items() if name not in TASK_LEVEL}
    validator = ArgumentSpecValidator(spec, **constraints)
    if task_params is None:
        # the task-level options (store, connection, push) as the task gives them
        task_params = {name: value for name, value in module.params.items() if name not in spec and name != key}
    items = []
    for index, item in enumerate(module.params[key] or []):
        # items are dicts: ansible-core's elements=dict check has refused anything else
        name = label(item)
        where = "%s[%d]%s" % (key, index, " (%s)" % name if name else "")
        unknown = unknown_options(item, spec)
        if unknown:
            module.fail_json(msg="%s: unknown option%s %s; an item takes %s" % (
                where, "s" if len(unknown) > 1 else "", ", ".join(unknown), ", ".join(sorted(spec))),
                changed=False, item_results=[])
        checked = validator.validate(item)
        module.no_log_values.update(checked._no_log_values)
        if checked.error_messages:
            module.fail_json(msg="%s: %s" % (where, "; ".join(checked.error_messages)), changed=False, item_results=[])
        params = dict(task_params)
        params.update(checked.validated_parameters)
        items.append((where, params))
    return items


def converge_items(module, items, converge):
    """Converge the checked ``items`` one after another with ``converge(item_module)``; their results, or an
    ItemFailure naming the failed item (by its ``where``, unless empty) whose result holds every result so far."""
    results = []
    for where, params in items:
        try:
            converge(ItemModule(module, params))
        except ItemExit as done:
            results.append(done.result)
        except ItemFailure as failure:
            results.append(failure.result)
            raise ItemFailure("%s: %s" % (where, failure.msg) if where else failure.msg, results)
    return results


def run(module, key, item_spec, converge, label, **constraints):
    """Converge ``module.params[key]`` with ``converge(item_module)`` and exit the module."""
    items = checked_items(module, key, item_spec, label, **constraints)
    try:
        results = converge_items(module, items, converge)
    except ItemFailure as failure:
        module.fail_json(msg=failure.msg, **_summary(failure.result, module))
    module.exit_json(**_summary(results, module))


def _summary(results, module):
    summary = dict(changed=any(result.get("changed") for result in results), item_results=results)
    if module._diff:
        summary["diff"] = [result.pop("diff") for result in results if "diff" in result]
    return summary
