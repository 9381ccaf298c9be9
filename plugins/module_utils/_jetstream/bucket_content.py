# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a key-value bucket or an object store holds beyond its stream: the declared entries and
objects, compared with the server's and written where they differ. Private to the collection;
jetstream_kv, jetstream_object_store and the fleet's domain runs use it.
"""

from __future__ import annotations

import copy
import os

from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import buckets as kv
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import object_transfer as objects


# jetstream_object_store's options (one store)
OBJECT_STORE_OPTIONS = dict(
    copy.deepcopy(kv.BUCKET_OPTIONS),
    name=dict(type="str", required=True),
    state=dict(type="str", choices=["present", "absent"], default="present"),
    objects=dict(type="list", elements="dict", options=dict(
        name=dict(type="str", required=True), src=dict(type="path"), content=dict(type="raw"),
        description=dict(type="str"), metadata=dict(type="dict"), headers=dict(type="dict"),
        chunk_size=dict(type="raw")), mutually_exclusive=[["src", "content"]], required_one_of=[["src", "content"]]),
    exclusive=dict(type="bool", default=False),
)

# jetstream_object_store's own option beyond those of jetstream_domain's object_stores items: sealed (a domain's run
# plans every stream of the run together, a sealed store's as well, and does not seal)
OBJECT_STORE_MODULE_OPTIONS = copy.deepcopy(OBJECT_STORE_OPTIONS)
OBJECT_STORE_MODULE_OPTIONS["sealed"] = dict(type="bool")


class Entries(object):
    """Reads the current values of the declared keys' buckets and writes what differs."""

    def __init__(self, module, client, js):
        self.module = module
        self.client = client
        self.js = js

    def converge(self, name, options, exists):
        """(keys put, keys deleted, before, after): ``before`` and ``after`` are the diff's parts for the entries
        that change (``entries``: their values; ``entry_ttls``: their TTLs in seconds, -1 for never, where either
        side has one)."""
        if options.get("entries") is None:
            return [], [], dict(entries={}), dict(entries={})
        current = {}
        if exists:
            last = self.client.last_per_subject(self.js.prefix, "KV_" + name, "$KV.%s.>" % name)
            current = kv.current_entries(name, last)
        ttls = kv.checked_entry_ttls(name, options)
        puts, deletes = kv.plan_entries(name, options["entries"], current, options.get("exclusive"), ttls)
        changed = sorted(set(puts) | set(deletes))
        now = dict((k, current.get(k, (None, None))) for k in changed)  # (value, TTL), both None for a new key
        before = dict(entries=dict((k, kv.shown(now[k][0])) for k in changed))
        after = dict(entries=dict((k, kv.shown(puts.get(k))) for k in changed))
        timed = [k for k in changed if k in ttls or now[k][1] is not None]
        if timed:
            before["entry_ttls"] = dict((k, now[k][1]) for k in timed)
            after["entry_ttls"] = dict((k, kv.ttl_seconds(ttls[k]) if k in ttls and k in puts else None)
                                       for k in timed)
        if not self.module.check_mode and (puts or deletes):
            messages = [("$KV.%s.%s" % (name, key), value, {kv.TTL_HEADER: ttls[key]} if key in ttls else None)
                        for key, value in sorted(puts.items())]
            messages += [("$KV.%s.%s" % (name, key), b"", {kv.OPERATION: "DEL"}) for key in deletes]
            self.client.publish_into("KV_" + name, messages, self.js.prefix, self.js.domain,
                                     what="bucket %r: entries" % name)
        return sorted(puts), deletes, before, after


