"""nats-edge-monitor-status: one static HTML page of the fleet's state, read from Prometheus's HTTP API.

The page (no JavaScript, no outside resources: inline CSS and inline SVG) shows the firing alerts by severity,
the sites with their servers, health and leaf links to the hub, the replication graph (an arrow per source or
mirror, from the origin's site to the site that copies it), the firing alerts, and per site the largest source
lag and the age of the newest message against its threshold.

    nats-edge-monitor-status --prometheus https://hub-1:9090 --ca /etc/nats/ca.pem \\
        --user status --password-file /etc/nats-edge-monitor/prometheus.pass --output /var/www/fleet/index.html

Prometheus is read over TLS verified against ``--ca``; plain HTTP only with ``--insecure-plaintext``. The
page is written atomically (a temporary file in the same folder, renamed over the old page; mode 0644). When
Prometheus cannot be read, the page is still written, saying so, and the command exits with status 1.
"""

import argparse
import base64
import datetime
import html
import json
import math
import os
import ssl
import string
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

try:
    from importlib import resources as _resources
except ImportError:  # pragma: no cover
    _resources = None

EXIT_OK = 0
EXIT_PROMETHEUS = 1
EXIT_USAGE = 2

QUERIES = {
    "up": "nats_server_up",
    "healthy": "nats_server_healthy",
    "leaf": "nats_leaf_link_up",
    "lag": "nats_stream_source_lag_messages",
    "active": "nats_stream_source_active_seconds",
    "age": "nats_stream_newest_message_age_seconds",
    "age_threshold": "nats_stream_newest_age_threshold_seconds",
    "collector": "nats_fleet_collector_connected",
}

# alerts that concern one source or mirror relation (matched on the labels they carry)
RELATION_ALERTS = ("NatsSourceLagging", "NatsSourceInactive")
RELATION_KEYS = ("site", "account", "stream", "source", "source_site", "kind")
STREAM_KEYS = ("site", "account", "stream")
SEVERITIES = ("critical", "warning", "info")


class PrometheusError(Exception):
    """Prometheus could not be read (unreachable, refused the request, or answered something else)."""


# --------------------------------------------------------------------------------------------------------------
# reading Prometheus


class Prometheus:
    """The HTTP API of one Prometheus server: TLS verified against ``ca`` unless ``insecure_plaintext``."""

    def __init__(self, url, ca=None, user=None, password=None, insecure_plaintext=False, timeout=10.0):
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.headers = {"Accept": "application/json", "User-Agent": "nats-edge-monitor-status"}
        if user is not None:
            token = base64.b64encode(("%s:%s" % (user, password or "")).encode("utf-8")).decode("ascii")
            self.headers["Authorization"] = "Basic " + token
        scheme = urllib.parse.urlsplit(self.url).scheme
        if scheme == "https":
            context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            handlers = [urllib.request.HTTPSHandler(context=context)]
        elif scheme == "http" and insecure_plaintext:
            handlers = []
        else:
            raise ValueError("unsupported Prometheus URL scheme %r" % scheme)
        # no proxies from the environment: the page reads the Prometheus it is given, directly
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), *handlers)

    def _get(self, path, params=None):
        url = self.url + path + ("?" + urllib.parse.urlencode(params) if params else "")
        request = urllib.request.Request(url, headers=self.headers)
        try:
            with self.opener.open(request, timeout=self.timeout) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            detail = ""
            try:
                detail = json.loads(exc.read().decode("utf-8", "replace")).get("error", "")
            except (ValueError, AttributeError, OSError):
                pass
            raise PrometheusError("Prometheus answered %s %s to %s%s" % (
                exc.code, exc.reason, path, (": " + detail) if detail else ""))
        except urllib.error.URLError as exc:
            raise PrometheusError("cannot reach Prometheus at %s: %s" % (self.url, _reason(exc.reason)))
        except (OSError, ValueError) as exc:
            raise PrometheusError("cannot reach Prometheus at %s: %s" % (self.url, _reason(exc)))
        try:
            answer = json.loads(body.decode("utf-8"))
        except ValueError:
            raise PrometheusError("Prometheus at %s answered %s with something that is not JSON" % (self.url, path))
        if not isinstance(answer, dict) or answer.get("status") != "success":
            raise PrometheusError("Prometheus refused %s: %s" % (
                path, answer.get("error", "no reason given") if isinstance(answer, dict) else "bad answer"))
        return answer.get("data")

    def query(self, expr, at):
        """[(labels, value)] of an instant vector query evaluated at ``at`` (unix seconds)."""
        data = self._get("/api/v1/query", {"query": expr, "time": "%.3f" % at})
        if not isinstance(data, dict) or data.get("resultType") != "vector":
            raise PrometheusError("Prometheus answered %s with no instant vector" % expr)
        samples = []
        for item in data.get("result", []):
            try:
                value = float(item["value"][1])
            except (KeyError, IndexError, TypeError, ValueError):
                continue
            samples.append((dict(item.get("metric", {})), value))
        return samples

    def alerts(self):
        """Prometheus's alerts (pending and firing), as /api/v1/alerts gives them."""
        data = self._get("/api/v1/alerts")
        if not isinstance(data, dict):
            raise PrometheusError("Prometheus answered /api/v1/alerts with no alert list")
        return [alert for alert in data.get("alerts", []) if isinstance(alert, dict)]


