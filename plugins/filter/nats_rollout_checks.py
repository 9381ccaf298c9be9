# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The check of the ``rollout`` playbook's settings, before any host is touched. A thin wrapper over
``plugin_utils._rollout``."""

from __future__ import annotations

DOCUMENTATION = r"""
name: nats_rollout_checks
version_added: 0.1.0
short_description: what keeps the rollout from using its settings
description:
  - Checks the settings of the playbook C(nats_edge.fleet.rollout) as each host of the rollout sees them, and lists
    what cannot be used, each problem naming the variable and its value; an empty list means they can all be used.
    The playbook runs it before any host is touched, so that a setting it would reach only later (the edge waves,
    after the hub was rolled) or would ignore (a canary that names no site) stops it while nothing has changed.
  - C(nats_rollout_edge_batches) - a list of wave sizes (or one size), each a whole number of edge hosts from 1 or a
    percentage of them from 1% to 100% (V(25%)).
  - C(nats_rollout_canaries) - a list of names (a string is read as names separated by commas), each an edge site
    (a JetStream domain) or an edge host of the inventory; a name that is not is refused with the names it could
    be.
  - C(nats_rollout_max_fail_percentage) - from 0 to 100. C(nats_rollout_gate_timeout) - whole seconds from 1.
    C(nats_rollout_max_lag) - a whole number from 0. C(nats_rollout_lame_duck), C(nats_rollout_only_outdated) -
    true or false. C(nats_rollout_report_file) - empty, or a file whose directory exists on the controller.
    C(nats_fleet_hub_group) - a group of the inventory (the default V(hub) may be missing - a fleet of edge sites
    alone).
  - A C(nats_rollout_*) variable one typo away from a setting is reported, so that the setting it was meant for is
    not left at its default.
  - A problem found for some hosts only names them.
positional: _input, groups, domains, fleet
options:
  _input:
    description:
      - Each host of the rollout with its settings (a missing one takes the playbook's default) and, under
        C(_names), the C(nats_rollout_*) variables set for it.
    type: dict
    required: true
  groups:
    description: The inventory's groups (C(groups)).
    type: dict
  domains:
    description: The JetStream domain of each host of the fleet (its site); a host without one is a site of its own.
    type: dict
  fleet:
    description: The group of every server of the fleet; its hosts outside the hub group are the edge hosts.
    type: str
    default: nats_servers
"""

EXAMPLES = r"""
# ["nats_rollout_edge_batches[0]: 0: a wave size is a whole number of edge hosts from 1 (such as 2) or a percentage of
#   them from 1% to 100% (such as '25%')"]
problems: "{{ {'hub-1': {'nats_rollout_edge_batches': [0]}} | nats_edge.fleet.nats_rollout_checks(groups) }}"

# every host's settings as it sees them, the sites of the fleet's hosts
check: >-
  {{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, '_nats_fleet_rollout_knobs')))
     | nats_edge.fleet.nats_rollout_checks(groups, dict(groups['nats_servers'] | zip(groups['nats_servers']
         | map('extract', hostvars) | map(attribute='nats_server_jetstream_domain', default='')))) }}
"""

RETURN = r"""
_value:
  description: The problems, each naming the variable and its value; empty when every setting can be used.
  type: list
  elements: str
"""

from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _rollout
from ansible_collections.nats_edge.fleet.plugins.plugin_utils._data import plain


def nats_rollout_checks(knobs, groups=None, domains=None, fleet="nats_servers"):
    return _rollout.knob_problems(plain(knobs or {}), plain(groups or {}), plain(domains or {}), fleet)


class FilterModule(object):
    def filters(self):
        return {"nats_rollout_checks": nats_rollout_checks}
