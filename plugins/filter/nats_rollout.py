# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters behind the ``rollout`` playbook: the order nodes go in, and the
gates they pass. Thin wrappers over ``plugin_utils._rollout`` and ``module_utils._server_gates``."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.nats_edge.fleet.plugins.module_utils import _server_gates
from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _rollout


def nats_rollout_order(hosts, sites, leaders=None, first=None, canaries=None):
    return _rollout.rollout_order(list(hosts or []), dict(sites or {}), leaders or [], first or [], canaries or [])


def nats_rollout_rounds(batch, sites):
    return _rollout.rollout_rounds(list(batch or []), dict(sites or {}))


def nats_server_gate(data, name, endpoint, peers=None, leafnodes=None, max_lag=0, version=None, leafs=None):
    try:
        return _server_gates.gate_problems(name, endpoint, data, peers=peers, leafnodes=leafnodes, max_lag=max_lag,
                                           version=version, leafs=leafs)
    except (ValueError, TypeError) as exc:
        raise AnsibleFilterError("nats_server_gate: %s" % exc)


def nats_rollout_downgrade(jsz, host, target, varz):
    return _rollout.downgrade_problems(str(host), str(target or ""), varz, jsz)


class FilterModule(object):
    def filters(self):
        return {
            "nats_rollout_order": nats_rollout_order,
            "nats_rollout_rounds": nats_rollout_rounds,
            "nats_server_gate": nats_server_gate,
            "nats_rollout_downgrade": nats_rollout_downgrade,
        }