def _reason(reason):
    if isinstance(reason, ssl.SSLCertVerificationError):
        return "TLS verification failed (%s)" % (reason.verify_message or reason.reason or reason)
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason) or reason.__class__.__name__


def gather(prometheus, at):
    """Everything the page shows, read from ``prometheus`` at time ``at``."""
    raw = {key: prometheus.query(expr, at) for key, expr in QUERIES.items()}
    raw["alerts"] = prometheus.alerts()
    return raw


# --------------------------------------------------------------------------------------------------------------
# the fleet, from the raw series


def _severity_rank(severity):
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)


def _stream_key(labels):
    return tuple(labels.get(key, "") for key in STREAM_KEYS)


def _relation_alerts(relation, alerts):
    """The source/mirror alerts whose labels (site, account, stream, source, source_site, kind: those it has)
    all name ``relation``."""
    mine = dict(relation["labels"], source_site=relation["from"])
    found = []
    for alert in alerts:
        labels = alert["labels"]
        if labels.get("alertname") in RELATION_ALERTS and "site" in labels and all(
                labels[key] == mine.get(key) for key in RELATION_KEYS if key in labels):
            found.append(alert)
    return found


def _new_site(name):
    return {"name": name, "servers_up": 0, "servers_total": 0, "healthy": 0, "health_total": 0,
            "leaf_up": 0, "leaf_total": 0, "leaf_down": [], "lag": None, "age": None, "stale": [],
            "streams_aged": 0, "alerts": [], "known": False}


def _unique(samples, keys, pick=max):
    """``samples`` with one per value of ``keys`` (the labels Prometheus adds, job and instance, left out: two
    scrapes of the same collector give the same series twice); ``pick`` chooses among the values."""
    chosen = {}
    for labels, value in samples:
        key = tuple(labels.get(name, "") for name in keys)
        chosen[key] = (labels, pick(chosen[key][1], value)) if key in chosen else (labels, value)
    return list(chosen.values())


