# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stream and replication report of JetStream domains, from STREAM.INFO replies.
Private to the collection.

Rows for the module's result, text tables like ``nats stream report``, and the
replication graph in Graphviz dot. No I/O.
"""

from __future__ import annotations

import json
import re

from ansible_collections.nats_edge.fleet.plugins.module_utils._units import api_domain, format_duration

_DOMAIN_NAME = re.compile(r"^[^$.]+$")
LOCAL = "(local)"

STATUS_OK, STATUS_LAGGING, STATUS_INACTIVE, STATUS_STALLED, STATUS_ERROR = (
    "ok", "lagging", "inactive", "stalled", "error")


def domain_of(info, requested=None):
    """The domain a STREAM.INFO reply belongs to: the one asked for, else what the server says."""
    return requested or info.get("domain") or LOCAL


def source_domain(external, own_domain):
    """Where a mirror or source reads from: a domain for ``$JS.<domain>.API``, the
    stream's own domain without ``external``, else the API prefix itself."""
    api = ((external or {}).get("api") or "").rstrip(".")
    if not api:
        return own_domain
    return api_domain(api) or api


def stream_row(info, domain):
    config = info.get("config") or {}
    state = info.get("state") or {}
    cluster = info.get("cluster") or {}
    mirror = config.get("mirror")
    return dict(
        name=config.get("name"),
        domain=domain,
        storage=config.get("storage", "file"),
        subjects=list(config.get("subjects") or []),
        messages=state.get("messages", 0),
        bytes=state.get("bytes", 0),
        first_seq=state.get("first_seq", 0),
        last_seq=state.get("last_seq", 0),
        deleted=state.get("num_deleted", len(state.get("deleted") or [])),
        consumers=state.get("consumer_count", 0),
        replicas=config.get("num_replicas", 1),
        leader=cluster.get("leader"),
        cluster=cluster.get("name"),
        peers=[dict(name=p.get("name"), current=p.get("current", False), lag=p.get("lag", 0),
                    active=_seconds(p.get("active")), offline=p.get("offline", False))
               for p in cluster.get("replicas") or []],
        placement=config.get("placement"),
        mirror=mirror.get("name") if mirror else None,
        sources=[s.get("name") for s in config.get("sources") or []],
        created=info.get("created"),
    )


def replication_rows(info, domain, inactive_after):
    """One row per mirror or source of the stream; ``inactive_after`` in nanoseconds."""
    config = info.get("config") or {}
    rows = []
    for kind, entry, _config in replication_entries(info):
        external = entry.get("external") or {}
        error = entry.get("error")
        active = entry.get("active")
        row = dict(
            stream=config.get("name"),
            domain=domain,
            kind=kind,
            source=entry.get("name"),
            source_domain=source_domain(external, domain),
            external_api=external.get("api") or None,
            deliver_prefix=external.get("deliver") or None,
            filter=_filter_text(entry),
            lag=entry.get("lag", 0),
            active=_seconds(active),
            seq=entry.get("seq"),
            error=_error_text(error),
            error_code=(error or {}).get("err_code"),
            origin_last_seq=None,
            origin_messages=None,
            behind=None,
            ahead=None,
            origin_error=None,
        )
        row["status"] = status_of(row, active, inactive_after)
        rows.append(row)
    return rows


def replication_entries(info):
    """``(kind, state, config)`` per mirror or source of a STREAM.INFO reply, in
    the order of :func:`replication_rows`: the server's state merged over the
    config entry, and the config entry alone (with its start sequence or time)."""
    config = info.get("config") or {}
    entries = []
    mirror = config.get("mirror")
    if info.get("mirror") or mirror:
        entries.append(("mirror", info.get("mirror") or dict(mirror), mirror or {}))
    configured = dict((_source_identity(s), s) for s in config.get("sources") or [])
    for source in _sources(info, config):
        entries.append(("source", source, configured.get(_source_identity(source), {})))
    return entries


def entry_filters(entry):
    """The subjects a mirror or source takes from its origin; empty for all."""
    transforms = entry.get("subject_transforms") or []
    if transforms:
        return [t.get("src") for t in transforms if t.get("src")]
    return [entry["filter_subject"]] if entry.get("filter_subject") else []


