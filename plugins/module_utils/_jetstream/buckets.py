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
import json
import re

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._units import duration_ns

BUCKET_RE = re.compile(r"^[a-zA-Z0-9_-]+$")
KEY_RE = re.compile(r"^[-/_=.a-zA-Z0-9]+$")
MAX_HISTORY = 64
OPERATION = "KV-Operation"
DELETED = ("DEL", "PURGE")
TWO_MINUTES_NS = 120 * 10**9

_COPY = dict(name=dict(type="str", required=True), domain=dict(type="str"),
             external=dict(type="dict", options=dict(api=dict(type="str", required=True),
                                                     deliver=dict(type="str", default=""))))

# Options every bucket kind takes (the object store's as well as the key-value bucket's).
BUCKET_OPTIONS = dict(
    description=dict(type="str"),
    ttl=dict(type="raw"),
    max_bytes=dict(type="raw"),
    storage=dict(type="str", choices=["file", "memory"]),
    replicas=dict(type="int"),
    placement=dict(type="dict", options=dict(cluster=dict(type="str"), tags=dict(type="list", elements="str"))),
    compression=dict(type="bool"),
    metadata=dict(type="dict"),
    mirror=dict(type="dict", options=copy.deepcopy(_COPY), mutually_exclusive=[["domain", "external"]]),
)

