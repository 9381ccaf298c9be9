# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Key-value buckets and object stores as the streams they are. Private to the collection.

A bucket is a stream with a fixed mapping (as the nats clients create it):
``KV_<bucket>`` on ``$KV.<bucket>.>``, an object store ``OBJ_<bucket>`` on
``$O.<bucket>.C.>`` (chunks) and ``$O.<bucket>.M.>`` (metadata). This module turns
bucket options into the stream options of ``stream_model``, so buckets get the
stream manager's plan, diff, update rules and version awareness; and plans the
entries of a key-value bucket. Pure functions, no Ansible or NATS imports.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.stream_model import SOURCE_OPTIONS
from ansible_collections.nats_edge.fleet.plugins.module_utils._units import api_domain, duration_ns, size_bytes

BUCKET_RE = re.compile(r"^[a-zA-Z0-9_-]+$")
KEY_RE = re.compile(r"^[-/_=.a-zA-Z0-9]+$")
MAX_HISTORY = 64
MAX_REPLICAS = 5
# the shortest ttl a server keeps (its max_age), and the largest value it takes (its max_msg_size, an int32)
MIN_TTL_NS = 10**8
MAX_VALUE_SIZE = 2**31 - 1
# an object's name and a key become a subject ($O.<bucket>.M.<name in base64>, $KV.<bucket>.<key>), which a
# server takes only within its protocol line (4 KiB, with the reply and the domain's API prefix): longer names
# close the connection halfway through a write
MAX_NAME_BYTES = 1024
OPERATION = "KV-Operation"
DELETED = ("DEL", "PURGE")
# a value's own TTL (nats-server 2.11+, on a bucket with per_key_ttl), and the marker a server leaves where a
# limit or a TTL removed a key (limit_marker_ttl): the key is gone, as after a delete
TTL_HEADER = "Nats-TTL"
MARKER_HEADER = "Nats-Marker-Reason"
TWO_MINUTES_NS = 120 * 10**9

_COPY = dict(name=dict(type="str", required=True), domain=dict(type="str"),
             external=dict(type="dict", options=dict(api=dict(type="str", required=True),
                                                     deliver=dict(type="str", default=""))))

# where a key-value bucket's copy starts and which keys it takes: the stream's own options (see _kv_copy)
_KV_COPY = dict(copy.deepcopy(_COPY), **dict((key, copy.deepcopy(SOURCE_OPTIONS[key])) for key in (
    "start_seq", "start_time", "filter_subject", "subject_transforms")))

# Options every bucket kind takes (the object store's as well as the key-value bucket's).
BUCKET_OPTIONS = dict(
    description=dict(type="str"),
    ttl=dict(type="raw"),
    max_bytes=dict(type="raw"),
    storage=dict(type="str", choices=["file", "memory"]),
    replicas=dict(type="int"),
    placement=dict(type="dict", options=dict(cluster=dict(type="str"), tags=dict(type="list", elements="str"),
                                             preferred=dict(type="str"))),
    compression=dict(type="bool"),
    metadata=dict(type="dict"),
    mirror=dict(type="dict", options=copy.deepcopy(_COPY), mutually_exclusive=[["domain", "external"]]),
    promote=dict(type="bool"),
)

KV_OPTIONS = dict(
    copy.deepcopy(BUCKET_OPTIONS),
    mirror=dict(type="dict", options=copy.deepcopy(_KV_COPY), mutually_exclusive=[["domain", "external"]]),
    history=dict(type="int"),
    max_value_size=dict(type="raw"),
    republish=dict(type="dict", options=dict(src=dict(type="str"), dest=dict(type="str", required=True),
                                             headers_only=dict(type="bool"))),
    per_key_ttl=dict(type="bool"),
    limit_marker_ttl=dict(type="raw"),
    sources=dict(type="list", elements="dict", options=copy.deepcopy(_KV_COPY),
                 mutually_exclusive=[["domain", "external"]]),
    entries=dict(type="dict"),
    entry_ttls=dict(type="dict"),
    exclusive=dict(type="bool"),
)

# one bucket of the module's buckets list, and the module's options: the one definition of what a bucket takes
# (the fleet's checks read it too)
ITEM = dict(name=dict(type="str", required=True), state=dict(type="str", choices=["present", "absent"]))
ITEM.update(copy.deepcopy(KV_OPTIONS))
ARGUMENT_SPEC = dict(
    copy.deepcopy(KV_OPTIONS),
    name=dict(type="str"),
    state=dict(type="str", choices=["present", "absent"], default="present"),
    buckets=dict(type="list", elements="dict", options=ITEM),
)


class BucketError(NatsEdgeError, ValueError):
    """Input that cannot become a bucket, worded for the user."""