def _sources(info, config):
    """Sources with their state, in the order of the config (the server's list is unordered)."""
    state = dict((_source_identity(s), s) for s in info.get("sources") or [])
    if not config.get("sources"):
        return sorted(state.values(), key=lambda s: s.get("name") or "")
    merged = []
    for source in config["sources"]:
        entry = dict(source)
        entry.update(state.get(_source_identity(source), {}))
        merged.append(entry)
    return merged


def _source_identity(source):
    """Streams of one name in different domains or accounts, or with other
    filters, are different sources."""
    return (source.get("name"), (source.get("external") or {}).get("api") or "",
            source.get("filter_subject") or "",
            tuple((t.get("src"), t.get("dest")) for t in source.get("subject_transforms") or []))


def _filter_text(entry):
    transforms = entry.get("subject_transforms") or []
    if transforms:
        return ", ".join("%s to %s" % (t.get("src"), t.get("dest")) for t in transforms)
    return entry.get("filter_subject") or None


def _error_text(error):
    if not error:
        return None
    return error.get("description") or "error %s" % error.get("err_code")


def _seconds(nanos):
    if nanos is None or nanos < 0:
        return None
    return round(nanos / 1e9, 3)


def origin_gap(row, copy_state, origin_state, origin_has_matching=None, starts_late=False):
    """How many messages a copy still misses, judged by its origin's state read
    after the copy's own: ``None`` when the states cannot tell.

    The server's own lag counts from the last message it delivered, so a mirror
    or source created a moment ago shows lag 0 and a fresh ``active`` before its
    first message arrives. An unfiltered mirror keeps its origin's sequences: it
    misses whatever lies past its last sequence. A filtered mirror or a source
    that has never stored anything misses what of the origin it takes
    (``origin_has_matching``, for a filter); one that has stored something, or
    one that starts at a later sequence or time (``starts_late``), is left to the
    server's lag."""
    copy_last = (copy_state or {}).get("last_seq", 0)
    origin_last = (origin_state or {}).get("last_seq", 0)
    origin_messages = (origin_state or {}).get("messages", 0)
    if not origin_messages or origin_has_matching is False:
        return 0
    if row["kind"] == "mirror" and not row["filter"]:
        return max(0, origin_last - copy_last)
    if starts_late or copy_last:
        return None
    if row["filter"] and origin_has_matching is None:
        return None
    return origin_messages if not row["filter"] else 1


def apply_origin(row, copy_state, origin_state, **how):
    """Record the origin's state on a replication row and call a copy that still
    misses messages lagging, however fresh the server says it is."""
    row["origin_last_seq"] = (origin_state or {}).get("last_seq", 0)
    row["origin_messages"] = (origin_state or {}).get("messages", 0)
    row["behind"] = origin_gap(row, copy_state, origin_state, **how)
    if row["behind"] and row["status"] == STATUS_OK:
        row["status"] = STATUS_LAGGING
    return apply_ahead(row, origin_state)


def apply_ahead(row, origin_state):
    """A copy that has seen origin sequences past the origin's last (``seq``, where the server reports it): the
    origin came back shorter, as a power cut leaves it, and its new messages take the lost ones' sequences, which
    the copy resumes after. It skips that many of them, without an error of its own: status error, saying so."""
    origin_last = (origin_state or {}).get("last_seq", 0)
    row["origin_last_seq"] = origin_last
    seq = row.get("seq")
    row["ahead"] = seq - origin_last if origin_state is not None and seq is not None and seq > origin_last else 0
    if row["ahead"]:
        row["status"] = STATUS_ERROR
        row["error"] = row.get("error") or (
            "ahead of its origin: copied up to sequence %d, the origin's last is %d; the origin's next %d "
            "messages will not be copied" % (seq, origin_last, row["ahead"]))
    return row


def status_of(row, active_nanos, inactive_after):
    if row["error"]:
        return STATUS_ERROR
    if active_nanos is None or active_nanos < 0 or active_nanos > inactive_after:
        return STATUS_INACTIVE
    if row["lag"]:
        return STATUS_LAGGING
    return STATUS_OK


