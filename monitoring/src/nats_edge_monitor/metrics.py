"""A collection (collect.Snapshot) and the exporter's config turned into the fleet's metric families.

``families(snapshot, config, now)`` is pure: it reads nothing but its arguments (and the drift file's text,
handed in). ``FleetMetrics`` is the prometheus_client collector that runs a collection per scrape.
"""

import datetime
import re

__all__ = ["MSG_AGE_METADATA", "parse_go_duration", "families", "drift_families", "FleetMetrics"]

MSG_AGE_METADATA = "io.nats.monitor.msg-age"

# Go's time.ParseDuration units, and the day and week that natscli's duration parser adds
_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0,
          "d": 86400.0, "w": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h|d|w)")


def _prometheus():
    try:
        from prometheus_client import core  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        raise RuntimeError("the exporter needs the prometheus-client library (pip package prometheus-client): %s"
                           % exc)
    return core


def parse_go_duration(text):
    """Seconds of a Go duration (``90s``, ``5m``, ``1h30m``, ``1.5h``, ``250ms``; also ``2d``, ``1w``); a leading
    ``+`` is allowed, ``0`` alone is zero. ValueError for anything else, negative durations included."""
    if not isinstance(text, str):
        raise ValueError("not a string: %r" % (text,))
    value = text.strip()
    if value.startswith("+"):
        value = value[1:]
    if value == "0":
        return 0.0
    if not value or value.startswith("-"):
        raise ValueError("not a positive duration: %r" % text)
    total, position = 0.0, 0
    while position < len(value):
        match = _PART.match(value, position)
        if not match:
            raise ValueError("not a duration: %r" % text)
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    return total


def _parse_time(text):
    """Epoch seconds of a server's RFC 3339 time (nanoseconds allowed), or None."""
    if not isinstance(text, str) or not text or text.startswith("0001-01-01"):
        return None
    match = re.match(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})$", text.strip())
    if not match:
        return None
    base = datetime.datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S")
    zone = match.group(3)
    offset = 0 if zone == "Z" else (1 if zone[0] == "+" else -1) * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    seconds = base.replace(tzinfo=datetime.timezone.utc).timestamp() - offset
    if match.group(2):
        seconds += float("0" + match.group(2))
    return seconds


def _number(value):
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class _Families(object):
    """Metric families by name, created on first use, in a fixed order."""

    def __init__(self, core):
        self.core = core
        self.items = {}

    def add(self, name, documentation, labels, values, value, kind="gauge"):
        if value is None:
            return
        family = self.items.get(name)
        if family is None:
            cls = {"gauge": self.core.GaugeMetricFamily, "counter": self.core.CounterMetricFamily}[kind]
            family = self.items[name] = cls(name, documentation, labels=list(labels))
        family.add_metric([str(v) for v in values], float(value))


class _Fleet(object):
    """Lookups from the config: sites of servers, account names."""

    def __init__(self, snapshot, config, last_active=None):
        self.snapshot, self.config = snapshot, config
        # when each copy last heard from its origin (epoch seconds), kept across collections: nats-server answers
        # -1 ("never") for a source it set up again while the origin was unreachable
        self.last_active = {} if last_active is None else last_active
        self.declared = dict((entry["server"], entry["site"]) for entry in config.get("servers", []))
        self.accounts = config.get("accounts", {})

    def site(self, name):
        """The config's site of a server, else the JetStream domain it reports, else ''."""
        if name in self.declared:
            return self.declared[name]
        info = self.snapshot.server_info(name)
        return info.get("domain") or ""

    def account(self, key):
        return self.accounts.get(key, key)


