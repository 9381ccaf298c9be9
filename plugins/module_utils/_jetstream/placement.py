# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a clustered JetStream can place a stream where it is asked to, decided
before anything is sent. Private to the collection; no I/O.

The rules are nats-server's peer selection (selectPeerGroup in
server/jetstream_cluster.go), reduced to what the servers' tags decide:
- only servers of the placement's cluster (without one, any cluster of the domain
  may take the stream: the server tries the one the request arrives in, then others
  through gateways);
- a server tagged ``!jetstream`` is never chosen;
- every placement tag must be on the server, a ``!tag`` must not be;
- with a ``unique_tag`` prefix (``az:``), a server without a tag of that prefix is
  never chosen and no two replicas share its value; a placement that itself names a
  tag of that prefix turns the rule off.
Storage, limits and offline servers are left to the server, which answers for them.
"""

from __future__ import annotations

from collections import namedtuple

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._versions import parse_version

EXCLUDE_PLACEMENT = "!jetstream"

Server = namedtuple("Server", "name cluster domain tags jetstream")


class PlacementError(NatsEdgeError):
    """A placement the servers cannot satisfy, or server data that cannot be read."""


def _tags(values):
    return tuple(sorted(set(str(t).strip().lower() for t in values or [] if str(t).strip())))


def from_inventory(entries):
    """Servers from the ``placement_servers`` option (the inventory's view)."""
    servers = []
    for index, entry in enumerate(entries or []):
        name = (entry.get("name") or "").strip()
        if not name:
            raise PlacementError("placement_servers[%d]: name is required" % index)
        servers.append(Server(name, entry.get("cluster") or "", None, _tags(entry.get("tags")),
                              entry.get("jetstream", True) is not False))
    return servers


def from_replies(replies):
    """Servers from the replies to ``$SYS.REQ.ACCOUNT.PING.STATZ`` or ``$SYS.REQ.SERVER.PING.VARZ``
    (each ``{"server": ServerInfo, "data": ...}``), and the unique tag prefixes the VARZ
    replies name (none for STATZ, which does not carry it; None for a server too old to say)."""
    servers, uniques = {}, set()
    for reply in replies:
        info = reply.get("server") or {}
        name = info.get("name") or info.get("id")
        if not name:
            continue
        data = reply.get("data") or {}
        jetstream = info.get("jetstream")
        config = (data.get("jetstream") or {}).get("config") if isinstance(data.get("jetstream"), dict) else None
        if jetstream is None:
            jetstream = bool(config)
        if config is not None:
            if "unique_tag" in config or (parse_version(info.get("ver")) or (0,)) >= (2, 10):
                uniques.add((config.get("unique_tag") or "").strip().lower())
            else:
                uniques.add(None)  # before 2.10 VARZ does not say
        servers[name] = Server(name, info.get("cluster") or "", info.get("domain") or "",
                               _tags(info.get("tags") or data.get("tags")), bool(jetstream))
    return [servers[name] for name in sorted(servers)], uniques


def needs_check(after):
    """A stream config (a plan's ``after``) whose placement can fail: replicated or placed."""
    placement = after.get("placement") or {}
    return (after.get("num_replicas") or 1) > 1 or bool(placement.get("tags") or placement.get("cluster"))


def _matches(server, wanted, unwanted):
    have = set(server.tags)
    return EXCLUDE_PLACEMENT not in have and wanted <= have and not unwanted & have


def _zone(server, unique):
    for tag in server.tags:
        if tag.startswith(unique):
            return tag
    return None


def _describe(placement):
    parts = []
    if placement.get("tags"):
        parts.append("tags %s" % ", ".join(placement["tags"]))
    if placement.get("cluster"):
        parts.append("cluster %s" % placement["cluster"])
    return " and ".join(parts) or "no placement"


def capacity(servers, placement, unique_tag):
    """(how many replicas the matching servers can hold, the matching servers,
    the zones among them or None without a unique tag) within one cluster."""
    tags = [str(t).strip().lower() for t in placement.get("tags") or []]
    wanted = set(t for t in tags if not t.startswith("!"))
    unwanted = set(t[1:] for t in tags if t.startswith("!"))
    unique = (unique_tag or "").strip().lower()
    if unique and any(t.startswith(unique) for t in wanted | unwanted):
        unique = ""  # the server turns the rule off when the placement names such a tag
    matching = [s for s in servers if s.jetstream and _matches(s, wanted, unwanted)]
    if not unique:
        return len(matching), matching, None
    zones = {}
    for server in matching:
        zone = _zone(server, unique)
        if zone:
            zones.setdefault(zone, []).append(server.name)
    return len(zones), matching, zones


def check(name, where, after, servers, unique_tag, source):
    """None when ``after`` (a stream config) can be placed on ``servers``, else why not,
    naming the stream, the placement and what the servers offer."""
    replicas = after.get("num_replicas") or 1
    placement = after.get("placement") or {}
    clustered = [s for s in servers if s.jetstream and s.cluster]
    if not clustered:
        return None  # a standalone server keeps the placement in the config and ignores it
    wanted_cluster = placement.get("cluster")
    clusters = sorted(set(s.cluster for s in clustered))
    if wanted_cluster:
        if wanted_cluster not in clusters:
            return ("stream %r %s: placement %s cannot be satisfied: no JetStream server is in cluster %r "
                    "(clusters: %s; %s)" % (name, where, _describe(placement), wanted_cluster,
                                            ", ".join(clusters), source))
        clusters = [wanted_cluster]
    best = None
    for cluster in clusters:
        members = [s for s in clustered if s.cluster == cluster]
        held, matching, zones = capacity(members, placement, unique_tag)
        if held >= replicas:
            return None
        if best is None or held > best[1]:
            best = (cluster, held, matching, zones)
    cluster, held, matching, zones = best
    where_cluster = "in cluster %r" % cluster if len(clusters) == 1 else "in any cluster (best: %r)" % cluster
    if not matching:
        reason = "no JetStream server %s has them" % where_cluster
    elif zones is None:
        reason = "%d server%s %s match%s (%s)" % (len(matching), "" if len(matching) == 1 else "s", where_cluster,
                                                  "es" if len(matching) == 1 else "", ", ".join(
                                                      s.name for s in matching))
    else:
        reason = "the servers %s that match are in %d distinct %r zone%s (%s) and unique_tag %r puts every " \
                 "replica in another zone" % (where_cluster, held, unique_tag, "" if held == 1 else "s", "; ".join(
                     "%s: %s" % (zone, ", ".join(names)) for zone, names in sorted(zones.items())) or "none",
                     unique_tag)
        untagged = [s.name for s in matching if _zone(s, unique_tag.strip().lower()) is None]
        if untagged:
            reason += "; without a %r tag: %s" % (unique_tag, ", ".join(untagged))
    return "stream %r %s: placement %s cannot hold %d replica%s: %s (%s)" % (
        name, where, _describe(placement), replicas, "" if replicas == 1 else "s", reason, source)