def check_bucket(kind, name):
    if not isinstance(name, str) or not BUCKET_RE.match(name):
        raise BucketError("%s bucket name: %r is not valid; use letters, digits, '-' and '_'" % (kind, name))
    return name


def check_key(bucket, key):
    if isinstance(key, (bool, int, float)) or key is None:
        # YAML reads an unquoted yes, no, on, off, true, false, ~ or number as such, not as text
        raise BucketError("bucket %r: entries: the key %r is %s, not text (YAML reads an unquoted yes, no, on, off, "
                          "true, false, ~ or number as one): quote it, as %s" % (
                              bucket, key, _a_kind(key), "'yes' or 'on'" if isinstance(key, bool) else "'null'" if key is None
                              else "'%s'" % key))
    if not isinstance(key, str) or not KEY_RE.match(key) or key.startswith(".") or key.endswith(".") or ".." in key:
        raise BucketError("bucket %r: entries: %r is not a valid key; use letters, digits and '-', '/', '_', '=', "
                          "'.' (not first or last, nor two in a row)" % (bucket, key))
    if len(key) > MAX_NAME_BYTES:
        raise BucketError("bucket %r: entries: a key of %d characters is too long; a key has at most %d (%s...)" % (
            bucket, len(key), MAX_NAME_BYTES, key[:20]))
    return key


# what YAML gave, in words (bool before int: a boolean is an int to Python)
_KINDS = ((type(None), "null"), (bool, "a boolean"), ((int, float), "a number"), (dict, "a mapping"))


def _a_kind(value):
    return next((kind for types, kind in _KINDS if isinstance(value, types)), "a %s" % type(value).__name__)


def _count(bucket, field, value, low, high, allowed):
    """An int option within [low, high] (``low`` when left out), a boolean refused (true is not 1); ``allowed``
    says what is, with the bounds as %d and %d."""
    if value is None:
        return low
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BucketError("bucket %r: %s: %r; %s (left out, %d)" % (bucket, field, value, allowed % (low, high), low))
    return value


def _size(bucket, field, value, most=None):
    """A size option in bytes (-1, unlimited, when left out; 0 is unlimited too)."""
    if value is None:
        return -1
    try:
        size = size_bytes(value)
    except ValueError as exc:
        raise BucketError("bucket %r: %s: %s" % (bucket, field, exc)) from exc
    if most is not None and size > most:
        raise BucketError("bucket %r: %s: %r is larger than a server takes (%d bytes)" % (bucket, field, value, most))
    return size or -1


def _ttl(bucket, value, what):
    """A bucket's ttl in ns (0: forever); a server keeps nothing for less than 100ms."""
    ttl_ns = _duration(bucket, "ttl", value) if value is not None else 0
    if 0 < ttl_ns < MIN_TTL_NS:
        raise BucketError("bucket %r: ttl: %r: %s lives at least 100ms; use 100ms or more, or 0 to keep %ss "
                          "forever" % (bucket, value, what, what.split()[-1]))
    return ttl_ns


def _api_domain(api):
    return api_domain((api or "").rstrip("."))


def _check_not_itself(bucket, field, given, domain):
    """A bucket cannot copy itself: same name in the same domain (no domain or external, or the task's domain)."""
    if given.get("name") != bucket:
        return
    api = (given.get("external") or {}).get("api")
    origin = given.get("domain") or _api_domain(api)
    if (not given.get("domain") and not api) or (domain and origin == domain):
        raise BucketError("bucket %r: %s: names this bucket itself (%s); a copy takes a bucket of another domain "
                          "(domain) or account (external)" % (
                              bucket, field, "in domain %r" % origin if origin else "in the same domain"))


def _copy_of(prefix, given):
    """A mirror or source entry of the stream behind a bucket: its origin's stream and where that is."""
    entry = {"name": prefix + given["name"]}
    if given.get("domain"):
        entry["domain"] = given["domain"]
    if given.get("external"):
        entry["external"] = dict(given["external"])
    return entry


_KEY_TOKEN = re.compile(r"^[-/_=a-zA-Z0-9]+$")