def build_fleet(raw, hub_site=None):
    """The sites, relations and firing alerts of the page, from ``raw`` (see gather())."""
    server_keys, stream_keys = ("site", "server"), ("site", "server") + STREAM_KEYS[1:]
    relation_keys = ("server",) + RELATION_KEYS
    raw = dict(raw, up=_unique(raw["up"], server_keys), healthy=_unique(raw["healthy"], server_keys),
               leaf=_unique(raw["leaf"], ("site", "server", "account")),
               lag=_unique(raw["lag"], relation_keys), active=_unique(raw["active"], relation_keys, min),
               age=_unique(raw["age"], stream_keys), age_threshold=_unique(raw["age_threshold"], stream_keys, min))
    sites = {}

    def site(name):
        if name not in sites:
            sites[name] = _new_site(name)
        return sites[name]

    for labels, value in raw["up"]:
        entry = site(labels.get("site", "?"))
        entry["known"] = True
        entry["servers_total"] += 1
        entry["servers_up"] += 1 if value >= 1 else 0
    for labels, value in raw["healthy"]:
        entry = site(labels.get("site", "?"))
        entry["health_total"] += 1
        entry["healthy"] += 1 if value >= 1 else 0
    for labels, value in raw["leaf"]:
        entry = site(labels.get("site", "?"))
        entry["leaf_total"] += 1
        if value >= 1:
            entry["leaf_up"] += 1
        else:
            entry["leaf_down"].append("%s (%s)" % (labels.get("server", "?"), labels.get("account", "?")))

    alerts = []
    for alert in raw["alerts"]:
        if alert.get("state") != "firing":
            continue
        labels = dict(alert.get("labels") or {})
        alerts.append({"labels": labels, "annotations": dict(alert.get("annotations") or {}),
                       "active_at": _parse_time(alert.get("activeAt")), "value": alert.get("value")})
    alerts.sort(key=lambda a: (_severity_rank(a["labels"].get("severity")), a["labels"].get("site", ""),
                               a["labels"].get("alertname", ""), a["active_at"] or 0))
    for alert in alerts:
        if alert["labels"].get("site"):
            site(alert["labels"]["site"])["alerts"].append(alert)

    active = {}
    for labels, value in raw["active"]:
        active[tuple(labels.get(key, "") for key in RELATION_KEYS)] = value
    relations = []
    for labels, value in raw["lag"]:
        origin = labels.get("source_site") or labels.get("site", "?")
        relation = {"labels": labels, "from": origin, "to": labels.get("site", "?"),
                    "stream": labels.get("stream", "?"), "source": labels.get("source", "?"),
                    "account": labels.get("account", ""), "kind": labels.get("kind", "source"), "lag": value,
                    "active": active.get(tuple(labels.get(key, "") for key in RELATION_KEYS))}
        relation["alerts"] = _relation_alerts(relation, alerts)
        relation["bad"] = bool(relation["alerts"]) or value > 0
        relations.append(relation)
        site(origin)
        entry = site(relation["to"])
        if entry["lag"] is None or value > entry["lag"][0]:
            entry["lag"] = (value, relation)
    relations.sort(key=lambda r: (r["to"], r["from"], r["account"], r["stream"], r["source"]))

    thresholds = {_stream_key(labels): value for labels, value in raw["age_threshold"]}
    for labels, value in raw["age"]:
        entry = site(labels.get("site", "?"))
        threshold = thresholds.get(_stream_key(labels))
        name = "%s/%s" % (labels.get("account", "?"), labels.get("stream", "?"))
        entry["streams_aged"] += 1
        if threshold is not None and value > threshold:
            entry["stale"].append(name)
        if entry["age"] is None or value > entry["age"][0]:
            entry["age"] = (value, name, threshold)

    collector = [value for _labels, value in raw["collector"]]
    if hub_site is None:
        # the collector's site: the one with servers and no leaf links of its own to the hub
        candidates = [name for name, entry in sites.items() if entry["known"] and not entry["leaf_total"]]
        if len(candidates) == 1:
            hub_site = candidates[0]
        elif "hub" in sites:
            hub_site = "hub"
    if hub_site is not None:
        site(hub_site)
    for entry in sites.values():
        entry["state"] = _site_state(entry, hub_site)
    return {"sites": [sites[name] for name in sorted(sites, key=lambda n: (n != hub_site, n))],
            "relations": relations, "alerts": alerts, "hub": hub_site,
            "collector_connected": (min(collector) >= 1) if collector else None,
            "pending": sum(1 for a in raw["alerts"] if a.get("state") == "pending")}


def _site_state(entry, hub_site):
    """bad / warn / ok / unknown, for colours."""
    severities = {alert["labels"].get("severity") for alert in entry["alerts"]}
    if not entry["known"]:
        return "bad" if "critical" in severities else "unknown"
    if (entry["servers_up"] < entry["servers_total"] or entry["healthy"] < entry["health_total"]
            or entry["leaf_up"] < entry["leaf_total"] or "critical" in severities):
        return "bad"
    if entry["alerts"] or entry["stale"] or (entry["lag"] and entry["lag"][0] > 0):
        return "warn"
    if entry["name"] != hub_site and not entry["leaf_total"] and hub_site is not None:
        return "warn"
    return "ok"


# --------------------------------------------------------------------------------------------------------------
# formatting


def _parse_time(text):
    """Unix seconds of an RFC 3339 time as Prometheus writes it (nanoseconds, Z), or None."""
    if not text:
        return None
    try:
        main_part, _sep, rest = text.partition(".")
        zone = ""
        if rest:
            digits = ""
            for index, char in enumerate(rest):
                if not char.isdigit():
                    zone = rest[index:]
                    break
                digits += char
            fraction = float("0." + digits) if digits else 0.0
        else:
            fraction = 0.0
            for marker in ("Z", "+", "-"):
                position = main_part.find(marker, 11)
                if position > 0:
                    main_part, zone = main_part[:position], main_part[position:]
                    break
        zone = "+00:00" if zone in ("Z", "z", "") else zone
        moment = datetime.datetime.fromisoformat(main_part + zone)
        return moment.timestamp() + fraction
    except ValueError:
        return None


