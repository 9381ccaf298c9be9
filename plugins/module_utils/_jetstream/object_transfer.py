# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Objects of a JetStream object store, written and read over the collection's NATS
client, in the nats clients' own format. Private to the collection.

Written here rather than through nats-py's object store because nats-py cannot
read from a copy (it looks the stream up by subject, and a mirror has none),
keeps no metadata map, and sends chunks one acknowledged round trip at a time.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import tempfile

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import buckets as kv
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import API

# jetstream_object_fetch's options (the fleet's checks read them too)
FETCH_ARGUMENT_SPEC = dict(
    bucket=dict(type="str", required=True),
    name=dict(type="str", required=True),
    dest=dict(type="path", required=True),
    mode=dict(type="raw", default="0644"),
)

ROLLUP = {"Nats-Rollup": "sub"}


class ObjectError(NatsEdgeError):
    """An object that cannot be written or read as asked, worded for the user."""


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")


def file_digest(path):
    """The nats digest of a file, read in chunks."""
    return file_digests(path)[0]


def file_digests(path):
    """(the nats digest, the SHA-1 checksum in hex as Ansible's modules report a file's) of a file, read once."""
    digest, checksum = hashlib.sha256(), hashlib.sha1()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1024 * 1024), b""):
            digest.update(block)
            checksum.update(block)
    return kv.digest_of(digest.digest()), checksum.hexdigest()


def content_digest(data):
    return kv.digest_of(hashlib.sha256(data).digest())


def objects(client, js, bucket):
    """{name: metadata} of the bucket's objects, from their metadata only (no chunk is read)."""
    return kv.current_objects(bucket, client.read_stream(js.prefix, "OBJ_" + bucket, "$O.%s.M.>" % bucket,
                                                         "last_per_subject"))


def check_route(client, domain, where=None):
    """Objects reach a store of ``domain`` only through a server of that domain: the servers carry a bucket's
    key-value writes to another domain (``$JS.<domain>.API.$KV.>``) but no object data. Checked before anything
    is written."""
    connected = client.connected_domain()
    if domain and connected != domain:
        raise ObjectError("%sobjects are written through a server of its domain %r, and this task is connected "
                          "to a server of %s; name that domain's servers in servers" % (
                              "%s: " % where if where else "", domain, "domain %r" % connected if connected else "no domain"))


def _publish(client, js, bucket, messages, what):
    """Chunks or metadata into the store's stream: through the import ``js`` names, or bare, in the connected
    server's domain, which check_route() found to be the store's."""
    client.publish_into("OBJ_" + bucket, messages, API if js.domain else js.prefix, js.domain, what=what)


def upload(client, js, bucket, name, source, digest, description=None, metadata=None, previous=None):
    """Write an object: its chunks pipelined, then its metadata (a rollup of its subject), then
    drop the chunks of the version it replaces. ``source`` is a path or bytes, ``digest`` its
    nats digest (already computed to decide the upload)."""
    nuid = os.urandom(16).hex()
    subject = kv.chunk_subject(bucket, nuid)
    totals = {"size": 0, "chunks": 0}

    def chunks():
        handle = open(source, "rb") if isinstance(source, str) else None
        try:
            offset = 0
            while True:
                block = handle.read(kv.CHUNK_SIZE) if handle else source[offset:offset + kv.CHUNK_SIZE]
                offset += len(block)
                if not block:
                    return
                totals["size"] += len(block)
                totals["chunks"] += 1
                yield subject, block, None
        finally:
            if handle:
                handle.close()

    where = "object %r of bucket %r" % (name, bucket)
    _publish(client, js, bucket, chunks(), where)
    meta = kv.object_meta(bucket, name, nuid, totals["size"], totals["chunks"], digest, now(), description, metadata)
    _publish(client, js, bucket, [(kv.meta_subject(bucket, name), json.dumps(meta).encode(), ROLLUP)], where)
    if previous and previous.get("nuid"):
        js.call("STREAM.PURGE.OBJ_%s" % bucket, {"filter": kv.chunk_subject(bucket, previous["nuid"])})
    return meta