def _kv_subject(bucket, field, owner, value, dest=False):
    """The subject of ``value`` among the keys of bucket ``owner``: a key pattern (``site.*``, ``config.>``,
    ``fleet``) goes under ``$KV.<owner>.``; a subject that already starts with ``$KV.`` must be one of its keys.
    A transform's ``dest`` may hold the server's mapping functions (``{{wildcard(1)}}``), checked by the stream."""
    if not isinstance(value, str) or not value.strip():
        raise BucketError("bucket %r: %s: %r is not a key pattern" % (bucket, field, value))
    prefix = "$KV.%s." % owner
    if value.startswith("$KV."):
        if not value.startswith(prefix) or value == prefix:
            raise BucketError("bucket %r: %s: %r is not under %s (the keys of bucket %r); write a key pattern such as "
                              "'site.*', or a subject under %s" % (bucket, field, value, prefix + ">", owner, prefix))
        value = value[len(prefix):]
    tokens = value.split(".")
    for index, token in enumerate(tokens):
        if dest and token and not re.search(r"\s", token):
            continue
        if not (_KEY_TOKEN.match(token) or token == "*" or (token == ">" and index == len(tokens) - 1)):
            raise BucketError("bucket %r: %s: %r is not a key pattern; use keys' tokens (letters, digits, '-', '/', "
                              "'_', '='), '*' for one token and '>' last for the rest" % (bucket, field, value))
    return prefix + value


def _as_dest(bucket, pattern):
    """The transform destination under ``$KV.<bucket>.`` that keeps the keys a pattern matches (``$KV.<origin>.``
    replaced): its n-th ``*`` becomes ``{{wildcard(n)}}``, as the server maps subjects."""
    tokens, wildcards = [], 0
    for token in pattern.split(".")[2:]:
        if token == "*":
            wildcards += 1
            token = "{{wildcard(%d)}}" % wildcards
        tokens.append(token)
    return "$KV.%s.%s" % (bucket, ".".join(tokens))


def _kv_copy(bucket, field, given, source):
    """A key-value bucket's mirror or (``source``) source entry: where copying starts (start_seq, start_time, as a
    stream's) and which keys it takes. ``filter_subject`` is a key pattern (or a subject under the origin's
    ``$KV.<origin>.``); a source of another name needs its keys moved under this bucket's subjects, so its filter
    becomes the source of that subject transform (the server takes no filter next to transforms).
    ``subject_transforms`` of a source map the origin's keys (``src``) to this bucket's (``dest``)."""
    origin = given["name"]
    entry = _copy_of("KV_", given)
    for key in ("start_seq", "start_time"):
        if given.get(key) is not None:
            entry[key] = given[key]
    wanted, transforms = given.get("filter_subject"), given.get("subject_transforms")
    if wanted and transforms:
        raise BucketError("bucket %r: %s: filter_subject and subject_transforms cannot be combined (the source of each "
                          "transform filters the keys)" % (bucket, field))
    if transforms:
        if not source:
            raise BucketError("bucket %r: %s.subject_transforms: a mirror keeps its origin's keys as they are (clients "
                              "read a copy under its origin's subjects); use filter_subject to take some keys, or "
                              "sources to move keys" % (bucket, field))
        entry["subject_transforms"] = [dict(
            src=_kv_subject(bucket, "%s.subject_transforms[%d].src" % (field, index), origin, item.get("src")),
            dest=_kv_subject(bucket, "%s.subject_transforms[%d].dest" % (field, index), bucket, item.get("dest"),
                             dest=True)) for index, item in enumerate(transforms)]
    elif wanted:
        subject = _kv_subject(bucket, field + ".filter_subject", origin, wanted)
        if source and origin != bucket:
            entry["subject_transforms"] = [{"src": subject, "dest": _as_dest(bucket, subject)}]
        else:
            entry["filter_subject"] = subject
    elif source and origin != bucket:
        # a source bucket's keys land under this bucket's subjects
        entry["subject_transforms"] = [{"src": "$KV.%s.>" % origin, "dest": "$KV.%s.>" % bucket}]
    return entry