def _server_series(out, fleet, snapshot, config):
    answered = snapshot.answered() if snapshot.connected else set()
    collector_site = config.get("collector_site")
    names = set(fleet.declared) | answered
    for name in sorted(names):
        site = fleet.site(name)
        if not snapshot.connected and site != collector_site:
            continue  # unknown while the collector reaches no hub server
        out.add("nats_server_up", "1 if the server answered this collection, 0 if declared but silent",
                ("site", "server"), (site, name), 1 if name in answered else 0)
    for name in sorted(answered):
        site = fleet.site(name)
        labels, values = ("site", "server"), (site, name)
        varz_answer = snapshot.answers.get("varz", {}).get(name) or {}
        varz = varz_answer.get("data") if isinstance(varz_answer.get("data"), dict) else None
        info = snapshot.server_info(name)
        if varz is not None:
            cluster = (varz.get("cluster") or {}).get("name") or info.get("cluster") or ""
            out.add("nats_server_info", "the server's version and cluster", ("site", "server", "version", "cluster"),
                    (site, name, varz.get("version") or info.get("ver") or "", cluster), 1)
            out.add("nats_server_memory_bytes", "resident memory of the server process", labels, values,
                    _number(varz.get("mem")))
            out.add("nats_server_cpu_percent", "CPU use of the server process, percent of one core", labels, values,
                    _number(varz.get("cpu")))
            out.add("nats_server_connections", "client connections", labels, values, _number(varz.get("connections")))
            out.add("nats_server_slow_consumers", "slow consumers since the server started", labels, values,
                    _number(varz.get("slow_consumers")) or 0.0, kind="counter")
        health = snapshot.answers.get("healthz", {}).get(name)
        if health is not None:
            data = health.get("data") if isinstance(health.get("data"), dict) else {}
            status = data.get("status")
            if status is not None:
                out.add("nats_server_healthy", "1 if the server's healthz says ok", labels, values,
                        1 if status == "ok" else 0)
            elif health.get("error"):
                out.add("nats_server_healthy", "1 if the server's healthz says ok", labels, values, 0)


def _leaf_series(out, fleet, snapshot, config):
    """Links from the collector site's LEAFZ (a leaf connection's name is the remote server's name), and from the
    edge server's own LEAFZ where it answers."""
    seen = {}
    collector_site = config.get("collector_site")
    declared_edges = set(link["server"] for link in config.get("leaf_links", []))
    for name, answer in sorted(snapshot.answers.get("leafz", {}).items()):
        data = answer.get("data") if isinstance(answer.get("data"), dict) else {}
        hub_side = fleet.site(name) == collector_site
        for leaf in data.get("leafs") or []:
            if not isinstance(leaf, dict):
                continue
            account = fleet.account(leaf.get("account") or "")
            if hub_side:
                edge = leaf.get("name")
                if not edge:
                    continue
            elif name in declared_edges:
                edge = name
            else:
                continue
            rtt = None
            try:
                rtt = parse_go_duration(leaf.get("rtt")) if leaf.get("rtt") else None
            except ValueError:
                rtt = None
            key = (edge, account)
            if key not in seen or (seen[key] is None and rtt is not None) or (hub_side and rtt is not None):
                seen[key] = rtt
    links = dict(((link["server"], link["account"]), link["site"]) for link in config.get("leaf_links", []))
    if not snapshot.connected:
        return
    for edge, account in sorted(set(links) | set(seen)):
        site = links.get((edge, account)) or fleet.site(edge)
        labels, values = ("site", "server", "account"), (site, edge, account)
        out.add("nats_leaf_link_up", "1 if the leaf link is connected, 0 if declared but not seen", labels, values,
                1 if (edge, account) in seen else 0)
        if (edge, account) in seen:
            out.add("nats_leaf_link_rtt_seconds", "round-trip time of the leaf link", labels, values,
                    seen[(edge, account)])


def _stream_leader(stream, answering):
    cluster = stream.get("cluster") if isinstance(stream.get("cluster"), dict) else {}
    return cluster.get("leader") or answering


def _origin(source, site, sites=()):
    """(stream name, site) of a source or mirror: its domain from external.api ``$JS.<domain>.API``, or from an
    imported API prefix whose last token before ``API`` is a site of the fleet (``$JS.leafacc.spoke-1.API``)."""
    external = source.get("external") if isinstance(source.get("external"), dict) else {}
    api = external.get("api") or ""
    parts = api.split(".")
    if len(parts) == 3 and parts[0] == "$JS" and parts[2] == "API" and parts[1]:
        return source.get("name") or "", parts[1]
    if len(parts) > 3 and parts[-1] == "API" and parts[-2] in sites:
        return source.get("name") or "", parts[-2]
    return source.get("name") or "", site


