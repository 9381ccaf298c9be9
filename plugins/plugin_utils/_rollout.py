# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rolling a fleet: the order nodes go in and the gates they must pass.

Private to the collection. Pure functions over what the monitoring endpoints
return, so every gate is unit-tested without a server. The ``rollout``
playbook calls them through the filters in ``plugins/filter/nats_rollout.py``.
"""

from __future__ import annotations

import difflib
import math
import os
import re

from ansible_collections.nats_edge.fleet.plugins.module_utils import _versions


def name_list(value):
    """A list of names from ``value``: a list as it is, a string as the names it separates with commas (as
    Ansible's list type reads one: ``-e nats_rollout_canaries=site7``), nothing for None. Raises TypeError
    for anything else."""
    if value is None:
        return []
    if isinstance(value, str):
        return [name.strip() for name in value.split(",") if name.strip()]
    if isinstance(value, (list, tuple)):
        return list(value)
    raise TypeError("expected a list of names, got %r" % (value,))


def rollout_order(hosts, sites, leaders=(), first=(), canaries=()):
    """``hosts`` grouped by site (sites in order of first appearance, as the
    inventory lists them, except the sites named in ``canaries``, by site or
    by one of their hosts, which go before all others in the order named).
    Inside each site the hosts in ``first`` (down or unhealthy: they cannot
    get worse, and while they are down the others would fail the check that
    their cluster is healthy) go first, and those that lead something (the
    JetStream meta leader) last, so leadership moves once."""
    leaders, first = set(leaders or ()), set(first or ())
    by_site = {}
    for host in hosts:
        by_site.setdefault(sites.get(host, host), []).append(host)
    picked = []
    for name in name_list(canaries):
        site = name if name in by_site else sites.get(name, name)
        if site in by_site and site not in picked:
            picked.append(site)
    ordered = []
    for site in picked + [site for site in by_site if site not in picked]:
        ordered += sorted(by_site[site], key=lambda h: (0 if h in first else 2 if h in leaders else 1))
    return ordered


def rollout_rounds(batch, sites):
    """{host: round}: inside one batch, the nodes of one site go in
    successive rounds (one at a time), different sites side by side."""
    seen = {}
    rounds = {}
    for host in batch:
        site = sites.get(host, host)
        rounds[host] = seen.get(site, 0)
        seen[site] = rounds[host] + 1
    return rounds


# --------------------------------------------------------------------------
# the rollout's settings, checked before the first host is touched

#: every setting of the rollout and the value the playbook takes when it is not set
KNOBS = {
    "nats_fleet_hub_group": "hub",
    "nats_rollout_edge_batches": [1, "25%"],
    "nats_rollout_canaries": [],
    "nats_rollout_max_fail_percentage": 10,
    "nats_rollout_gate_timeout": 120,
    "nats_rollout_max_lag": 0,
    "nats_rollout_lame_duck": True,
    "nats_rollout_report_file": "",
    "nats_rollout_only_outdated": False,
    "nats_rollout_downgrade_check": True,
}
_LISTED = 20  # names a message lists before it says how many more there are
_TRUE = ("yes", "on", "1", "true", "y", "t")
_FALSE = ("no", "off", "0", "false", "n", "f")


def _plain(item):
    """``item`` with Ansible's tagged strings and numbers as plain ones, so that their repr is the value's."""
    if isinstance(item, bool) or item is None:
        return item
    if isinstance(item, str):
        return str(item)
    if isinstance(item, int):
        return int(item)
    if isinstance(item, float):
        return float(item)
    if isinstance(item, (list, tuple)):
        return [_plain(i) for i in item]
    if isinstance(item, dict):
        return dict((_plain(k), _plain(v)) for k, v in item.items())
    return item


def _shown(value):
    """``value`` as a message shows it: the repr of the plain value (a list's items too), a number given as text
    (``-e nats_rollout_gate_timeout=0``, or as ansible-core before 2.19 templates one) as the number."""
    if isinstance(value, str) and re.match(r"^-?\d+(\.\d+)?$", value):
        return str(value)
    return repr(_plain(value))


def _listed(names):
    names = list(names)
    more = len(names) - _LISTED
    return ", ".join(names[:_LISTED]) + (" and %d more" % more if more > 0 else "") if names else "none"


def _whole(value, minimum):
    """``value`` as a whole number of at least ``minimum`` (an int, a float without a fraction, or digits as
    text, as ``| int`` reads them), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = int(value)
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and re.match(r"^\s*\d+\s*$", value):
        number = int(value)
    else:
        return None
    return number if number >= minimum else None


def _wave_size(value):
    """True when ``value`` is one size of ``serial``: a whole number of hosts from 1, or a percentage of the
    edge hosts from 1% to 100% (Ansible reads the digits before the ``%``)."""
    if isinstance(value, str):
        percent = re.match(r"^\s*(\d+)\s*%$", value)
        if percent:
            return 1 <= int(percent.group(1)) <= 100
    return _whole(value, 1) is not None


def _percentage(value):
    """``value`` as ``max_fail_percentage`` reads it (a number, or text with an optional ``%``), from 0 to 100,
    else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip().rstrip("%").strip())
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) and 0 <= number <= 100 else None


def _boolean(value):
    if isinstance(value, bool):
        return True
    if isinstance(value, (int, float)):
        return value in (0, 1)
    return isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE


def _batch_problems(value):
    name = "nats_rollout_edge_batches"
    hint = "a wave size is a whole number of edge hosts from 1 (such as 2) or a percentage of them from 1% to 100% " \
           "(such as '25%')"
    if isinstance(value, dict) or value is None:
        return ["%s: %s: give the wave sizes as a list, such as [1, '25%%'] (the default: a canary, then quarters "
                "of the edge hosts)" % (name, _shown(value))]
    if not isinstance(value, (list, tuple)):
        if _wave_size(value):
            return []
        return ["%s: %s: %s; several sizes go in a list, such as [1, '25%%']" % (name, _shown(value), hint)]
    if not value:
        return ["%s: []: give at least one wave size, such as [1, '25%%'] (the last size repeats)" % name]
    return ["%s[%d]: %s: %s" % (name, i, _shown(size), hint) for i, size in enumerate(value) if not _wave_size(size)]


def _report_problems(value):
    name = "nats_rollout_report_file"
    if value is None or value == "":
        return []
    if not isinstance(value, str):
        return ["%s: %s: give a file path on the controller (or leave it empty for no record)" % (name, _shown(value))]
    path = os.path.expandvars(os.path.expanduser(value))
    if os.path.isdir(path):
        return ["%s: %s is a directory: name the file the record goes to, such as %s" % (
            name, _shown(value), os.path.join(value, "rollout.json"))]
    folder = os.path.dirname(path)
    if folder and not os.path.isdir(folder):
        return ["%s: %s: the directory %s does not exist on the controller, and the record would be lost at the "
                "end of the rollout" % (name, _shown(value), folder)]
    return []


def _edge_sites(groups, domains, hub_group, hosts):
    """[(site, [hosts])] of the edge hosts (the fleet's hosts outside the hub), in inventory order, and the
    hub's hosts."""
    hub = list((groups or {}).get(hub_group) or [])
    sites = []
    by_site = {}
    for host in hosts:
        if host in hub:
            continue
        site = (domains or {}).get(host) or host
        if site not in by_site:
            by_site[site] = []
            sites.append(site)
        by_site[site].append(host)
    return [(site, by_site[site]) for site in sites], hub


def _canary_problems(value, groups, domains, hub_group, hosts):
    name = "nats_rollout_canaries"
    try:
        canaries = name_list(value)
    except TypeError:
        return ["%s: %s: give a list of edge sites or hosts, such as [site7]" % (name, _shown(value))]
    sites, hub = _edge_sites(groups, domains, hub_group, hosts)
    known = set(site for site, _hosts in sites) | set(h for _site, members in sites for h in members)
    hub_names = set(hub) | set((domains or {}).get(h) or h for h in hub)
    problems = []
    for i, canary in enumerate(canaries):
        where = "%s[%d]" % (name, i)
        if not isinstance(canary, str):
            problems.append("%s: %s: a site or host name is text: write it in quotes ('%s')" % (
                where, _shown(canary), canary))
        elif canary in known:
            continue
        elif canary in hub_names:
            problems.append("%s: %r is in the hub (group %s), which is rolled before every edge site anyway; "
                            "canaries are edge sites or hosts" % (where, str(canary), hub_group))
        else:
            # the sites it may have meant, else the hosts
            close = sorted(difflib.get_close_matches(canary, [site for site, _hosts in sites], n=3, cutoff=0.6)
                           or difflib.get_close_matches(canary, sorted(known), n=3, cutoff=0.6))
            listed = ["%s (%s)" % (site, ", ".join(members)) if members != [site] else site for site, members in sites]
            guess = " (did you mean %s?)" % " or ".join(close) if close else ""
            problems.append("%s: %r is not an edge site or host of the inventory%s; the edge sites (and their hosts) "
                            "are: %s" % (where, str(canary), guess, _listed(listed)))
    return problems


def _host_knob_problems(knobs, groups, domains, hosts):
    problems = []
    hub_group = knobs.get("nats_fleet_hub_group")
    if not isinstance(hub_group, str) or not hub_group.strip():
        problems.append("nats_fleet_hub_group: %s: give the name of the hub cluster's inventory group (default hub)"
                        % _shown(hub_group))
        hub_group = None
    elif hub_group != KNOBS["nats_fleet_hub_group"] and hub_group not in (groups or {}):
        others = sorted(g for g in (groups or {}) if g not in ("all", "ungrouped") and not g.startswith("nats_rollout_"))
        close = difflib.get_close_matches(hub_group, others, n=1, cutoff=0.6)
        problems.append("nats_fleet_hub_group: %r is not a group of the inventory%s; its groups: %s" % (
            str(hub_group), " (did you mean %s?)" % close[0] if close else "", _listed(others)))
        hub_group = None
    problems += _batch_problems(knobs.get("nats_rollout_edge_batches"))
    if hub_group is not None:
        problems += _canary_problems(knobs.get("nats_rollout_canaries"), groups, domains, hub_group, hosts)
    value = knobs.get("nats_rollout_max_fail_percentage")
    if _percentage(value) is None:
        problems.append("nats_rollout_max_fail_percentage: %s: a percentage of a wave's hosts from 0 to 100 that may "
                        "fail before the rollout halts (0 halts at the first failure; default 10)" % _shown(value))
    value = knobs.get("nats_rollout_gate_timeout")
    if _whole(value, 1) is None:
        problems.append("nats_rollout_gate_timeout: %s: the seconds a node has to pass each gate, a whole number "
                        "from 1 (default 120)" % _shown(value))
    value = knobs.get("nats_rollout_max_lag")
    if _whole(value, 0) is None:
        problems.append("nats_rollout_max_lag: %s: the operations a replica may lag and pass, a whole number from 0 "
                        "(default 0)" % _shown(value))
    for name in ("nats_rollout_lame_duck", "nats_rollout_only_outdated", "nats_rollout_downgrade_check"):
        if not _boolean(knobs.get(name)):
            problems.append("%s: %s: true or false" % (name, _shown(knobs.get(name))))
    problems += _report_problems(knobs.get("nats_rollout_report_file"))
    for name in knobs.get("_names") or ():
        if name not in KNOBS:
            close = difflib.get_close_matches(name, sorted(KNOBS), n=1, cutoff=0.8)
            if close:
                problems.append("%s is set, but the rollout has no such setting: did you mean %s?" % (name, close[0]))
    return problems


def knob_problems(knobs, groups=None, domains=None, fleet="nats_servers"):
    """What keeps the rollout from using its settings, each problem naming the variable and its value; an empty
    list when they can all be used.

    ``knobs`` maps each host of the rollout to its settings (``KNOBS``, a missing one taking its default), as
    that host sees them, and optionally ``_names``, the names of the ``nats_rollout_*`` variables set for it (a
    name one typo away from a setting is reported). ``groups`` are the inventory's groups; ``domains`` maps the
    fleet's hosts to their JetStream domain (their site; a host without one is a site of its own). Canaries
    must be edge sites or hosts of the inventory (the group ``fleet``, outside the hub group). A problem found
    for some hosts only names them."""
    knobs = dict(knobs or {})
    hosts = list((groups or {}).get(fleet) or knobs)
    found = {}
    for host, values in knobs.items():
        settings = dict(KNOBS)
        settings.update(values or {})
        for problem in _host_knob_problems(settings, groups, domains, hosts):
            found.setdefault(problem, []).append(host)
    return [problem if len(where) == len(knobs) else "%s (as set for %s)" % (problem, _listed(where))
            for problem, where in found.items()]


# --------------------------------------------------------------------------
# downgrades: a server older than the JetStream API level an asset is stamped with puts it offline (ADR-44)

def _answer(read):
    """The JSON of a registered ``uri`` read, None when there was none (skipped, refused, not JSON)."""
    read = read or {}
    body = read.get("json")
    return body if read.get("status") == 200 and isinstance(body, dict) else None


def downgrade_problems(host, target, varz, jsz):
    """Why ``host`` must not move to nats-server ``target``: an empty list when it may. ``varz`` and ``jsz`` are
    the rollout's reads of the server's ``/varz`` and of ``/jsz?accounts=true&streams=true&consumers=true&config=true``
    (registered ``uri`` results; ``jsz`` is read only where ``target`` is older than what runs).

    No target (the package manager's version) and a move to the same or a newer release pass. A server that does
    not answer cannot say what it runs or what its assets need, and is refused, as is one whose ``/jsz`` could not
    be read; each problem says how to roll without the check."""
    wanted = _versions.parse_version(target)
    if not wanted:
        return []
    opt_out = "start it, or set nats_rollout_downgrade_check: false to roll without this check"
    running = _versions.parse_version((_answer(varz) or {}).get("version"))
    if running is None:
        return ["%s: its server did not answer /varz, so whether nats-server %s is older than what it runs, and what "
                "its streams and consumers need, cannot be read; %s" % (host, _versions.version_text(wanted), opt_out)]
    if wanted >= running:
        return []
    body = _answer(jsz)
    if body is None:
        why = (jsz or {}).get("msg") or "status %s" % (jsz or {}).get("status")
        return ["%s: moves from nats-server %s to %s, and the API levels its streams and consumers need could not be "
                "read from /jsz (%s); %s" % (host, _versions.version_text(running), _versions.version_text(wanted), why,
                                             opt_out.replace("start it", "make /jsz answer"))]
    refused = _versions.downgrade_refusals(_versions.jsz_assets(body), wanted, running)
    if not refused:
        return []
    newest = max(_versions.parse_version(item["needs"]) for item in refused)
    return ["%s: %s; roll it to nats-server %s or newer, or remove what needs it" % (
        host, _versions.refusal_message(refused, wanted), _versions.version_text(newest))]