def kv_stream(bucket, options, domain=None):
    """The jetstream_stream item of a key-value bucket (nats' own mapping), every option checked.

    Defaults are those of the nats clients, applied whether the bucket is new or
    not: a bucket declared without ``history`` keeps one value per key. ``domain``: the
    task's JetStream domain (left out: ``options["domain"]``, the single form's), to
    refuse a copy of the bucket itself."""
    check_bucket("key-value", bucket)
    history = _count(bucket, "history", options.get("history"), 1, MAX_HISTORY, "a key keeps %d to %d values")
    ttl_ns = _ttl(bucket, options.get("ttl"), "a value")
    item = {
        "name": "KV_" + bucket,
        "max_msgs_per_subject": history,
        "max_age": ttl_ns // 10**9 if ttl_ns % 10**9 == 0 else "%dns" % ttl_ns,
        "max_bytes": _size(bucket, "max_bytes", options.get("max_bytes")),
        "max_msg_size": _size(bucket, "max_value_size", options.get("max_value_size"), MAX_VALUE_SIZE),
        "storage": options.get("storage") or "file",
        "replicas": _count(bucket, "replicas", options.get("replicas"), 1, MAX_REPLICAS, "use %d to %d"),
        "allow_rollup": True,
        "deny_delete": True,
        "deny_purge": False,
        "allow_direct": True,
        "discard": "new",
        # a short ttl also bounds how long a duplicate is remembered
        "duplicate_window": "%dns" % (min(ttl_ns, TWO_MINUTES_NS) if ttl_ns else TWO_MINUTES_NS),
    }
    _common(bucket, item, options)
    if options.get("republish"):
        republish = dict((k, v) for k, v in options["republish"].items() if v is not None)
        republish.setdefault("src", "$KV.%s.>" % bucket)
        item["republish"] = republish
    if options.get("per_key_ttl") is not None:
        item["allow_msg_ttl"] = options["per_key_ttl"]
    if options.get("limit_marker_ttl") is not None:
        item["subject_delete_marker_ttl"] = options["limit_marker_ttl"]
    _check_copies(bucket, options, options.get("domain") if domain is None else domain)
    if options.get("mirror"):
        if options.get("sources"):
            raise BucketError("bucket %r: mirror and sources cannot be combined" % bucket)
        item["mirror"] = _kv_copy(bucket, "mirror", options["mirror"], source=False)
        item["mirror_direct"] = True
        # a mirror stores what its origin accepted: nats-server 2.10+ keeps no
        # duplicate window on it (asking for one would never be applied)
        del item["duplicate_window"]
    else:
        item["subjects"] = ["$KV.%s.>" % bucket]
        if options.get("sources") is not None:
            item["sources"] = [_kv_copy(bucket, "sources[%d]" % index, entry, source=True)
                               for index, entry in enumerate(options["sources"])]
    return item


def object_store_stream(bucket, options, domain=None, sealed=False):
    """The jetstream_stream item of an object store (nats' own mapping), every option checked (``domain`` as
    for kv_stream). ``sealed``: the item of a store that is sealed (on the server, or by this run once its objects
    are written: see seal_item), with what nats-server forces on a sealed stream (no rollups, no ttl) rather than
    what a store that takes writes needs, so that the stream model finds nothing to change on it."""
    check_bucket("object store", bucket)
    ttl_ns = _ttl(bucket, options.get("ttl"), "an object")
    if options.get("sealed") or sealed:
        _check_sealed(bucket, options, ttl_ns, sealed)
    item = {
        "name": "OBJ_" + bucket,
        "max_age": ttl_ns // 10**9 if ttl_ns % 10**9 == 0 else "%dns" % ttl_ns,
        "max_bytes": _size(bucket, "max_bytes", options.get("max_bytes")),
        "storage": options.get("storage") or "file",
        "replicas": _count(bucket, "replicas", options.get("replicas"), 1, MAX_REPLICAS, "use %d to %d"),
        "allow_rollup": True,
        "allow_direct": True,
        "discard": "new",
    }
    _common(bucket, item, options)
    _check_copies(bucket, options, options.get("domain") if domain is None else domain)
    if options.get("mirror"):
        item["mirror"] = _copy_of("OBJ_", options["mirror"])
        item["mirror_direct"] = True
    else:
        item["subjects"] = ["$O.%s.C.>" % bucket, "$O.%s.M.>" % bucket]
    if sealed:
        # nats-server turns rollups off when it seals a stream (and deny_delete, deny_purge on): left out
        del item["allow_rollup"]
        item["sealed"] = True
    return item


def _check_sealed(bucket, options, ttl_ns, live):
    """What a sealed store (``sealed: true``, or ``live``: sealed on the server) cannot have."""
    why = "the store is sealed" if live and not options.get("sealed") else "sealed"
    if options.get("sealed") is False and live:
        raise BucketError("object store %r is sealed, and sealed: false cannot unseal it (nats-server never unseals a "
                          "stream): set sealed: true or leave it out" % bucket)
    if ttl_ns:
        raise BucketError("bucket %r: ttl: %r: %s: a sealed store keeps its objects for good (nats-server sets its "
                          "ttl to 0 when it seals it): leave ttl out" % (bucket, options.get("ttl"), why))
    if options.get("mirror"):
        raise BucketError("bucket %r: sealed: a copy (mirror) follows its origin and is read-only already: seal "
                          "its origin %r instead" % (bucket, options["mirror"]["name"]))


def seal_item(bucket):
    """The stream item that seals an object store (nats' ObjectStore.Seal: its stream's config with sealed set),
    applied after the run's objects are written; the store must exist (nats-server seals only on an update)."""
    return {"name": "OBJ_" + bucket, "sealed": True, "state": "present", "on_immutable_change": "fail",
            "allow_data_loss": False}


def _check_copies(bucket, options, domain):
    if options.get("mirror"):
        if options.get("promote"):
            raise BucketError("bucket %r: promote makes a copy a bucket of its own: leave out mirror to promote it, "
                              "or leave out promote to keep it a copy" % bucket)
        _check_not_itself(bucket, "mirror", options["mirror"], domain)
    for index, source in enumerate(options.get("sources") or []):
        _check_not_itself(bucket, "sources[%d]" % index, source, domain)