def checked_objects(params):
    """The declared objects with their digests (``content`` as the bytes to store), the store checked as a whole
    before anything is sent: its name, every option of its stream (object_store_stream), each object's name,
    content, metadata, headers and chunk size; every file is looked at. An object that has the key ``headers``
    (the modules' objects, validated) gets its headers as object_headers gives them, {} when left out (none, as
    metadata); one without None, which keeps the headers an object has."""
    bucket = params["name"]
    kv.check_bucket("object store", bucket)
    if params.get("mirror") and params.get("objects") is not None:
        raise kv.BucketError("bucket %r: objects: a mirror is read-only; put the objects in its origin %r" % (
            bucket, params["mirror"]["name"]))
    if (params.get("state") or "present") == "present":
        kv.object_store_stream(bucket, params)
    wanted, seen = {}, set()
    for index, obj in enumerate(params.get("objects") or []):
        kv.check_object_name(bucket, index, obj["name"])
        if obj["name"] in seen:
            raise kv.BucketError("bucket %r: objects[%d]: %r is listed twice" % (bucket, index, obj["name"]))
        seen.add(obj["name"])
        where = "objects[%d] (%s)" % (index, obj["name"])
        obj = dict(obj, metadata=kv.object_metadata(bucket, where, obj.get(
            "metadata")) if obj.get("metadata") is not None else None)
        if "headers" in obj:
            obj["headers"] = kv.object_headers(bucket, where, obj["headers"])
        obj["chunk_size"] = kv.object_chunk_size(bucket, where, obj.get("chunk_size"))
        if obj.get("src") is not None:
            if not os.path.isfile(obj["src"]):
                raise kv.BucketError("bucket %r: objects[%d].src: %s is not a file (object %r)" % (
                    bucket, index, obj["src"], obj["name"]))
            digest = objects.file_digest(obj["src"])
        else:
            obj["content"] = kv.object_content(bucket, index, obj["content"])
            digest = objects.content_digest(obj["content"])
        wanted[obj["name"]] = dict(obj, digest=digest)
    return wanted


def check_chunk_sizes(client, bucket, wanted):
    """Every declared chunk size within the connected server's max payload, before anything is sent."""
    most = objects.max_payload(client)
    for index, (name, obj) in enumerate(wanted.items()):
        kv.check_chunk_size(bucket, "objects[%d] (%s)" % (index, name), obj.get("chunk_size"), most)


def plan_objects(client, js, bucket, wanted, exists, exclusive):
    """What the store's objects need, read from their metadata (nothing sent): ``current`` {name: metadata},
    ``uploads`` (a digest differs: a chunk size that differs alone uploads nothing), ``updates`` (description,
    metadata or headers only) and ``deletes`` (``exclusive``), each sorted."""
    current = objects.objects(client, js, bucket) if exists else {}
    uploads = [name for name, obj in wanted.items()
               if name not in current or not kv.same_digest(obj["digest"], current[name].get("digest"))]
    updates = [name for name, obj in wanted.items() if name not in uploads
               and kv.meta_differs(current[name], obj.get("description"), obj.get("metadata"), obj.get("headers"))]
    deletes = sorted(set(current) - set(wanted)) if exclusive else []
    return dict(current=current, uploads=sorted(uploads), updates=sorted(updates), deletes=deletes)


def refuse_sealed(bucket, planned, where):
    """A sealed store takes no writes: the objects a run would change in it, named, before anything is sent."""
    verbs = (("upload", "uploads"), ("update the description, metadata or headers of", "updates"),
             ("delete (exclusive)", "deletes"))
    changes = [(verb, planned[key]) for verb, key in verbs if planned[key]]
    if changes:
        raise kv.BucketError("object store %r %s is sealed, so it is read-only for good: this task would %s; declare "
                             "the objects as the store holds them (nothing was sent)" % (
                                 bucket, where, "; ".join("%s %s" % (verb, ", ".join(repr(n) for n in names))
                                                          for verb, names in changes)))


def converge_objects(module, client, js, bucket, wanted, exists, exclusive, planned=None):
    """Write what ``planned`` (plan_objects; read here when left out) says the objects need; in check mode,
    nothing. Returns (uploaded, updated, deleted, diff of their digests)."""
    if planned is None:
        planned = plan_objects(client, js, bucket, wanted, exists, exclusive)
    current, uploads, updates, deletes = (planned[k] for k in ("current", "uploads", "updates", "deletes"))
    if not module.check_mode:
        for name in uploads:
            obj = wanted[name]
            source = obj["src"] if obj.get("src") is not None else obj["content"]
            objects.upload(client, js, bucket, name, source, obj["digest"], obj.get("description"),
                           obj.get("metadata"), current.get(name), obj.get("headers"), obj.get("chunk_size"))
        for name in updates:
            objects.update_meta(client, js, bucket, current[name], wanted[name].get("description"),
                                wanted[name].get("metadata"), wanted[name].get("headers"))
        for name in deletes:
            objects.remove(client, js, bucket, current[name])
    changed = sorted(set(uploads) | set(updates) | set(deletes))
    diff = dict(before=dict((n, (current.get(n) or {}).get("digest")) for n in changed),
                after=dict((n, (wanted.get(n) or {}).get("digest")) for n in changed))
    return uploads, updates, deletes, diff