def _jetstream_series(out, fleet, snapshot, config, now):
    labels = ("site", "server")
    streams_seen = set()
    for name, answer in sorted(snapshot.answers.get("jsz", {}).items()):
        data = answer.get("data") if isinstance(answer.get("data"), dict) else None
        if data is None or data.get("disabled"):
            continue
        site = fleet.site(name)
        values = (site, name)
        js_config = data.get("config") if isinstance(data.get("config"), dict) else {}
        out.add("nats_jetstream_storage_used_bytes", "file storage JetStream uses", labels, values,
                _number(data.get("storage")))
        limit = _number(js_config.get("max_storage"))
        out.add("nats_jetstream_storage_limit_bytes", "file storage JetStream may use (max_file_store)", labels,
                values, limit if limit is not None and limit > 0 else None)
        out.add("nats_jetstream_storage_reserved_bytes", "file storage the accounts reserve", labels, values,
                _number(data.get("reserved_storage")))
        out.add("nats_jetstream_memory_used_bytes", "memory storage JetStream uses", labels, values,
                _number(data.get("memory")))
        for account_detail in data.get("account_details") or []:
            account = fleet.account(account_detail.get("name") or account_detail.get("id") or "")
            for stream in account_detail.get("stream_detail") or []:
                if not isinstance(stream, dict) or not stream.get("name"):
                    continue
                leader = _stream_leader(stream, name)
                if leader != name:
                    continue  # its leader's answer has it
                key = (site, account, stream["name"])
                if key in streams_seen:
                    continue
                streams_seen.add(key)
                _stream_series(out, fleet, config, site, name, account, stream, now)


def _stream_series(out, fleet, config, site, server, account, stream, now):
    name = stream["name"]
    labels, values = ("site", "server", "account", "stream"), (site, server, account, name)
    state = stream.get("state") if isinstance(stream.get("state"), dict) else {}
    stream_config = stream.get("config") if isinstance(stream.get("config"), dict) else {}
    messages, size = _number(state.get("messages")), _number(state.get("bytes"))
    out.add("nats_stream_messages", "messages in the stream", labels, values, messages)
    out.add("nats_stream_bytes", "bytes in the stream", labels, values, size)
    for limit, used, maximum in (("bytes", size, _number(stream_config.get("max_bytes"))),
                                 ("messages", messages, _number(stream_config.get("max_msgs")))):
        if used is not None and maximum is not None and maximum > 0:
            out.add("nats_stream_limit_ratio", "used / the stream's limit, where the limit is set",
                    labels + ("limit",), values + (limit,), used / maximum)
    newest = _parse_time(state.get("last_ts"))
    if messages and newest is not None:
        out.add("nats_stream_newest_message_age_seconds", "seconds since the newest message was stored", labels,
                values, max(0.0, now - newest))
    metadata = stream_config.get("metadata") if isinstance(stream_config.get("metadata"), dict) else {}
    threshold = None
    if MSG_AGE_METADATA in metadata:
        try:
            threshold = parse_go_duration(metadata[MSG_AGE_METADATA])
        except ValueError:
            out.add("nats_fleet_config_errors", "1 for each setting that cannot be read (the series it feeds is "
                    "left out)", labels + ("field",), values + ("metadata." + MSG_AGE_METADATA,), 1)
            threshold = False
    if threshold is None:
        entry = config.get("thresholds", {}).get("%s/%s/%s" % (site, account, name))
        threshold = entry["max_age_seconds"] if entry else None
    if threshold is not None and threshold is not False:
        out.add("nats_stream_newest_age_threshold_seconds", "the newest message should be younger than this",
                labels, values, threshold)
    sources = [("mirror", stream.get("mirror"))] + [("source", item) for item in stream.get("sources") or []]
    for kind, source in sources:
        if not isinstance(source, dict) or not source.get("name"):
            continue
        origin, origin_site = _origin(source, site, set(fleet.declared.values()))
        source_labels = labels + ("source", "source_site", "kind")
        source_values = values + (origin, origin_site, kind)
        out.add("nats_stream_source_lag_messages", "messages of the origin not yet copied", source_labels,
                source_values, _number(source.get("lag")))
        active = source.get("active")
        if isinstance(active, (int, float)) and not isinstance(active, bool) and active >= 0:
            # nanoseconds since the source was last active (-1: never, also after the server set it up again)
            fleet.last_active[source_values] = now - active / 1e9
        if source_values in fleet.last_active:
            out.add("nats_stream_source_active_seconds", "seconds since the source or mirror was last active",
                    source_labels, source_values, max(0.0, now - fleet.last_active[source_values]))
        budget = config.get("budgets", {}).get("%s/%s/%s" % (origin_site, account, origin))
        if budget is not None:
            out.add("nats_stream_source_outage_budget_seconds", "how long the origin keeps its site's writes while "
                    "this copy cannot read them (the fleet's outage budget)", source_labels, source_values, budget)
    for consumer in stream.get("consumer_detail") or []:
        if not isinstance(consumer, dict) or not consumer.get("name"):
            continue
        consumer_labels = labels + ("consumer",)
        consumer_values = values + (consumer["name"],)
        out.add("nats_consumer_pending_messages", "messages the consumer has not delivered yet", consumer_labels,
                consumer_values, _number(consumer.get("num_pending")))
        out.add("nats_consumer_ack_pending_messages", "messages delivered and not acknowledged", consumer_labels,
                consumer_values, _number(consumer.get("num_ack_pending")))
        out.add("nats_consumer_redelivered_messages", "messages delivered more than once", consumer_labels,
                consumer_values, _number(consumer.get("num_redelivered")))