def _common(bucket, item, options):
    for key in ("description", "metadata", "placement"):
        if options.get(key) is not None:
            item[key] = options[key]
    if options.get("compression") is not None:
        item["compression"] = "s2" if options["compression"] else "none"


def _duration(bucket, field, value):
    try:
        return duration_ns(value)
    except ValueError as exc:
        raise BucketError("bucket %r: %s: %s" % (bucket, field, exc)) from exc


# --------------------------------------------------------------------------
# entries


def encode_value(bucket, key, value, field="entries"):
    """The bytes stored for a declared value: strings as they are, anything else as JSON (null refused: it is
    what YAML makes of a value left empty). ``field`` names the value in messages (``entries.<key>``)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if value is None:
        raise BucketError("bucket %r: %s: null is not a value (YAML reads an empty value or ~ as null): write '' "
                          "for an empty value or 'null' for that text%s" % (
                              bucket, field if field != "entries" else "entries.%s" % key,
                              "; to delete the key, leave it out and set exclusive: true" if field == "entries" else ""))
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    except (TypeError, ValueError) as exc:
        raise BucketError("bucket %r: %s: cannot store %r as JSON (%s)" % (
            bucket, field if field != "entries" else "entries.%s" % key, value, exc)) from exc


def checked_entries(bucket, entries):
    """{key: bytes} of the declared entries: every key text and valid, every value storable."""
    return dict((check_key(bucket, key), encode_value(bucket, key, value)) for key, value in (entries or {}).items())


def ttl_seconds(text):
    """A Nats-TTL header as seconds (-1: never), as the server reads it: ``never``, a Go duration or a number of
    seconds; None when it is none of them (the server ignores such a header)."""
    text = (text or "").strip()
    if text.lower() == "never":
        return -1
    if text.isdigit():
        return int(text)
    try:
        return duration_ns(text) // 10**9
    except ValueError:
        return None


def checked_entry_ttls(bucket, options):
    """{key: Nats-TTL text} of ``entry_ttls``: each key one of ``entries``, the bucket declared with
    ``per_key_ttl``, each TTL ``never`` or whole seconds, at least 1s (the server's least) and, where a key keeps
    more than one value, not shorter than the bucket's ``limit_marker_ttl`` (the server would raise it to that on
    every write, so it would never match)."""
    given = options.get("entry_ttls")
    if given is None:
        return {}
    if options.get("entries") is None:
        raise BucketError("bucket %r: entry_ttls needs entries: a TTL belongs to a value the task writes" % bucket)
    if not options.get("per_key_ttl"):
        raise BucketError("bucket %r: entry_ttls needs per_key_ttl: true (a server stores a value's own TTL only in "
                          "a bucket that allows it, nats-server 2.11 or later)" % bucket)
    # the server raises a value's TTL to the marker's where a key keeps more than one value (stream.go)
    marker_ns = _duration(bucket, "limit_marker_ttl", options["limit_marker_ttl"]) if options.get(
        "limit_marker_ttl") is not None and (options.get("history") or 1) != 1 else 0
    out = {}
    for key, value in given.items():
        where = "bucket %r: entry_ttls.%s" % (bucket, key)
        if not isinstance(key, str) or key not in options["entries"]:
            raise BucketError("%s: %r is not a key of entries; a TTL belongs to a value the task writes" % (
                where, key))
        if isinstance(value, str) and value.strip().lower() == "never":
            out[key] = "never"
            continue
        try:
            ns = duration_ns(value)
        except ValueError as exc:
            raise BucketError("%s: %s" % (where, exc)) from exc
        if ns < 10**9 or ns % 10**9:
            raise BucketError("%s: %r: a value lives whole seconds, at least 1s (or never); the server refuses "
                              "anything else" % (where, value))
        if ns < marker_ns:
            raise BucketError("%s: %r is shorter than the bucket's limit_marker_ttl %r, which the server makes it on "
                              "every write where a key keeps more than one value (history %s)" % (
                                  where, value, options["limit_marker_ttl"], options.get("history")))
        out[key] = str(ns // 10**9)
    return out


def _gone(headers):
    headers = headers or {}
    return headers.get(OPERATION) in DELETED or bool(headers.get(MARKER_HEADER))


def current_entries(bucket, messages):
    """{key: (bytes, TTL in seconds or None)} of the last message of every key that is not deleted."""
    prefix = "$KV.%s." % bucket
    entries = {}
    for subject, headers, data, _seq in messages:
        if not subject.startswith(prefix) or _gone(headers):
            continue
        ttl = (headers or {}).get(TTL_HEADER)
        entries[subject[len(prefix):]] = (data, ttl_seconds(ttl) if ttl else None)
    return entries


def plan_entries(bucket, desired, current, exclusive, ttls=None):
    """(puts {key: bytes}, deletes [key]) that bring ``current`` ({key: (bytes, TTL)}, current_entries) to
    ``desired``: a value that differs, or whose TTL differs from ``ttls`` (checked_entry_ttls; a key without one
    there should have none), is written."""
    wanted = checked_entries(bucket, desired)
    ttls = ttls or {}
    puts = dict((key, value) for key, value in wanted.items()
                if current.get(key) != (value, ttl_seconds(ttls[key]) if key in ttls else None))
    deletes = sorted(key for key in current if key not in wanted) if exclusive else []
    return puts, deletes


def shown(value):
    """A stored value as a diff shows it: text when it is text, else base64."""
    if value is None:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(value).decode()


# --------------------------------------------------------------------------
# object stores

CHUNK_SIZE = 128 * 1024
DIGEST_PREFIX = "SHA-256="


def meta_subject(bucket, name):
    """Where an object's metadata lives: $O.<bucket>.M.<name, URL-safe base64 with padding>."""
    return "$O.%s.M.%s" % (bucket, base64.urlsafe_b64encode(name.encode()).decode())