def mark_stalled(first, second, first_streams=None, second_streams=None):
    """Rows of ``second`` that still lag without progress since ``first`` become
    stalled: the picture of a source whose flow control never gets answered.

    Progress is the source's own sequence where the server reports it (2.10 and
    newer), else the last sequence of the receiving stream."""
    before = dict((row_key(r), r) for r in first)
    last_before = dict(((s["domain"], s["name"]), s["last_seq"]) for s in first_streams or [])
    last_after = dict(((s["domain"], s["name"]), s["last_seq"]) for s in second_streams or [])
    for row in second:
        old = before.get(row_key(row))
        if not old or not row["lag"] or not old["lag"] or row["status"] == STATUS_ERROR:
            continue
        if row["lag"] < old["lag"]:
            continue
        if row.get("seq") is not None and old.get("seq") is not None:
            moved = row["seq"] != old["seq"]
        else:
            target = (row["domain"], row["stream"])
            moved = last_after.get(target) != last_before.get(target)
        if not moved:
            row["status"] = STATUS_STALLED
    return second


def row_key(row):
    """What tells one replication row from another: two sources of one origin differ by their filter."""
    return (row["domain"], row["stream"], row["kind"], row["source_domain"], row["source"], row["filter"] or "")


# -- text ----------------------------------------------------------------------------------------