def _utc(seconds):
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def duration(seconds):
    """'42 s', '5 min 3 s', '2 h 5 min', '3 d 4 h' (rounded down), for a count of seconds."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "?"
    seconds = int(max(0, seconds))
    if seconds < 60:
        return "%d s" % seconds
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return "%d min %d s" % (minutes, seconds) if seconds else "%d min" % minutes
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return "%d h %d min" % (hours, minutes) if minutes else "%d h" % hours
    days, hours = divmod(hours, 24)
    return "%d d %d h" % (days, hours) if hours else "%d d" % days


def _count(value):
    return ("%d" % value) if float(value).is_integer() else ("%.1f" % value)


def _e(value):
    return html.escape("" if value is None else str(value), quote=True)


def _badge(state, text):
    return '<span class="badge %s">%s</span>' % (state, _e(text))


# --------------------------------------------------------------------------------------------------------------
# the replication graph (SVG)

NODE_R = 54
SVG_W = 1160


def _layout(fleet):
    """{site: (x, y)} and the graph's height: the hub in the middle, the other sites around it on an ellipse
    (on one line when there are two or fewer)."""
    names = [entry["name"] for entry in fleet["sites"]]
    hub = fleet["hub"] if fleet["hub"] in names else None
    others = [name for name in names if name != hub]
    flat = len(others) <= 2
    height = 280 if flat else 640
    cx, cy = SVG_W / 2.0, height / 2.0 + (10 if flat else 0)
    rx, ry = SVG_W / 2.0 - NODE_R - 14, height / 2.0 - NODE_R - 40
    positions = {}
    if hub is not None:
        positions[hub] = (cx, cy)
    if flat:
        slots = {0: [], 1: [-rx] if hub is not None else [0.0], 2: [-rx, rx]}[len(others)]
        for name, dx in zip(others, slots):
            positions[name] = (cx + dx, cy)
    else:
        for index, name in enumerate(others):
            angle = math.pi + 2 * math.pi * index / len(others)
            positions[name] = (cx + rx * math.cos(angle), cy + ry * math.sin(angle))
    return positions, height


def _text(x, y, text, cls="", anchor="middle"):
    return '<text x="%.1f" y="%.1f" text-anchor="%s"%s>%s</text>' % (
        x, y, anchor, (' class="%s"' % cls) if cls else "", _e(text))


def _offsets(count):
    """Sideways offsets of ``count`` curves between the same two nodes (0 is the leaf link's straight line)."""
    return [((index // 2) + 1) * 46 * (1 if index % 2 == 0 else -1) for index in range(count)]


def render_graph(fleet):
    """The replication graph: sites as nodes, an arrow per source/mirror relation, leaf links hub<->site."""
    positions, height = _layout(fleet)
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" class="graph" role="img" width="%d" height="%d" '
             'viewBox="0 0 %d %d" aria-labelledby="graph-title">' % (SVG_W, height, SVG_W, height),
             '<title id="graph-title">Replication graph: %d sites, %d source/mirror relations</title>' % (
                 len(positions), len(fleet["relations"])),
             '<defs>%s%s</defs>' % (_marker("ok", "#455a64"), _marker("bad", "#d32f2f"))]
    hub = fleet["hub"]
    labels = []

    # leaf links: hub <-> site, straight
    for entry in fleet["sites"]:
        name = entry["name"]
        if name == hub or hub not in positions or not entry["leaf_total"]:
            continue
        (x1, y1), (x2, y2) = positions[hub], positions[name]
        length = math.hypot(x2 - x1, y2 - y1) or 1.0
        ux, uy = (x2 - x1) / length, (y2 - y1) / length
        down = entry["leaf_up"] < entry["leaf_total"]
        state = "down" if down else "up"
        parts.append('<g class="leaf-link %s" data-site="%s"><title>leaf links of %s to %s: %d of %d up</title>'
                     '<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/></g>' % (
                         state, _e(name), _e(name), _e(hub), entry["leaf_up"], entry["leaf_total"],
                         x1 + ux * NODE_R, y1 + uy * NODE_R, x2 - ux * NODE_R, y2 - uy * NODE_R))
        mx, my = (x1 + x2) / 2.0, (y1 + y2) / 2.0
        labels.append(_text(mx, my - 6, "leaf %d/%d up" % (entry["leaf_up"], entry["leaf_total"]),
                            "label leaf-label %s" % state))

    # relations: origin -> copying site, curved apart when several join the same two sites
    pairs = {}
    for relation in fleet["relations"]:
        pairs.setdefault(tuple(sorted((relation["from"], relation["to"]))), []).append(relation)
    for pair, group in sorted(pairs.items()):
        offsets = _offsets(len(group))
        for relation, offset in zip(group, offsets):
            state = "bad" if relation["bad"] else "ok"
            text = "%s \u2190 %s (%s)" % (relation["stream"], relation["source"], relation["kind"])
            if relation["lag"] > 0:
                text += " lag %s" % _count(relation["lag"])
            title = "%s: %s %s of %s/%s into %s/%s, lag %s" % (
                "lagging or inactive" if relation["bad"] else "in step", relation["account"], relation["kind"],
                relation["from"], relation["source"], relation["to"], relation["stream"], _count(relation["lag"]))
            head = '<g class="relation %s" data-from="%s" data-to="%s" data-stream="%s" data-source="%s" ' \
                   'data-kind="%s"><title>%s</title>' % (
                       "lagging" if relation["bad"] else "ok", _e(relation["from"]), _e(relation["to"]),
                       _e(relation["stream"]), _e(relation["source"]), _e(relation["kind"]), _e(title))
            if pair[0] == pair[1]:
                x, y = positions[pair[0]]
                index = group.index(relation)
                lift = NODE_R + 40 + 26 * index
                path = "M%.1f,%.1f C%.1f,%.1f %.1f,%.1f %.1f,%.1f" % (
                    x - 22, y - NODE_R + 6, x - 60, y - lift, x + 60, y - lift, x + 22, y - NODE_R + 4)
                lx, ly = x, y - 0.75 * lift - 6
            else:
                (x1, y1), (x2, y2) = positions[relation["from"]], positions[relation["to"]]
                (px, py), (qx, qy) = positions[pair[0]], positions[pair[1]]
                length = math.hypot(qx - px, qy - py) or 1.0
                nx, ny = -(qy - py) / length, (qx - px) / length  # normal of the sorted pair: same side both ways
                mx, my = (x1 + x2) / 2.0 + nx * offset, (y1 + y2) / 2.0 + ny * offset
                cx, cy = 2 * mx - (x1 + x2) / 2.0, 2 * my - (y1 + y2) / 2.0  # the curve passes through (mx, my)
                sx, sy = _towards((x1, y1), (cx, cy), NODE_R)
                ex, ey = _towards((x2, y2), (cx, cy), NODE_R + 2)
                path = "M%.1f,%.1f Q%.1f,%.1f %.1f,%.1f" % (sx, sy, cx, cy, ex, ey)
                side = 1 if offset > 0 else -1  # the label just outside the curve's apex
                dx, dy = nx * side, ny * side
                lx, ly = mx + dx * 10, my + dy * 10 + (13 if dy > 0.2 else -4 if dy < -0.2 else 4)
            parts.append('%s<path d="%s" marker-end="url(#arrow-%s)"/></g>' % (head, path, state))
            labels.append(_text(lx, ly, text, "label relation-label %s" % state))

    # sites
    for entry in fleet["sites"]:
        x, y = positions[entry["name"]]
        servers = ("servers %d/%d" % (entry["servers_up"], entry["servers_total"]) if entry["known"]
                   else "servers unknown")
        role = "hub" if entry["name"] == hub else ("leaf %d/%d" % (entry["leaf_up"], entry["leaf_total"])
                                                   if entry["leaf_total"] else "no leaf links")
        parts.append('<g class="site-node %s" data-site="%s"><title>%s: %s, %s</title>'
                     '<circle cx="%.1f" cy="%.1f" r="%d"/>%s%s%s</g>' % (
                         entry["state"], _e(entry["name"]), _e(entry["name"]), _e(servers), _e(role), x, y, NODE_R,
                         _text(x, y - 6, entry["name"][:16], "site-name"), _text(x, y + 12, servers, "site-detail"),
                         _text(x, y + 27, role, "site-detail")))
    parts.extend(labels)
    parts.append("</svg>")
    return "\n".join(parts)


def _marker(name, colour):
    return ('<marker id="arrow-%s" viewBox="0 0 10 10" refX="9" refY="5" markerUnits="userSpaceOnUse" '
            'markerWidth="13" markerHeight="13" orient="auto-start-reverse">'
            '<path d="M0,0 L10,5 L0,10 z" fill="%s"/></marker>' % (name, colour))


def _towards(point, target, distance):
    (x, y), (tx, ty) = point, target
    length = math.hypot(tx - x, ty - y) or 1.0
    return x + (tx - x) / length * distance, y + (ty - y) / length * distance


# --------------------------------------------------------------------------------------------------------------
# the page


def _template(name):
    if _resources is not None and hasattr(_resources, "files"):
        return _resources.files(__package__).joinpath("templates", name).read_text(encoding="utf-8")
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates", name), encoding="utf-8") as f:
        return f.read()


def _overall(fleet, error):
    if error is not None:
        return "unknown", "UNKNOWN", "Prometheus could not be read: the fleet's state is unknown"
    counts = {}
    for alert in fleet["alerts"]:
        severity = alert["labels"].get("severity", "none")
        counts[severity] = counts.get(severity, 0) + 1
    ordered = sorted(counts.items(), key=lambda item: (_severity_rank(item[0]), item[0]))
    summary = ", ".join("%d %s" % (count, severity) for severity, count in ordered)
    troubled = [entry["name"] for entry in fleet["sites"] if entry["state"] in ("bad", "unknown")]
    if counts.get("critical"):
        state, word = "bad", "CRITICAL"
    elif counts:
        state, word = "warn", "WARNING"
    elif troubled or fleet["collector_connected"] is False:
        state, word = "warn", "DEGRADED"  # something is down that no alert (yet) says
    else:
        state, word = "ok", "OK"
    firing = len(fleet["alerts"])
    text = ("%d firing alert%s: %s" % (firing, "" if firing == 1 else "s", summary)) if firing else \
        "no firing alerts"
    if troubled and not counts.get("critical"):
        text += "; trouble at %s" % ", ".join(troubled)
    if fleet["pending"]:
        text += " (%d pending)" % fleet["pending"]
    return state, word, text


def _severity_counts(fleet):
    cells = []
    counts = {}
    for alert in fleet["alerts"]:
        severity = alert["labels"].get("severity", "none")
        counts[severity] = counts.get(severity, 0) + 1
    for severity in sorted(set(SEVERITIES) | set(counts), key=lambda s: (_severity_rank(s), s)):
        cells.append('<div class="count sev-%s"><span class="n">%d</span> %s</div>' % (
            _e(severity), counts.get(severity, 0), _e(severity)))
    return "".join(cells)


def _sites_table(fleet):
    if not fleet["sites"]:
        return '<p class="empty">Prometheus has no nats_server_up series: no site is known.</p>'
    rows = []
    for entry in fleet["sites"]:
        if entry["known"]:
            servers = _badge("ok" if entry["servers_up"] == entry["servers_total"] else "bad",
                             "%d/%d up" % (entry["servers_up"], entry["servers_total"]))
        else:
            servers = _badge("unknown", "unknown")
        if entry["health_total"]:
            health = _badge("ok" if entry["healthy"] == entry["health_total"] else "bad",
                            "%d/%d healthy" % (entry["healthy"], entry["health_total"]))
        else:
            health = _badge("unknown", "no data")
        if entry["leaf_total"]:
            leaf = _badge("ok" if entry["leaf_up"] == entry["leaf_total"] else "bad",
                          "%d/%d up" % (entry["leaf_up"], entry["leaf_total"]))
        else:
            leaf = '<span class="muted">none declared</span>'
        if entry["name"] == fleet["hub"]:
            link = '<span class="muted">this is the hub</span>'
        elif not entry["leaf_total"]:
            link = _badge("unknown", "no leaf links declared")
        elif entry["leaf_up"] == entry["leaf_total"]:
            link = _badge("ok", "connected")
        elif entry["leaf_up"] == 0:
            link = _badge("bad", "DOWN") + ' <span class="detail">down: %s</span>' % _e(", ".join(entry["leaf_down"]))
        else:
            link = _badge("bad", "partly down") + ' <span class="detail">down: %s</span>' % _e(
                ", ".join(entry["leaf_down"]))
        alerts = ", ".join("%s (%s)" % (a["labels"].get("alertname", "?"), a["labels"].get("severity", "?"))
                           for a in entry["alerts"])
        rows.append('<tr class="site %s" data-site="%s"><th scope="row"><span class="dot %s"></span>%s</th>'
                    '<td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>' % (
                        entry["state"], _e(entry["name"]), entry["state"], _e(entry["name"]), servers, health, leaf,
                        link, _e(alerts) if alerts else '<span class="muted">none</span>'))
    return ('<table class="sites"><thead><tr><th>Site</th><th>Servers</th><th>healthz</th><th>Leaf links</th>'
            '<th>Link to the hub</th><th>Firing alerts</th></tr></thead><tbody>%s</tbody></table>' % "".join(rows))


def _relations_table(fleet):
    if not fleet["relations"]:
        return '<p class="empty">No source or mirror series (nats_stream_source_lag_messages).</p>'
    rows = []
    for relation in fleet["relations"]:
        reasons = sorted({a["labels"].get("alertname", "?") for a in relation["alerts"]})
        if relation["lag"] > 0 and not reasons:
            reasons = ["lag > 0"]
        state = _badge("bad", "LAGGING: " + ", ".join(reasons)) if relation["bad"] else _badge("ok", "in step")
        rows.append('<tr class="relation %s"><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>'
                    '<td class="num">%s</td><td class="num">%s</td><td>%s</td></tr>' % (
                        "lagging" if relation["bad"] else "ok", _e(relation["from"]), _e(relation["to"]),
                        _e(relation["account"]), _e(relation["stream"]), _e("%s of %s" % (relation["kind"],
                                                                                          relation["source"])),
                        _e(_count(relation["lag"])),
                        _e(duration(relation["active"]) + " ago") if relation["active"] is not None else "?", state))
    return ('<table class="relations"><thead><tr><th>From site</th><th>To site</th><th>Account</th><th>Stream</th>'
            '<th>Copies</th><th>Lag (messages)</th><th>Last active</th><th>State</th></tr></thead>'
            '<tbody>%s</tbody></table>' % "".join(rows))


def _freshness_table(fleet):
    rows = []
    for entry in fleet["sites"]:
        if entry["lag"] is None:
            lag = '<span class="muted">no sources</span>'
        else:
            value, relation = entry["lag"]
            lag = '%s <span class="detail">%s \u2190 %s/%s</span>' % (
                _badge("bad" if value > 0 else "ok", _count(value)), _e(relation["stream"]), _e(relation["from"]),
                _e(relation["source"]))
        if entry["age"] is None:
            age = '<span class="muted">no stream with messages</span>'
            threshold = '<span class="muted">-</span>'
        else:
            value, name, limit = entry["age"]
            over = limit is not None and value > limit
            age = '%s <span class="detail">%s</span>' % (_badge("bad" if over else "ok", duration(value)), _e(name))
            threshold = _e(duration(limit)) if limit is not None else '<span class="muted">none set</span>'
        if entry["stale"]:
            verdict = _badge("bad", "%d of %d over: %s" % (len(entry["stale"]), entry["streams_aged"],
                                                           ", ".join(entry["stale"])))
        elif entry["age"] is not None:
            verdict = _badge("ok", "within")
        else:
            verdict = '<span class="muted">-</span>'
        rows.append('<tr data-site="%s"><th scope="row">%s</th><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>' % (
            _e(entry["name"]), _e(entry["name"]), lag, age, threshold, verdict))
    if not rows:
        return '<p class="empty">No site is known.</p>'
    return ('<table class="freshness"><thead><tr><th>Site</th><th>Max source lag (messages)</th>'
            '<th>Newest message age (max)</th><th>Its threshold</th><th>Streams over threshold</th></tr></thead>'
            '<tbody>%s</tbody></table>' % "".join(rows))


def _alerts_table(fleet, now):
    if not fleet["alerts"]:
        return '<p class="empty ok-text">No alert is firing.</p>'
    rows = []
    for alert in fleet["alerts"]:
        labels, notes = alert["labels"], alert["annotations"]
        severity = labels.get("severity", "none")
        what = ", ".join("%s=%s" % (key, labels[key]) for key in ("server", "account", "stream", "source")
                         if labels.get(key))
        since = "?"
        if alert["active_at"]:
            since = '%s <span class="detail">(for %s)</span>' % (_e(_utc(alert["active_at"])),
                                                                 _e(duration(now - alert["active_at"])))
        rows.append('<tr class="alert sev-%s" data-alert="%s" data-site="%s"><td>%s</td><td>%s</td>'
                    '<td class="nowrap">%s</td><td>%s%s</td><td class="nowrap">%s</td></tr>' % (
                        _e(severity), _e(labels.get("alertname", "")), _e(labels.get("site", "")),
                        _badge("bad" if severity == "critical" else "warn" if severity == "warning" else "unknown",
                               severity), _e(labels.get("alertname", "?")),
                        _e(labels.get("site", "")) or '<span class="muted">fleet</span>',
                        _e(notes.get("summary") or notes.get("description") or ""),
                        (' <span class="detail">%s</span>' % _e(what)) if what else "", since))
    return ('<table class="alerts"><thead><tr><th>Severity</th><th>Alert</th><th>Site</th><th>Summary</th>'
            '<th>Firing since</th></tr></thead><tbody>%s</tbody></table>' % "".join(rows))


def render(fleet, now, prometheus_url, title, error=None):
    """The page's HTML. ``fleet`` is build_fleet()'s answer, or None with ``error`` when Prometheus was not read."""
    if fleet is None:
        fleet = {"sites": [], "relations": [], "alerts": [], "hub": None, "collector_connected": None, "pending": 0}
    state, word, summary = _overall(fleet, error)
    banners = []
    if error is not None:
        banners.append('<div class="banner unreachable" role="alert"><strong>Prometheus could not be read.</strong> '
                       '%s. This page holds no fleet data; nothing below says the fleet is fine.</div>' % _e(error))
    elif fleet["collector_connected"] is False:
        banners.append('<div class="banner unreachable" role="alert"><strong>The collector reaches none of the '
                       'hub\'s servers</strong> (nats_fleet_collector_connected is 0): the other sites are unknown.'
                       '</div>')
    elif fleet["collector_connected"] is None and not fleet["sites"]:
        banners.append('<div class="banner warn" role="alert"><strong>Prometheus has no fleet series.</strong> '
                       'Is the collector (nats-edge-monitor-exporter) scraped?</div>')
    if error is not None:
        body = ""
    else:
        body = _template("sections.html")
        body = string.Template(body).substitute(
            sites=_sites_table(fleet), graph=render_graph(fleet) if fleet["sites"] else
            '<p class="empty">No site to draw.</p>', relations=_relations_table(fleet),
            alerts=_alerts_table(fleet, now), freshness=_freshness_table(fleet),
            alert_count=len(fleet["alerts"]))
    return string.Template(_template("page.html")).substitute(
        title=_e(title), state=state, state_word=_e(word), summary=_e(summary), written=_e(_utc(now)),
        prometheus=_e(prometheus_url), counts=_severity_counts(fleet) if error is None else "",
        banners="\n".join(banners), body=body)


# --------------------------------------------------------------------------------------------------------------
# the command


def write_atomic(path, text, mode=0o644):
    """Write ``text`` to ``path`` through a temporary file in the same folder, renamed over it."""
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), suffix=".tmp", dir=folder)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
            os.fchmod(out.fileno(), mode)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def _parser():
    parser = argparse.ArgumentParser(
        prog="nats-edge-monitor-status",
        description="Write the fleet's status page (one static HTML file) from Prometheus's HTTP API.")
    parser.add_argument("--prometheus", required=True, metavar="URL",
                        help="Prometheus's base URL, https://host:9090 (http:// only with --insecure-plaintext)")
    parser.add_argument("--ca", metavar="PEM", help="CA certificate(s) that Prometheus's TLS certificate is "
                        "verified against (required for https)")
    parser.add_argument("--user", help="basic auth user")
    parser.add_argument("--password-file", metavar="FILE", help="file holding the basic auth password "
                        "(first line)")
    parser.add_argument("--output", required=True, metavar="PATH", help="the HTML file to write (atomically)")
    parser.add_argument("--title", default="NATS fleet status", help="the page's title")
    parser.add_argument("--hub-site", metavar="SITE", help="the hub's site (default: the one site with servers and "
                        "no leaf links of its own)")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                        help="timeout of each request to Prometheus (default 10)")
    parser.add_argument("--insecure-plaintext", action="store_true",
                        help="opt out of TLS: allow an http:// Prometheus URL (the password, if any, is sent in "
                        "clear)")
    return parser