def chunk_subject(bucket, nuid):
    return "$O.%s.C.%s" % (bucket, nuid)


def nuid_prefix(name):
    """How the nuids this collection writes for an object start (16 hex digits of its name's SHA-256): the chunk
    subjects of one object's uploads are found by it, and those the object's metadata does not name dropped."""
    return hashlib.sha256(name.encode("utf-8")).hexdigest()[:16]


def orphaned_chunks(bucket, name, subjects, stored_nuid):
    """The chunk subjects among ``subjects`` of uploads of ``name`` (by their nuid's prefix) that its stored
    metadata does not name (``stored_nuid``), sorted."""
    prefix = chunk_subject(bucket, nuid_prefix(name))
    return sorted(subject for subject in subjects
                  if subject.startswith(prefix) and subject != chunk_subject(bucket, stored_nuid or ""))


def meta_of_message(message):
    """The object metadata in a STREAM.MSG.GET reply's message (its data in base64); None when it holds none."""
    try:
        meta = json.loads(base64.b64decode((message or {}).get("data") or "").decode() or "{}")
    except ValueError:
        return None
    return meta if isinstance(meta, dict) and meta.get("name") else None


def digest_of(data_sha256):
    """The digest nats writes for an object: SHA-256=<URL-safe base64, padded>."""
    return DIGEST_PREFIX + base64.urlsafe_b64encode(data_sha256).decode()


def same_digest(one, two):
    """Digests compare without the case of their prefix (older clients wrote it upper case)."""
    def bare(digest):
        return (digest or "").replace(DIGEST_PREFIX, "").replace(DIGEST_PREFIX.upper(), "").rstrip("=")
    return bool(one) and bare(one) == bare(two)


def current_objects(bucket, messages):
    """{name: metadata} of the objects of a bucket that are not deleted, from the last
    message of every metadata subject."""
    objects = {}
    for subject, _headers, data, _seq in messages:
        if not subject.startswith("$O.%s.M." % bucket):
            continue
        try:
            meta = json.loads(data.decode() or "{}")
        except ValueError:
            continue
        if meta.get("name") and not meta.get("deleted"):
            objects[meta["name"]] = meta
    return objects


def check_object_name(bucket, index, name):
    """An object's name: not blank, and short enough for the subject of its metadata."""
    if not isinstance(name, str) or not name.strip():
        raise BucketError("bucket %r: objects[%d].name: an object needs a name" % (bucket, index))
    size = len(name.encode("utf-8"))
    if size > MAX_NAME_BYTES:
        raise BucketError("bucket %r: objects[%d].name: a name of %d bytes is too long (%s...); an object's name has "
                          "at most %d bytes (UTF-8), as it is part of the subject of its metadata" % (
                              bucket, index, size, name[:20], MAX_NAME_BYTES))
    return name


def object_content(bucket, index, content):
    """The bytes of an object's ``content``: a string as it is, anything else as JSON (as key-value entries)."""
    return encode_value(bucket, None, content, "objects[%d].content" % index)