KV_OPTIONS = dict(
    copy.deepcopy(BUCKET_OPTIONS),
    history=dict(type="int"),
    max_value_size=dict(type="raw"),
    republish=dict(type="dict", options=dict(src=dict(type="str"), dest=dict(type="str", required=True),
                                             headers_only=dict(type="bool"))),
    per_key_ttl=dict(type="bool"),
    limit_marker_ttl=dict(type="raw"),
    sources=dict(type="list", elements="dict", options=copy.deepcopy(_COPY),
                 mutually_exclusive=[["domain", "external"]]),
    entries=dict(type="dict"),
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
    if not isinstance(key, str) or not KEY_RE.match(key) or key.startswith(".") or key.endswith(".") or ".." in key:
        raise BucketError("bucket %r: entries: %r is not a valid key; use letters, digits and '-', '/', '_', '=', "
                          "'.' (not first or last, nor two in a row)" % (bucket, key))
    return key


def _copy_of(prefix, kind_field, given, transform_to=None):
    """A mirror or source entry of the stream behind a bucket."""
    entry = {"name": prefix + given["name"]}
    if given.get("domain"):
        entry["domain"] = given["domain"]
    if given.get("external"):
        entry["external"] = dict(given["external"])
    if transform_to and given["name"] != transform_to:
        # a source bucket's keys land under this bucket's subjects
        entry["subject_transforms"] = [{"src": "$KV.%s.>" % given["name"], "dest": "$KV.%s.>" % transform_to}]
    return entry


def kv_stream(bucket, options):
    """The jetstream_stream item of a key-value bucket (nats' own mapping).

    Defaults are those of the nats clients, applied whether the bucket is new or
    not: a bucket declared without ``history`` keeps one value per key."""
    check_bucket("key-value", bucket)
    history = options.get("history")
    if history is None:
        history = 1
    if not 1 <= history <= MAX_HISTORY:
        raise BucketError("bucket %r: history: %r; a key keeps 1 to %d values" % (bucket, history, MAX_HISTORY))
    ttl = options.get("ttl")
    ttl_ns = _duration(bucket, "ttl", ttl) if ttl is not None else 0
    item = {
        "name": "KV_" + bucket,
        "max_msgs_per_subject": history,
        "max_age": ttl_ns // 10**9 if ttl_ns % 10**9 == 0 else "%dns" % ttl_ns,
        "max_bytes": -1 if options.get("max_bytes") is None else options["max_bytes"],
        "max_msg_size": -1 if options.get("max_value_size") is None else options["max_value_size"],
        "storage": options.get("storage") or "file",
        "replicas": options.get("replicas") or 1,
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
    if options.get("mirror"):
        if options.get("sources"):
            raise BucketError("bucket %r: mirror and sources cannot be combined" % bucket)
        item["mirror"] = _copy_of("KV_", "mirror", options["mirror"])
        item["mirror_direct"] = True
        # a mirror stores what its origin accepted: nats-server 2.10+ keeps no
        # duplicate window on it (asking for one would never be applied)
        del item["duplicate_window"]
    else:
        item["subjects"] = ["$KV.%s.>" % bucket]
        if options.get("sources") is not None:
            item["sources"] = [_copy_of("KV_", "sources", s, transform_to=bucket) for s in options["sources"]]
    return item


def object_store_stream(bucket, options):
    """The jetstream_stream item of an object store (nats' own mapping)."""
    check_bucket("object store", bucket)
    ttl = options.get("ttl")
    ttl_ns = _duration(bucket, "ttl", ttl) if ttl is not None else 0
    item = {
        "name": "OBJ_" + bucket,
        "max_age": ttl_ns // 10**9 if ttl_ns % 10**9 == 0 else "%dns" % ttl_ns,
        "max_bytes": -1 if options.get("max_bytes") is None else options["max_bytes"],
        "storage": options.get("storage") or "file",
        "replicas": options.get("replicas") or 1,
        "allow_rollup": True,
        "allow_direct": True,
        "discard": "new",
    }
    _common(bucket, item, options)
    if options.get("mirror"):
        item["mirror"] = _copy_of("OBJ_", "mirror", options["mirror"])
        item["mirror_direct"] = True
    else:
        item["subjects"] = ["$O.%s.C.>" % bucket, "$O.%s.M.>" % bucket]
    return item


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


def encode_value(bucket, key, value):
    """The bytes stored for a declared value: strings as they are, anything else as JSON."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    except (TypeError, ValueError) as exc:
        raise BucketError("bucket %r: entries.%s: cannot store %r as JSON (%s)" % (bucket, key, value, exc)) from exc


def current_values(bucket, messages):
    """{key: bytes} of the last message of every key that is not deleted."""
    prefix = "$KV.%s." % bucket
    values = {}
    for subject, headers, data, _seq in messages:
        if not subject.startswith(prefix):
            continue
        if (headers or {}).get(OPERATION) in DELETED:
            continue
        values[subject[len(prefix):]] = data
    return values


def plan_entries(bucket, desired, current, exclusive):
    """(puts {key: bytes}, deletes [key]) that bring ``current`` to ``desired``."""
    wanted = {}
    for key, value in (desired or {}).items():
        wanted[check_key(bucket, str(key))] = encode_value(bucket, key, value)
    puts = dict((key, value) for key, value in wanted.items() if current.get(key) != value)
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


def object_meta(bucket, name, nuid, size, chunks, digest, mtime, description=None, metadata=None, headers=None):
    """Metadata of an object as the nats clients write it."""
    meta = {"name": name, "bucket": bucket, "nuid": nuid, "size": size, "chunks": chunks, "digest": digest,
            "mtime": mtime, "options": {"max_chunk_size": CHUNK_SIZE}}
    if description:
        meta["description"] = description
    if metadata:
        meta["metadata"] = dict((str(k), str(v)) for k, v in metadata.items())
    if headers:
        meta["headers"] = headers
    return meta


def deleted_meta(bucket, current, mtime):
    """The metadata that marks an object deleted (its chunks are purged)."""
    meta = dict(current, size=0, chunks=0, digest="", deleted=True, mtime=mtime)
    meta["bucket"] = bucket
    return meta


def meta_differs(current, description, metadata):
    return ((current.get("description") or None) != (description or None)
            or (current.get("metadata") or {}) != dict((str(k), str(v)) for k, v in (metadata or {}).items()))


def declared_buckets(params):
    """[(bucket name, its options, state)] of the single or the bulk form."""
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
            for key in options.get("entries") or {}:
                check_key(name, str(key))
    return items


def bucket_stream_items(items):
    streams = []
    for name, options, state in items:
        item = kv_stream(name, options) if state == "present" else {"name": "KV_" + name}
        # a bucket is never recreated: its values would be lost
        item.update(state=state, on_immutable_change="fail", allow_data_loss=False)
        streams.append(item)
    return streams


def store_stream_item(store):
    """The stream of an object store (jetstream_object_store's options), never recreated either."""
    item = object_store_stream(store["name"], store) if store["state"] == "present" else {"name": "OBJ_" + store["name"]}
    item.update(state=store["state"], on_immutable_change="fail", allow_data_loss=False)
    return item