def update_meta(client, js, bucket, current, description, metadata):
    """Change an object's description or metadata without writing its chunks again."""
    meta = kv.object_meta(bucket, current["name"], current["nuid"], current["size"], current["chunks"],
                          current["digest"], now(), description, metadata, current.get("headers"))
    _publish(client, js, bucket, [(kv.meta_subject(bucket, current["name"]), json.dumps(meta).encode(), ROLLUP)],
             "object %r of bucket %r" % (current["name"], bucket))
    return meta


def remove(client, js, bucket, current):
    """Mark an object deleted and drop its chunks, as the nats clients do."""
    meta = kv.deleted_meta(bucket, current, now())
    _publish(client, js, bucket, [(kv.meta_subject(bucket, current["name"]), json.dumps(meta).encode(), ROLLUP)],
             "object %r of bucket %r" % (current["name"], bucket))
    js.call("STREAM.PURGE.OBJ_%s" % bucket, {"filter": kv.chunk_subject(bucket, current["nuid"])})


def file_mode(value):
    """A file mode option as a number: an octal string (V("0640")) or YAML's number for an unquoted 0640."""
    try:
        return value if isinstance(value, int) else int(str(value), 8)
    except ValueError as exc:
        raise ObjectError("mode: %r is not an octal mode" % (value,)) from exc


def check_dest(dest):
    """A fetch's ``dest`` is a file in a directory that exists."""
    if not os.path.isdir(os.path.dirname(os.path.abspath(dest))):
        raise ObjectError("dest: the directory of %s does not exist" % dest)


def checked_fetch(bucket, mode, dest):
    """A fetch's input checked, before anything is read (raises kv.BucketError or ObjectError): the store's name,
    the directory of ``dest``; returns the mode as a number."""
    kv.check_bucket("object store", bucket)
    mode = file_mode(mode)
    check_dest(dest)
    return mode


def fetch_to_file(client, js, bucket, name, dest, mode, check_mode):
    """``dest`` (its directory checked by the caller, check_dest) made the object's content, fetched only when
    its digest differs, with ``mode``; in check mode only what would change. Returns (result: changed, digest,
    size, dest, checksum; the file's digest before)."""
    before, checksum = file_digests(dest) if os.path.isfile(dest) else (None, None)
    found = objects(client, js, bucket).get(name)
    if found is None:
        raise ObjectError("it is not in the bucket %s" % js.where())
    changed = not kv.same_digest(before, found.get("digest"))
    if changed:
        # in check mode read and checked, not written: the checksum the file would have
        checksum = fetch(client, js, bucket, name, found, None if check_mode else (dest, mode))
    elif os.stat(dest).st_mode & 0o7777 != mode:
        changed = True
        if not check_mode:
            os.chmod(dest, mode)
    return dict(changed=changed, digest=found.get("digest"), size=found.get("size"), dest=dest,
                checksum=checksum), before


def fetch(client, js, bucket, name, found, write_to=None):
    """Read an object (from a bucket or a copy of one; ``found``, its metadata), every chunk there and the
    content matching its digest, and with ``write_to`` (dest, mode) write it to ``dest`` whole. Returns the
    content's SHA-1 checksum (hex)."""
    messages = client.read_stream(js.prefix, "OBJ_" + bucket, kv.chunk_subject(bucket, found["nuid"]))
    if len(messages) != found.get("chunks", len(messages)):
        raise ObjectError("object %r of bucket %r %s: %d of its %d chunks are there (a copy still catching up?)" % (
            name, bucket, js.where(), len(messages), found.get("chunks")))
    digest, checksum = hashlib.sha256(), hashlib.sha1()
    for _subject, _headers, data, _seq in messages:
        digest.update(data)
        checksum.update(data)
    if not kv.same_digest(kv.digest_of(digest.digest()), found.get("digest")):
        raise ObjectError("object %r of bucket %r %s: its content does not match its digest %s%s" % (
            name, bucket, js.where(), found.get("digest"), "; %s was left as it was" % write_to[0] if write_to else ""))
    if write_to:
        dest, mode = write_to
        handle, temporary = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(dest)),
                                             prefix=".%s." % os.path.basename(dest))
        try:
            with os.fdopen(handle, "wb") as stream:
                for _subject, _headers, data, _seq in messages:
                    stream.write(data)
            os.chmod(temporary, mode)
            os.replace(temporary, dest)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
    return checksum.hexdigest()
