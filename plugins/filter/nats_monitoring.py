# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters behind the monitoring stage (``nats_edge.fleet.monitoring``): its settings checked before anything
changes, and what the collector is told about the fleet.

Each filter is a thin wrapper over ``plugin_utils._monitoring`` that turns its ``MonitoringError`` into an
``AnsibleFilterError`` naming the setting, host or stream and the field.
"""

from __future__ import annotations

from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _monitoring
from ansible_collections.nats_edge.fleet.plugins.plugin_utils._data import filter_decorator


_filter = filter_decorator(_monitoring.MonitoringError, "nats monitoring")


@_filter
def nats_monitoring_check(settings, hostvars, inventory_hosts, servers, monitoring_hosts, default_account="",
                          from_hosts=False):
    return _monitoring.check(settings, hostvars, inventory_hosts, servers, monitoring_hosts, default_account,
                             from_hosts)


@_filter
def nats_monitoring_targets(hostvars, servers, fleet_dir, operator, collect_from, system_account="SYS",
                            default_account="", monitor_links=True):
    return _monitoring.targets(hostvars, servers, fleet_dir, operator, collect_from, system_account, default_account,
                               monitor_links)


class FilterModule:
    def filters(self):
        return {"nats_monitoring_check": nats_monitoring_check, "nats_monitoring_targets": nats_monitoring_targets}