def _expiry_series(out, config, now):
    for entry in config.get("certificates", []):
        out.add("nats_fleet_certificate_expiry_seconds", "seconds until the server's certificate expires",
                ("site", "server"), (entry["site"], entry["server"]), entry["not_after"] - now)
    for entry in config.get("creds", []):
        out.add("nats_fleet_creds_expiry_seconds", "seconds until the user JWT of the creds expires",
                ("site", "account", "user"), (entry["site"], entry["account"], entry["user"]), entry["expires"] - now)


def drift_families(text):
    """(families of the drift file's text, error message or None). Only families named nats_fleet_drift_* are
    taken; a file that does not parse gives no families and the error."""
    from prometheus_client.parser import text_string_to_metric_families  # pylint: disable=import-outside-toplevel

    try:
        parsed = list(text_string_to_metric_families(text))
    except Exception as exc:  # pylint: disable=broad-except
        return [], "does not parse as Prometheus text: %s" % (str(exc)[:200] or type(exc).__name__)
    return [family for family in parsed if family.name.startswith("nats_fleet_drift_")], None


def families(snapshot, config, now, drift_text=None, drift_error=None, last_active=None):
    """The metric families of one collection. ``drift_text``: the drift file's content (None: no file);
    ``drift_error``: why the drift file could not be read; ``last_active``: a dict kept from one collection to the
    next (when each copy last heard from its origin), updated here."""
    core = _prometheus()
    out = _Families(core)
    out.add("nats_fleet_collector_connected", "1 if the collector reached a server of the collector site", (), (),
            1 if snapshot.connected else 0)
    out.add("nats_fleet_scrape_duration_seconds", "seconds the collection took", (), (), snapshot.duration)
    out.add("nats_fleet_servers_answered", "servers that answered this collection", (), (),
            len(snapshot.answered()) if snapshot.connected else 0)
    fleet = _Fleet(snapshot, config, last_active)
    _server_series(out, fleet, snapshot, config)
    if snapshot.connected:
        _leaf_series(out, fleet, snapshot, config)
        _jetstream_series(out, fleet, snapshot, config, now)
    _expiry_series(out, config, now)
    result = list(out.items.values())
    if config.get("drift_file"):
        drift, error = ([], drift_error) if drift_error else (drift_families(drift_text) if drift_text is not None
                                                              else ([], None))
        result.extend(drift)
        error_family = core.GaugeMetricFamily("nats_fleet_drift_file_error",
                                              "1 if the drift file exists but cannot be read or parsed")
        error_family.add_metric([], 1 if error else 0)
        result.append(error_family)
    if "nats_fleet_config_errors" not in out.items:
        result.append(core.GaugeMetricFamily("nats_fleet_config_errors", "1 for each setting that cannot be read "
                                             "(the series it feeds is left out)",
                                             labels=["site", "server", "account", "stream", "field"]))
    return result


def read_drift_file(path):
    """(text or None when the file is absent, error or None)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(), None
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeDecodeError) as exc:
        return None, "cannot read it: %s" % (getattr(exc, "strerror", None) or exc)


class FleetMetrics(object):
    """The prometheus_client collector: a collection per scrape through ``collector`` (collect.Collector)."""

    def __init__(self, collector, config, log=None):
        self.collector, self.config, self.log = collector, config, log
        self.last_active = {}

    def describe(self):
        return []

    def collect(self):
        import time  # pylint: disable=import-outside-toplevel

        snapshot = self.collector.collect()
        drift_text, drift_error = None, None
        if self.config.get("drift_file"):
            drift_text, drift_error = read_drift_file(self.config["drift_file"])
        result = families(snapshot, self.config, time.time(), drift_text, drift_error, self.last_active)
        if self.log is not None:
            for family in result:
                if family.name == "nats_fleet_drift_file_error" and family.samples and family.samples[0].value:
                    self.log.warning("drift file %s: %s", self.config["drift_file"],
                                     drift_error or drift_families(drift_text)[1])
        return iter(result)