def object_metadata(bucket, where, metadata):
    """An object's metadata as text: strings as they are, numbers and booleans as their text (5, true), as a
    stream's metadata; a key that is not text, a mapping, a list or null refused naming it (``where``)."""
    result = {}
    for key, value in (metadata or {}).items():
        if not isinstance(key, str):
            raise BucketError("bucket %r: %s.metadata: the key %r is %s, not text: quote it" % (
                bucket, where, key, _a_kind(key)))
        result[key] = _meta_text(value)
        if result[key] is None:
            raise BucketError("bucket %r: %s.metadata.%s: %s is not text; a metadata value is a string (or a number "
                              "or boolean, stored as its text)%s" % (
                                  bucket, where, key, "null" if value is None else _a_kind(value),
                                  "; to keep structured data there, write it as JSON text ('{{ value | to_json }}')"
                                  if isinstance(value, (dict, list)) else ""))
    return result


def _meta_text(value):
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return None


def _metadata_text(metadata):
    """The metadata an object is written with (checked before by object_metadata)."""
    return dict((str(k), _meta_text(v) if _meta_text(v) is not None else str(v)) for k, v in (metadata or {}).items())


# a header's name as a NATS message takes it: printable ASCII but for the colon that ends it
_HEADER_NAME_RE = re.compile(r"^[!-9;-~]+$")


def object_headers(bucket, where, headers):
    """An object's headers as the nats clients keep them in its metadata (nats.go's nats.Header: each name to its
    list of values, names as given, case and all): a value is text (a number or a boolean as its text, as in
    metadata) or a list of them; a name that a message could not carry, a value with a line break, an empty list
    or anything else refused naming it (``where``). None (left out) is no headers."""
    result = {}
    for key, value in (headers or {}).items():
        if not isinstance(key, str) or not _HEADER_NAME_RE.match(key):
            raise BucketError("bucket %r: %s.headers: %r is not a header name; use printable ASCII without spaces or "
                              "':'%s" % (bucket, where, key, " (quote it)" if not isinstance(key, str) else ""))
        values = value if isinstance(value, list) else [value]
        texts = [_meta_text(item) for item in values]
        bad = [item for item, text in zip(values, texts) if text is None]
        if not values or bad:
            raise BucketError("bucket %r: %s.headers.%s: %s; a header's value is a string (a number or boolean as its "
                              "text) or a list of them" % (bucket, where, key, "an empty list" if not values else
                                                           "%s is not text" % ("null" if bad[0] is None else
                                                                               _a_kind(bad[0]))))
        if any("\r" in text or "\n" in text for text in texts):
            raise BucketError("bucket %r: %s.headers.%s: a header's value is one line: it has a line break" % (
                bucket, where, key))
        result[key] = texts
    return result


def headers_of(meta):
    """The headers of stored object metadata as object_headers gives them (a client that wrote a name to one
    string counts as its list of one)."""
    found = (meta or {}).get("headers") or {}
    if not isinstance(found, dict):
        return {}
    return dict((str(k), [str(v) for v in (vs if isinstance(vs, list) else [vs])]) for k, vs in found.items())


def object_chunk_size(bucket, where, value):
    """An object's chunk size in bytes (bytes or a size such as 128KiB), at least 1; None (left out) is the nats
    clients' 128 KiB. The server's max payload bounds it too, checked once connected (check_chunk_size)."""
    if value is None:
        return None
    try:
        size = size_bytes(value, minimum=0)
    except ValueError as exc:
        raise BucketError("bucket %r: %s.chunk_size: %s" % (bucket, where, exc)) from exc
    if size < 1:
        raise BucketError("bucket %r: %s.chunk_size: %r; an object's chunks hold at least 1 byte (left out, %d, as "
                          "the nats clients write them)" % (bucket, where, value, CHUNK_SIZE))
    return size


def check_chunk_size(bucket, where, size, max_payload):
    """A chunk size the server takes in one message (``max_payload``, the connected server's; None: not known)."""
    if size is not None and max_payload and size > max_payload:
        raise BucketError("bucket %r: %s.chunk_size: %d bytes is above the %d bytes the server takes in a message "
                          "(its max_payload): use at most %d" % (bucket, where, size, max_payload, max_payload))


def object_meta(bucket, name, nuid, size, chunks, digest, mtime, description=None, metadata=None, headers=None,
                chunk_size=None):
    """Metadata of an object as the nats clients write it (``chunk_size``: the size its chunks were written with,
    left out the nats clients' own)."""
    meta = {"name": name, "bucket": bucket, "nuid": nuid, "size": size, "chunks": chunks, "digest": digest,
            "mtime": mtime, "options": {"max_chunk_size": chunk_size or CHUNK_SIZE}}
    if description:
        meta["description"] = description
    if metadata:
        meta["metadata"] = _metadata_text(metadata)
    if headers:
        meta["headers"] = headers
    return meta


def deleted_meta(bucket, current, mtime):
    """The metadata that marks an object deleted (its chunks are purged)."""
    meta = dict(current, size=0, chunks=0, digest="", deleted=True, mtime=mtime)
    meta["bucket"] = bucket
    return meta