def _read_password(path):
    with open(path, encoding="utf-8") as handle:
        return handle.readline().rstrip("\r\n")


def main(argv=None):
    parser = _parser()
    args = parser.parse_args(argv)
    parts = urllib.parse.urlsplit(args.prometheus)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        parser.error("--prometheus must be an https:// URL with a host")
    if parts.username or parts.password:
        parser.error("--prometheus must not carry credentials: use --user and --password-file")
    if parts.scheme == "http" and not args.insecure_plaintext:
        parser.error("--prometheus is plain http: use https (with --ca), or opt out of TLS explicitly with "
                     "--insecure-plaintext")
    if parts.scheme == "https" and not args.ca:
        parser.error("--ca is required to verify Prometheus's TLS certificate")
    if bool(args.user) != bool(args.password_file):
        parser.error("--user and --password-file go together")
    password = None
    if args.password_file:
        try:
            password = _read_password(args.password_file)
        except OSError as exc:
            parser.error("cannot read the password file %s: %s" % (args.password_file, exc.strerror or exc))
    if parts.scheme == "http" and args.user:
        print("nats-edge-monitor-status: warning: sending the basic auth password over plain http",
              file=sys.stderr)

    now = time.time()
    url = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    error = None
    fleet = None
    try:
        prometheus = Prometheus(url, ca=args.ca, user=args.user, password=password,
                                insecure_plaintext=args.insecure_plaintext, timeout=args.timeout)
        fleet = build_fleet(gather(prometheus, now), hub_site=args.hub_site)
    except PrometheusError as exc:
        error = str(exc)
    except (OSError, ssl.SSLError) as exc:  # the CA file: missing or not PEM
        error = "cannot use the CA file %s: %s" % (args.ca, _reason(exc))
    page = render(fleet, now, url, args.title, error=error)
    try:
        write_atomic(args.output, page)
    except OSError as exc:
        print("nats-edge-monitor-status: cannot write %s: %s" % (args.output, exc.strerror or exc), file=sys.stderr)
        return EXIT_USAGE
    if error is not None:
        print("nats-edge-monitor-status: %s; wrote %s saying so" % (error, args.output), file=sys.stderr)
        return EXIT_PROMETHEUS
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
