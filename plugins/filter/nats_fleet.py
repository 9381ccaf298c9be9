# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters behind the fleet play (``nats_edge.fleet.site``): the inventory's
fleet data checked up front and planned per stage.

Each filter is a thin wrapper over ``plugin_utils._fleet`` that turns its
``FleetError`` into an ``AnsibleFilterError`` naming the item and the field.
"""

from __future__ import annotations

from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _fleet, _pull
from ansible_collections.nats_edge.fleet.plugins.plugin_utils._data import filter_decorator


_filter = filter_decorator(_fleet.FleetError, "nats fleet")
_pull_filter = filter_decorator(_pull.PullError, "nats fleet pull")


def nats_preload(value):
    """``value`` unchanged. A play's ``hosts`` is templated by the controller's main process: a pattern passed
    through this filter has the collection's filter plugins loaded there once for the run, and the worker of every
    task and host (a fork of that process) finds them loaded instead of importing them again."""
    return value


@_filter
def nats_fleet_check(fleet, where=""):
    fleet = dict(fleet or {})
    return _fleet.check(fleet.get("accounts"), fleet.get("exports"), fleet.get("streams"), fleet.get("consumers"),
                        where=where, kv_buckets=fleet.get("kv_buckets"), object_stores=fleet.get("object_stores"),
                        object_fetch=fleet.get("object_fetch"), files_dir=fleet.get("files_dir") or "",
                        default_account=fleet.get("default_account"), operator=fleet.get("operator"),
                        system_account=fleet.get("system_account"))


@_filter
def nats_fleet_check_hosts(hostvars, hosts, budgets=False, fleet=None):
    return _fleet.check_hosts(hostvars, hosts, budgets, fleet)


@_filter
def nats_fleet_streams(host_vars, domains):
    from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _aggregates
    try:
        return _fleet.host_streams(host_vars, domains)[0]
    except _aggregates.AggregateError as exc:
        raise _fleet.FleetError(str(exc)) from exc


@_filter
def nats_fleet_aggregating(hostvars, hosts):
    return _fleet.aggregating(hostvars, hosts)


@_filter
def nats_fleet_host_consumers(host_vars, aggregating, domains):
    return _fleet.host_consumers(host_vars, aggregating, domains)


@_filter
def nats_fleet_budget_left(replication, budgets, account=None):
    from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _budget
    return _budget.left(replication, budgets, account)


@_filter
def nats_fleet_users(accounts):
    return _fleet.users(accounts)


@_filter
def nats_fleet_module_items(items, kind):
    if kind not in _fleet.FLEET_KEYS:
        raise _fleet.FleetError("nats_fleet_module_items: kind %r is not one of %s" % (kind, ", ".join(sorted(_fleet.FLEET_KEYS))))
    return [_fleet.module_args(item, kind) for item in items or []]


@_filter
def nats_fleet_admin_users(accounts):
    return _fleet.admin_users(accounts)


@_filter
def nats_fleet_leaf_remotes(remotes, account_ids, system_account_id, creds_dir, system_user="sys", host=""):
    return _fleet.leaf_remotes(remotes, account_ids, system_account_id, creds_dir, system_user, host)


@_filter
def nats_fleet_domains(hostvars, hosts):
    return _fleet.domains(hostvars, hosts)


@_filter
def nats_fleet_push_targets(domain_map, via="site", hub_domain=""):
    return _fleet.push_targets(domain_map, via, hub_domain)


@_filter
def nats_fleet_push_order(accounts, exports, last=None):
    return _fleet.push_order(accounts, exports, last or ())


@_filter
def nats_fleet_stream_batches(streams, default_account, creds_dir, admins, where="", kind="stream", files_dir=""):
    return _fleet.stream_batches(streams, default_account, creds_dir, admins, where, kind, files_dir)


@_filter
def nats_fleet_object_fetches(hostvars, hosts, default_account, creds_dir, admins, cache_dir, domain=""):
    return _fleet.object_fetches(hostvars, hosts, default_account, creds_dir, admins, cache_dir, domain)


@_filter
def nats_fleet_pass(batches, key):
    return _fleet.pass_items(batches, key)


@_filter
def nats_fleet_consumers(consumers, default_account, creds_dir, admins):
    return _fleet.consumers(consumers, default_account, creds_dir, admins)


@_filter
def nats_fleet_contexts(domain_map, default_account, creds_dir, admins, system_account="SYS", system_user="sys",
                        extra=None, context_dir="", ca=""):
    return _fleet.contexts(domain_map, default_account, creds_dir, admins, system_account, system_user, extra,
                           context_dir, ca)


@_filter
def nats_fleet_cached_copies(copies, states, fetched=None):
    return _fleet.cached_copies(copies, states, fetched)


@_filter
def nats_fleet_stale_files(files, states, mode="0600"):
    return _fleet.stale_files(files, states, mode)


@_pull_filter
def nats_fleet_pull_files(inputs, secrets=None):
    return _pull.files(inputs or {}, secrets or [])


@_pull_filter
def nats_fleet_pull_bundle(inputs, contents, host, secrets=None):
    return _pull.bundle(inputs or {}, contents or {}, host, secrets or [])


@_pull_filter
def nats_fleet_pull_vars(bundle, host, directory):
    return _pull.placed(_pull.check(bundle, host)["vars"], directory)


class FilterModule(object):
    def filters(self):
        return {f.__name__: f for f in (
            nats_fleet_check, nats_fleet_check_hosts, nats_fleet_streams, nats_fleet_aggregating, nats_fleet_host_consumers,
            nats_fleet_budget_left, nats_fleet_users,
            nats_fleet_module_items, nats_fleet_admin_users, nats_fleet_leaf_remotes,
            nats_fleet_domains, nats_fleet_push_targets, nats_fleet_push_order, nats_fleet_stream_batches, nats_fleet_pass,
            nats_fleet_consumers, nats_fleet_contexts, nats_fleet_object_fetches,
            nats_fleet_cached_copies, nats_fleet_stale_files, nats_fleet_pull_files, nats_fleet_pull_bundle,
            nats_fleet_pull_vars, nats_preload)}