def table(title, headers, rows):
    """A plain text table as a list of lines."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(values):
        return "|" + "|".join(" %s " % v.ljust(w) for v, w in zip(values, widths)) + "|"

    lines = [title, rule, line(headers), rule]
    lines += [line(r) for r in cells]
    lines.append(rule)
    return lines


def format_bytes(count):
    """Binary units like ``nats stream report``: ``273 B``, ``1.5 KiB``."""
    count = int(count or 0)
    if count < 1024:
        return "%d B" % count
    value = float(count)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        value /= 1024.0
        if value < 1024 or unit == "PiB":
            break
    return ("%.1f %s" % (value, unit)).replace(".0 ", " ")


def format_count(number):
    return "{:,}".format(int(number or 0))


def _cell(value):
    return "" if value is None else str(value)


def _replicas(stream):
    if not stream["peers"]:
        return str(stream["replicas"])
    names = [stream["leader"] + "*"] if stream["leader"] else []
    for peer in stream["peers"]:
        mark = "" if peer["current"] and not peer["offline"] else "!"
        names.append(peer["name"] + mark)
    return "%d: %s" % (stream["replicas"], ", ".join(names))


def _placement(placement):
    if not placement:
        return ""
    parts = []
    if placement.get("cluster"):
        parts.append("cluster: %s" % placement["cluster"])
    if placement.get("tags"):
        parts.append("tags: %s" % ", ".join(placement["tags"]))
    return " ".join(parts)


def _active(seconds):
    if seconds is None:
        return "never"
    return format_duration(int(round(seconds * 1000)) * 10 ** 6)


def render_report(streams, replication, domains, account=None, consumers_ahead=()):
    """``nats stream report`` for each domain: streams, then their replication, then the consumers ahead of their
    stream; ``account`` names the account they were read as, in the titles."""
    lines = []
    for domain in domains:
        mine = sorted((s for s in streams if s["domain"] == domain), key=lambda s: s["name"])
        where = "domain %s%s" % (domain, ", account %s" % account if account else "")
        if lines:
            lines.append("")
        if not mine:
            lines.append("Stream Report: %s: no streams" % where)
            continue
        lines += table("Stream Report: %s" % where,
                       ["Stream", "Storage", "Placement", "Consumers", "Messages", "Bytes", "Deleted",
                        "Replicas", "Leader"],
                       [[s["name"], s["storage"].capitalize(), _placement(s["placement"]), format_count(s["consumers"]),
                         format_count(s["messages"]), format_bytes(s["bytes"]), format_count(s["deleted"]),
                         _replicas(s), s["leader"]] for s in mine])
        rows = sorted((r for r in replication if r["domain"] == domain),
                      key=lambda r: (r["stream"], r["kind"] != "mirror", r["source"]))
        if rows:
            lines.append("")
            lines += table("Replication Report: %s" % where,
                           ["Stream", "Kind", "API Prefix", "Source Stream", "Filters and Transforms", "Active",
                            "Lag", "Status", "Error"],
                           [[r["stream"], r["kind"].capitalize(), r["external_api"], r["source"], r["filter"],
                             _active(r["active"]), format_count(r["lag"]), r["status"], r["error"]] for r in rows])
        ahead = sorted((r for r in consumers_ahead if r["domain"] == domain), key=lambda r: (r["stream"], r["consumer"]))
        if ahead:
            lines.append("")
            lines += table("Consumers Ahead of Their Stream: %s" % where,
                           ["Stream", "Consumer", "Ack Floor", "Delivered", "Stream Last", "Replicas"],
                           [[r["stream"], r["consumer"], format_count(r["ack_floor"]), format_count(r["delivered"]),
                             format_count(r["last_seq"]), r["replicas"]] for r in ahead])
    return lines


# -- graph ---------------------------------------------------------------------------------------


def _quote(text):
    return '"%s"' % str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _node_label(row):
    """The stream's name; for a replicated or placed stream also its replicas, placement and the
    servers that hold them (leader first), which is what a cross-region graph is read for."""
    if not row:
        return None
    placement = row.get("placement") or {}
    if (row.get("replicas") or 1) < 2 and not placement:
        return row["name"]
    where = []
    if placement.get("tags"):
        where.append("tags %s" % " ".join(placement["tags"]))
    if placement.get("cluster"):
        where.append("cluster %s" % placement["cluster"])
    where = ", ".join(where)
    lines = [row["name"], "R%d %s%s" % (row.get("replicas") or 1, row.get("storage") or "file",
                                        ", %s" % where if where else "")]
    servers = [row["leader"] + " (leader)"] if row.get("leader") else []
    servers += [peer["name"] for peer in row.get("peers") or [] if peer.get("name")]
    if servers:
        lines.append(", ".join(servers))
    return "\n".join(lines)


def _cluster_label(domain):
    if domain == LOCAL:
        return "local domain"
    return "domain %s" % domain if _DOMAIN_NAME.match(domain) else domain


def render_dot(streams, replication):
    """The replication graph: a cluster per domain, an edge from each origin to the stream it feeds."""
    nodes = {}
    known = dict(((s["domain"], s["name"]), s) for s in streams)
    for row in replication:
        nodes.setdefault(row["domain"], set()).add(row["stream"])
        nodes.setdefault(row["source_domain"], set()).add(row["source"])
    lines = ["digraph %s {" % _quote("replication"),
             '  label="Stream Replication Structure";',
             "  rankdir=LR;",
             "  node [shape=box];"]
    for index, domain in enumerate(sorted(nodes)):
        lines.append("  subgraph %s {" % _quote("cluster_%d" % index))
        lines.append("    label=%s;" % _quote(_cluster_label(domain)))
        for name in sorted(nodes[domain]):
            style = "" if (domain, name) in known else ", style=dashed"
            lines.append("    %s [label=%s%s];" % (_quote("%s/%s" % (domain, name)), _quote(
                _node_label(known.get((domain, name))) or name), style))
        lines.append("  }")
    for row in sorted(replication, key=row_key):
        label = row["kind"]
        if row["filter"]:
            label += ": %s" % row["filter"]
        attributes = ["label=%s" % _quote(label if row["status"] == STATUS_OK else "%s (%s)" % (
            label, row["error"] or row["status"]))]
        colors = {STATUS_OK: ("blue" if row["kind"] == "mirror" else "darkgreen"), STATUS_LAGGING: "orange"}
        attributes.append("color=%s" % colors.get(row["status"], "red"))
        if row["status"] in (STATUS_INACTIVE, STATUS_STALLED):
            attributes.append("style=dashed")
        lines.append("  %s -> %s [%s];" % (_quote("%s/%s" % (row["source_domain"], row["source"])),
                                           _quote("%s/%s" % (row["domain"], row["stream"])), ", ".join(attributes)))
    lines.append("}")
    return "\n".join(lines) + "\n"


# -- health ---------------------------------------------------------------------------------------

_FROZEN_RE = re.compile(r"stream '(?P<account>[^']+) > (?P<stream>[^']+)'")


def unhealthy_servers(replies):
    """[{server, domain, status, error}] of the HEALTHZ replies whose status is not ok."""
    out = []
    for raw in replies:
        try:
            reply = json.loads(raw.decode() or "{}")
        except ValueError:
            continue
        data, server = reply.get("data") or {}, reply.get("server") or {}
        if (data.get("status") or "ok") != "ok":
            out.append(dict(server=server.get("name"), domain=server.get("domain") or None,
                            status=data.get("status"), error=data.get("error") or ""))
    return sorted(out, key=lambda r: r["server"] or "")


def mark_frozen(streams, unhealthy):
    """Give each stream row a server's health error names (its domain's server) that error as health_error."""
    for row in unhealthy:
        for found in _FROZEN_RE.finditer(row["error"]):
            for stream in streams:
                if stream["name"] == found.group("stream") and stream["domain"] in (row["domain"], LOCAL):
                    stream["health_error"] = row["error"]
