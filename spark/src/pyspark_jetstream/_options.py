"""The data source's options, sequence ranges and offsets: pure logic.

Everything here is plain Python (no Spark, no network), so it is tested
without either.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from urllib.parse import urlsplit


def read_text(path, error, what=None):
    """The text of the file ``path``; ``error`` (an exception class) is raised, naming ``what`` and the
    path, when it cannot be read."""
    try:
        with open(path) as handle:
            return handle.read()
    except OSError as exc:
        raise error("cannot read %s%s: %s" % (what + " " if what else "", path, exc.strerror or exc)) from exc


#: the options the data source knows; anything else is refused (typos are bugs)
KNOWN = {
    "servers": "NATS URLs, comma separated",
    "stream": "the stream to read, or several read side by side (comma separated: regional streams)",
    "domain": "JetStream domain of the stream",
    "api_prefix": "JetStream API prefix (another account's stream, imported under this prefix)",
    "deliver_prefix": "subject prefix for deliveries (the shared stream's deliver prefix)",
    "filter_subject": "read only messages on this subject (wildcards allowed)",
    "starting": "earliest (default) or latest: where a new read or query starts",
    "start_seq": "first stream sequence to read",
    "start_time": "first message stored at or after this time (RFC 3339)",
    "end_seq": "last stream sequence to read (batch; default: the last one when planned)",
    "partitions": "Spark partitions (batch: per read; streaming: per micro-batch)",
    "messages_per_partition": "with partitions unset: one partition per this many sequences",
    "max_messages_per_trigger": "streaming: at most this many messages per micro-batch",
    "json_schema": "parse the payload as JSON into a struct column `json` (DDL: 'site string, value double')",
    "creds": "creds file (user JWT and nkey seed), read where the query is planned",
    "nkey_seed": "nkey seed file",
    "user": "user name",
    "password": "password",
    "token": "token",
    "tls_ca": "CA certificate file (PEM); turns TLS on",
    "tls_cert": "client certificate file (PEM)",
    "tls_key": "client key file (PEM)",
    "tls_verify": "verify the server certificate (default true)",
    "tls_handshake_first": "TLS before the server's INFO (servers with handshake_first)",
    "timeout": "seconds for connecting and each API request (default 10)",
    "heartbeat": "seconds between idle heartbeats of the read consumers (default 1)",
    "batch_rows": "rows per Arrow batch handed to Spark (default 65536)",
}
SECRET = ("password", "token")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|seconds?|m|min|minutes?|h|hours?|d|days?)?\s*$")
_UNIT_SECONDS = {None: 1, "ms": 0.001, "s": 1, "sec": 1, "second": 1, "seconds": 1, "m": 60, "min": 60,
                 "minute": 60, "minutes": 60, "h": 3600, "hour": 3600, "hours": 3600, "d": 86400, "day": 86400,
                 "days": 86400}


class OptionError(ValueError):
    """A bad option, named with its value."""


def _int(options, name, default=None, minimum=1):
    value = options.get(name)
    if value in (None, ""):
        return default
    try:
        number = int(str(value).strip())
    except ValueError:
        raise OptionError("jetstream option %r: %r is not a whole number" % (name, value))
    if number < minimum:
        raise OptionError("jetstream option %r: must be at least %d, got %d" % (name, minimum, number))
    return number


def _float(options, name, default):
    value = options.get(name)
    if value in (None, ""):
        return default
    try:
        number = float(value)
    except ValueError:
        raise OptionError("jetstream option %r: %r is not a number" % (name, value))
    if math.isnan(number) or number <= 0 or math.isinf(number):
        raise OptionError("jetstream option %r: must be positive, got %r" % (name, value))
    return number


def _bool(options, name, default):
    value = options.get(name)
    if value in (None, ""):
        return default
    text = str(value).strip().lower()
    if text in ("true", "yes", "1", "on"):
        return True
    if text in ("false", "no", "0", "off"):
        return False
    raise OptionError("jetstream option %r: %r is not true or false" % (name, value))


def check_stream_name(name, what="jetstream option 'stream'"):
    """``name`` when it can name a stream (the server's rule: it becomes one token of the API subjects and a
    directory of the store)."""
    if not name or re.search(r"[\s.*>/\\]", name) or any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        raise OptionError("%s: %r is not a stream name: no whitespace, '.', '*', '>', '/' or '\\'" % (what, name))
    return name


def check_subject(subject, what, wildcards=False):
    """``subject`` when it is a NATS subject: tokens separated by dots, none empty, no whitespace; with
    ``wildcards``, the tokens '*' and '>' (the last), otherwise neither (a subject published to)."""
    text = str(subject)
    tokens = text.split(".")
    if not text or re.search(r"\s", text) or "" in tokens:
        raise OptionError("%s: %r is not a subject (tokens separated by dots, none empty, no whitespace)" % (what, text))
    for index, token in enumerate(tokens):
        if token in ("*", ">") and not wildcards:
            raise OptionError("%s: %r has a wildcard (%s); give the one subject to publish to" % (what, text, token))
        if token == ">" and index != len(tokens) - 1:
            raise OptionError("%s: %r is not a subject: '>' must be the last token" % (what, text))
    return text


def check_server_url(url, what="jetstream option 'servers'"):
    """``url`` when the connection can use it: nats://host:port or tls://host:port (nats:// when no scheme
    is given, 127.0.0.1 when no host, port 4222 when none)."""
    text = str(url).strip()
    try:
        parts = urlsplit(text if "://" in text else "nats://" + text)
        port = parts.port  # raises on a port that is not a number from 0 to 65535
    except ValueError:
        parts, port = None, None
    if parts is None or parts.scheme not in ("nats", "tls") or port == 0:
        raise OptionError("%s: %r is not a NATS server URL (like nats://hub-1:4222, or tls://hub-1:4222)" % (what, text))
    return text


def parse_time(text, what="time"):
    """An aware datetime from RFC 3339 text (a trailing Z, or no zone, means UTC)."""
    try:
        value = dt.datetime.fromisoformat(str(text).strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise OptionError("%s: %r is not an RFC 3339 time (like 2026-11-23T10:00:00Z)" % (what, text))
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return value


def rfc3339(value):
    return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_duration(text, what="duration"):
    """Seconds of '90s', '5m', '1 hour', '250ms' or a plain number of seconds."""
    match = _DURATION.match(str(text).lower())
    if not match:
        raise OptionError("%s: %r is not a duration (like 30s, 5m, 1h)" % (what, text))
    seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if seconds <= 0:
        raise OptionError("%s: %r must be longer than zero" % (what, text))
    return seconds


def stream_names(text):
    """The streams of the ``stream`` option: one name, or several separated by commas, each once."""
    names = [name.strip() for name in str(text).split(",") if name.strip()]
    if not names:
        raise OptionError("jetstream option 'stream' is required (or load('<stream>'))")
    for name in names:
        check_stream_name(name)
    twice = sorted(set(name for name in names if names.count(name) > 1))
    if twice:
        raise OptionError("jetstream option 'stream': %s named twice (each stream is read once)" % ", ".join(twice))
    return names


class ReadOptions(object):
    """Checked options of one read (batch) or query (streaming)."""

    def __init__(self, options):
        options = {str(k).lower(): v for k, v in dict(options).items()}
        unknown = sorted(set(options) - set(KNOWN) - {"path"})
        if unknown:
            raise OptionError("jetstream: unknown option(s) %s; known: %s" % (", ".join(unknown), ", ".join(sorted(KNOWN))))
        self.streams = stream_names(options.get("stream") or options.get("path") or "")
        servers = options.get("servers") or "nats://127.0.0.1:4222"
        self.servers = [check_server_url(s) for s in str(servers).split(",") if s.strip()]
        self.domain = options.get("domain") or None
        if self.domain and (re.search(r"[\s.*>]", self.domain)):
            raise OptionError("jetstream option 'domain': %r is not a JetStream domain (one token: no whitespace, "
                              "'.', '*' or '>')" % self.domain)
        self.api_prefix = options.get("api_prefix") or None
        if self.api_prefix:  # the API subjects follow it after a dot: a trailing one is dropped
            check_subject(str(self.api_prefix).rstrip("."), "jetstream option 'api_prefix'")
        if self.domain and self.api_prefix:
            raise OptionError("jetstream options 'domain' and 'api_prefix' exclude each other: "
                              "an api_prefix already names the domain's API")
        self.deliver_prefix = (options.get("deliver_prefix") or "_INBOX").rstrip(".")
        if any(t in ("*", ">", "") for t in self.deliver_prefix.split(".")) or re.search(r"\s", self.deliver_prefix):
            raise OptionError("jetstream option 'deliver_prefix': %r must be a subject without wildcards"
                              % self.deliver_prefix)
        self.filter_subject = options.get("filter_subject") or None
        if self.filter_subject:
            check_subject(self.filter_subject, "jetstream option 'filter_subject'", wildcards=True)
        starting = str(options.get("starting") or "earliest").strip().lower()
        if starting not in ("earliest", "latest"):
            raise OptionError("jetstream option 'starting': %r is not earliest or latest" % starting)
        self.starting = starting
        self.start_seq = _int(options, "start_seq")
        self.start_time = None
        if options.get("start_time"):
            self.start_time = parse_time(options["start_time"], "jetstream option 'start_time'")
        given = [n for n in ("start_seq", "start_time") if options.get(n)] + (
            ["starting"] if options.get("starting") else [])
        if len(given) > 1:
            raise OptionError("jetstream options %s exclude each other" % " and ".join(repr(g) for g in given))
        self.end_seq = _int(options, "end_seq")
        several = [n for n in ("start_seq", "end_seq") if options.get(n)]
        if several and len(self.streams) > 1:
            raise OptionError("jetstream option %r: a sequence belongs to one stream, and this read has %d (%s); "
                              "use start_time or starting" % (several[0], len(self.streams), ", ".join(self.streams)))
        self.partitions = _int(options, "partitions")
        self.messages_per_partition = _int(options, "messages_per_partition", 250000)
        self.max_messages_per_trigger = _int(options, "max_messages_per_trigger")
        self.json_schema = parse_ddl(options["json_schema"]) if options.get("json_schema") else None
        self.creds = options.get("creds") or None
        self.nkey_seed = options.get("nkey_seed") or None
        self.user = options.get("user") or None
        self.password = options.get("password") or None
        self.token = options.get("token") or None
        methods = [n for n in ("creds", "nkey_seed", "user", "token") if options.get(n)]
        if len(methods) > 1:
            raise OptionError("jetstream options %s exclude each other" % " and ".join(repr(m) for m in methods))
        self.tls = None
        tls_given = any(options.get(n) not in (None, "") for n in (
            "tls_ca", "tls_cert", "tls_key", "tls_verify", "tls_handshake_first"))
        if tls_given:
            self.tls = {"ca": options.get("tls_ca") or None, "cert": options.get("tls_cert") or None,
                        "key": options.get("tls_key") or None, "verify": _bool(options, "tls_verify", True),
                        "handshake_first": _bool(options, "tls_handshake_first", False)}
            if self.tls["key"] and not self.tls["cert"]:
                raise OptionError("jetstream option 'tls_key' needs 'tls_cert'")
        self.timeout = _float(options, "timeout", 10.0)
        self.heartbeat = _float(options, "heartbeat", 1.0)
        self.batch_rows = _int(options, "batch_rows", 65536)


# --------------------------------------------------------------------------
# ranges and offsets


def split_range(first, last, parts):
    """``parts`` contiguous (first, last) ranges covering first..last, sizes
    differing by at most one; fewer when there are fewer sequences."""
    total = last - first + 1
    if total <= 0:
        return []
    parts = max(1, min(int(parts), total))
    size, extra = divmod(total, parts)
    ranges, start = [], first
    for index in range(parts):
        stop = start + size + (1 if index < extra else 0) - 1
        ranges.append((start, stop))
        start = stop + 1
    return ranges


def partition_count(options, first, last):
    """How many partitions a read of first..last gets."""
    total = max(0, last - first + 1)
    if options.partitions:
        return options.partitions
    return max(1, min(64, -(-total // options.messages_per_partition)))


def offset(positions):
    """A streaming offset: {"streams": {stream: next sequence}}; every sequence of a stream before its next one is
    read."""
    return {"streams": {name: int(seq) for name, seq in positions.items()}}


def offset_seqs(value, streams):
    """{stream: next sequence} of an offset, for those of ``streams`` it holds (a stream added to the query since
    is not there yet). Offsets of one stream as earlier versions wrote them ({"stream", "seq"}) are read too."""
    if isinstance(value, dict) and "seq" in value and "streams" not in value:
        value = {"streams": {value.get("stream") or streams[0]: value["seq"]}}
    if not isinstance(value, dict) or not isinstance(value.get("streams"), dict):
        raise OptionError("jetstream: %r is not an offset of this source" % (value,))
    held = value["streams"]
    if held and not set(held) & set(streams):
        raise OptionError("jetstream: the checkpoint holds offsets of stream %s, the query reads %s; use a new "
                          "checkpoint location for other streams"
                          % (", ".join(repr(n) for n in sorted(held)), ", ".join(repr(n) for n in streams)))
    return {name: int(seq) for name, seq in held.items() if name in streams}


def end_offset(start_seq, last_seq, max_messages=None, cap=None):
    """The next micro-batch's end offset (exclusive) of one stream: everything up to the
    stream's last sequence, at most ``max_messages`` sequences, never past
    ``cap`` (Trigger.AvailableNow's target), never before ``start_seq``."""
    end = last_seq + 1
    if max_messages:
        end = min(end, start_seq + max_messages)
    if cap is not None:
        end = min(end, cap)
    return max(start_seq, end)


def end_offsets(starts, lasts, max_messages=None, caps=None):
    """{stream: end (exclusive)} of the next micro-batch over several streams (``starts``: their next sequences,
    ``lasts``: their last ones, ``caps``: Trigger.AvailableNow's targets). ``max_messages`` is shared fairly: a
    stream with less to read than its share leaves the rest to the others."""
    caps = caps or {}
    ends = {name: end_offset(start, lasts[name], None, caps.get(name)) for name, start in starts.items()}
    if not max_messages:
        return ends
    waiting = sorted(starts, key=lambda name: (ends[name] - starts[name], name))
    left = int(max_messages)
    for index, name in enumerate(waiting):
        share = left // (len(waiting) - index)
        take = min(ends[name] - starts[name], share)
        ends[name] = starts[name] + take
        left -= take
    return ends


# --------------------------------------------------------------------------
# JSON payloads into typed columns

_TYPES = {"string": "string", "varchar": "string", "text": "string", "boolean": "boolean", "bool": "boolean",
          "int": "int", "integer": "int", "long": "long", "bigint": "long", "float": "float",
          "double": "double", "timestamp": "timestamp", "date": "date"}
_FIELD = re.compile(r"^\s*`?([A-Za-z_][A-Za-z0-9_]*)`?\s*:?\s+([A-Za-z]+)\s*$")


def parse_ddl(text):
    """[(name, type)] of a flat DDL schema ('site string, value double')."""
    fields, seen = [], set()
    for part in str(text).split(","):
        if not part.strip():
            continue
        match = _FIELD.match(part)
        if not match or match.group(2).lower() not in _TYPES:
            raise OptionError("jetstream option 'json_schema': %r is not 'name type' with type one of %s"
                              % (part.strip(), ", ".join(sorted(set(_TYPES.values())))))
        name = match.group(1)
        if name in seen:
            raise OptionError("jetstream option 'json_schema': field %r appears twice" % name)
        seen.add(name)
        fields.append((name, _TYPES[match.group(2).lower()]))
    if not fields:
        raise OptionError("jetstream option 'json_schema' names no field")
    return fields


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_INT_RANGE = {"int": (-2 ** 31, 2 ** 31 - 1), "long": (-2 ** 63, 2 ** 63 - 1)}


def _micros(value):
    """Microseconds since the epoch of an RFC 3339 string or a number of seconds."""
    if isinstance(value, str):
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.timezone.utc)
        delta = moment - _EPOCH
        return (delta.days * 86400 + delta.seconds) * 1000000 + delta.microseconds
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return int(round(value * 1000000))
    raise ValueError("not a time")


