# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rolling a fleet: the order nodes go in and the gates they must pass.

Private to the collection. Pure functions over what the monitoring endpoints
return, so every gate is unit-tested without a server. The ``rollout``
playbook calls them through the filters in ``plugins/filter/nats_rollout.py``.
"""

from __future__ import annotations


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
    for name in canaries or ():
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


def _peer_names(routez):
    return sorted(set(r.get("remote_name") or r.get("remote_id") or "?" for r in routez.get("routes") or []))


def gate_problems(name, endpoint, data, peers=None, leafnodes=None, max_lag=0, version=None, leafs=None):
    """What keeps ``name`` from passing a gate, from one endpoint's JSON
    (``healthz``, ``varz``, ``routez``, ``leafz``, ``jsz`` read with
    ``accounts=true&streams=true``). An empty list means it passes.

    - healthz: the server's own JetStream-aware verdict (meta group and the
      streams and consumers it hosts are current);
    - varz: the running ``version``;
    - routez: routes to at least ``peers`` distinct servers;
    - leafz: at least ``leafnodes`` leaf connections, and every server named
      in ``leafs`` connected here;
    - jsz: a meta leader; for the meta group and every stream this server
      leads, every replica current, online and at most ``max_lag`` behind;
      every stream it hosts has a leader.
    """
    data = data if isinstance(data, dict) else {}
    problems = []
    if endpoint == "healthz":
        if data.get("status") != "ok":
            problems.append("%s: not healthy (%s)" % (name, data.get("error") or data.get("status") or "no answer"))
    elif endpoint == "varz":
        if version and data.get("version") != version:
            problems.append("%s: runs %s, not %s" % (name, data.get("version") or "nothing", version))
    elif endpoint == "routez":
        have = _peer_names(data)
        if peers is not None and len(have) < int(peers):
            problems.append("%s: routes to %d of %d peers (%s)" % (name, len(have), int(peers), ", ".join(have) or "none"))
    elif endpoint == "leafz":
        count = int(data.get("leafnodes") or 0)
        if leafnodes is not None and count < int(leafnodes):
            problems.append("%s: %d of %d leaf connections" % (name, count, int(leafnodes)))
        if leafs:
            connected = set(leaf.get("name") for leaf in data.get("leafs") or [])
            missing = sorted(set(leafs) - connected)
            if missing:
                problems.append("%s: leaf nodes not back: %s" % (name, ", ".join(missing)))
    elif endpoint == "jsz":
        problems += _jetstream_problems(name, data, int(max_lag or 0))
    else:
        raise ValueError("unknown endpoint %r" % endpoint)
    return problems


def _replica_problems(name, what, replicas, max_lag):
    problems = []
    for replica in replicas or []:
        lag = int(replica.get("lag") or 0)
        if replica.get("offline"):
            problems.append("%s: %s: replica %s offline" % (name, what, replica.get("name")))
        elif not replica.get("current"):
            problems.append("%s: %s: replica %s not current (lag %d)" % (name, what, replica.get("name"), lag))
        elif lag > max_lag:
            problems.append("%s: %s: replica %s lags %d" % (name, what, replica.get("name"), lag))
    return problems


def _jetstream_problems(name, jsz, max_lag):
    if not jsz:
        return ["%s: no JetStream report" % name]
    if jsz.get("disabled"):
        return []
    problems = []
    meta = jsz.get("meta_cluster") or {}
    server = jsz.get("server_name") or name
    if meta.get("cluster_size", len(meta.get("replicas") or []) + 1) > 1 or meta.get("replicas"):
        if not meta.get("leader"):
            problems.append("%s: JetStream has no meta leader" % name)
        elif meta.get("leader") == server:
            problems += _replica_problems(name, "meta group", meta.get("replicas"), max_lag)
    for account in jsz.get("account_details") or []:
        for stream in account.get("stream_detail") or []:
            cluster = stream.get("cluster") or {}
            what = "stream %s (account %s)" % (stream.get("name"), account.get("name") or account.get("id"))
            if not cluster.get("replicas") and cluster.get("leader", server) == server:
                continue  # a single replica: nothing to catch up
            if not cluster.get("leader"):
                problems.append("%s: %s has no leader" % (name, what))
            elif cluster.get("leader") == server:
                problems += _replica_problems(name, what, cluster.get("replicas"), max_lag)
    return problems