def meta_differs(current, description, metadata, headers=None):
    """Whether stored object metadata differs in its description, metadata or (when not None: declared, {} for
    none) headers."""
    return ((current.get("description") or None) != (description or None)
            or (current.get("metadata") or {}) != _metadata_text(metadata)
            or (headers is not None and headers_of(current) != headers))


def declared_buckets(params):
    """[(bucket name, its options, state)] of the single or the bulk form, each checked as a whole before anything
    is sent: its name, every option of its stream (kv_stream), its entries' keys and values."""
    if params.get("buckets") is not None:
        stray = sorted(k for k in KV_OPTIONS if params.get(k) is not None)
        if params.get("name") or stray:
            raise BucketError("set bucket options inside each item of buckets, not next to it (found: %s)"
                              % ", ".join((["name"] if params.get("name") else []) + stray))
        items = [(b["name"], b, b.get("state") or params["state"]) for b in params["buckets"]]
    elif params.get("name"):
        items = [(params["name"], params, params["state"])]
    else:
        raise BucketError("one of name or buckets is required")
    for name, options, state in items:
        check_bucket("key-value", name)
        if options.get("mirror") and options.get("entries") is not None:
            raise BucketError("bucket %r: entries: a mirror is read-only; set the entries on its origin %r" % (
                name, options["mirror"]["name"]))
        if options.get("exclusive") and options.get("entries") is None:
            raise BucketError("bucket %r: exclusive needs entries" % name)
        if state == "present":
            kv_stream(name, options, params.get("domain"))
            checked_entries(name, options.get("entries"))
            checked_entry_ttls(name, options)
    return items


def bucket_stream_items(items):
    streams = []
    for name, options, state in items:
        item = kv_stream(name, options) if state == "present" else {"name": "KV_" + name}
        # a bucket is never recreated: its values would be lost
        item.update(state=state, on_immutable_change="fail", allow_data_loss=False)
        if state == "present":
            item["check_existing"] = live_check("key-value bucket", "KV_", name, options)
        streams.append(item)
    return streams


def store_stream_item(store, sealed=False):
    """The stream of an object store (jetstream_object_store's options), never recreated either; ``sealed``: the
    store is sealed on the server (see object_store_stream)."""
    item = object_store_stream(store["name"], store, sealed=sealed) if store["state"] == "present" else {
        "name": "OBJ_" + store["name"]}
    item.update(state=store["state"], on_immutable_change="fail", allow_data_loss=False)
    if store["state"] == "present":
        item["check_existing"] = live_check("object store", "OBJ_", store["name"], store)
    return item


def live_check(kind, prefix, bucket, options):
    """What a bucket (or store) refuses of the stream it has on the server, checked with the server's STREAM.INFO
    reply before anything is sent (stream_model.plan calls it as ``check(config, info, where)``): a read-only copy
    promoted without ``promote``, and a ``max_bytes`` below the bytes it already holds."""
    def check(config, info, where):
        live = info.get("config") or {}
        origin = live.get("mirror")
        if origin and not options.get("mirror") and not options.get("promote"):
            raise BucketError("%s %r %s is a read-only copy of %s, and this task leaves out mirror: that would make "
                              "it a %s of its own for good (it would never follow its origin again). To keep the "
                              "copy, set mirror: %s; to promote it, set promote: true" % (
                                  kind, bucket, where, _origin_text(prefix, origin), _noun(prefix),
                                  _mirror_option(prefix, origin)))
        wanted, held = config.get("max_bytes"), (info.get("state") or {}).get("bytes") or 0
        if wanted is not None and 0 < wanted < held and wanted != live.get("max_bytes"):
            raise BucketError("%s %r %s: max_bytes: %d is below the %d bytes it already holds (the server would refuse "
                              "every write, or drop the oldest data); use at least %d, or -1 for no limit" % (
                                  kind, bucket, where, wanted, held, held))
    return check


def _origin_name(prefix, origin):
    name = origin.get("name") or ""
    return name[len(prefix):] if name.startswith(prefix) else name


def _noun(prefix):
    return "store" if prefix == "OBJ_" else "bucket"


def _origin_text(prefix, origin):
    api = (origin.get("external") or {}).get("api")
    domain = _api_domain(api)
    return "%s %r %s" % (_noun(prefix), _origin_name(prefix, origin),
                         "in domain %r" % domain if domain else "through %s" % api if api else "in the same domain")


def _mirror_option(prefix, origin):
    api = (origin.get("external") or {}).get("api")
    domain = _api_domain(api)
    where = ", domain: %s" % domain if domain else ", external: {api: %s}" % api if api else ""
    return "{name: %s%s}" % (_origin_name(prefix, origin), where)