def _convert(value, kind):
    """``value`` (decoded JSON) as ``kind``; ValueError when it is not one."""
    if kind == "string":
        if isinstance(value, str):
            return value
    elif kind == "double" or kind == "float":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
            if math.isfinite(number):
                return number
    elif kind in ("long", "int"):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            low, high = _INT_RANGE[kind]
            if low <= value <= high:
                return value
    elif kind == "boolean":
        if isinstance(value, bool):
            return value
    elif kind == "timestamp":
        try:
            return _micros(value)
        except (ValueError, TypeError, OverflowError):
            pass
    elif kind == "date":
        if isinstance(value, str):
            try:
                return dt.date.fromisoformat(value)
            except ValueError:
                pass
    raise ValueError(kind)


def _describe(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "the string %r" % (value[:40],)
    return "an array" if isinstance(value, list) else "an object"


try:  # the fast parser where it is installed
    from orjson import loads as _loads, JSONDecodeError as _JSONError
except ImportError:  # pragma: no cover - orjson is a dependency, but stay usable without it
    from json import loads as _json_loads, JSONDecodeError as _JSONError

    def _loads(data):
        return _json_loads(data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data)


def parse_json_rows(payloads, fields):
    """Typed values and errors of JSON payloads.

    Returns ({field name: [value or None]}, [error or None]): a missing field
    or JSON null is None (not an error); a value of another type, a payload
    that is not JSON or not an object makes the whole row an error (all its
    fields None) whose text names the field and what it held.
    Timestamps come out as microseconds since the epoch, dates as date."""
    columns = {name: [] for name, _kind in fields}
    errors = []
    for payload in payloads:
        try:
            document = _loads(payload)
        except (_JSONError, UnicodeDecodeError, ValueError) as exc:
            _row_error(columns, errors, "not JSON: %s" % str(exc).split("\n", maxsplit=1)[0][:80])
            continue
        if not isinstance(document, dict):
            _row_error(columns, errors, "not a JSON object but %s" % _describe(document))
            continue
        row, error = [], None
        for name, kind in fields:
            value = document.get(name)
            if value is None:
                row.append(None)
                continue
            try:
                row.append(_convert(value, kind))
            except ValueError:
                error = "field %r: expected %s, got %s" % (name, kind, _describe(value))
                break
        if error:
            _row_error(columns, errors, error)
            continue
        for (name, _kind), value in zip(fields, row):
            columns[name].append(value)
        errors.append(None)
    return columns, errors


def _row_error(columns, errors, message):
    for values in columns.values():
        values.append(None)
    errors.append(message)
