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

from ansible_collections.nats_edge.fleet.plugins.module_utils import _js_kv as kv

ROLLUP = {"Nats-Rollup": "sub"}


class ObjectError(Exception):
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


def _check(replies, what):
    for reply in replies:
        answer = json.loads(reply.data.decode() or "{}")
        if answer.get("error"):
            raise ObjectError("%s: %s" % (what, answer["error"].get("description")))


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
    _check(client.request_many(chunks()), where)
    meta = kv.object_meta(bucket, name, nuid, totals["size"], totals["chunks"], digest, now(), description, metadata)
    _check(client.request_many([(kv.meta_subject(bucket, name), json.dumps(meta).encode(), ROLLUP)]), where)
    if previous and previous.get("nuid"):
        js.call("STREAM.PURGE.OBJ_%s" % bucket, {"filter": kv.chunk_subject(bucket, previous["nuid"])})
    return meta


def update_meta(client, bucket, current, description, metadata):
    """Change an object's description or metadata without writing its chunks again."""
    meta = kv.object_meta(bucket, current["name"], current["nuid"], current["size"], current["chunks"],
                          current["digest"], now(), description, metadata, current.get("headers"))
    _check(client.request_many([(kv.meta_subject(bucket, current["name"]), json.dumps(meta).encode(), ROLLUP)]),
           "object %r of bucket %r" % (current["name"], bucket))
    return meta


def remove(client, js, bucket, current):
    """Mark an object deleted and drop its chunks, as the nats clients do."""
    meta = kv.deleted_meta(bucket, current, now())
    _check(client.request_many([(kv.meta_subject(bucket, current["name"]), json.dumps(meta).encode(), ROLLUP)]),
           "object %r of bucket %r" % (current["name"], bucket))
    js.call("STREAM.PURGE.OBJ_%s" % bucket, {"filter": kv.chunk_subject(bucket, current["nuid"])})


def file_mode(value):
    """A file mode option as a number: an octal string (V("0640")) or YAML's number for an unquoted 0640."""
    try:
        return value if isinstance(value, int) else int(str(value), 8)
    except ValueError:
        raise ObjectError("mode: %r is not an octal mode" % (value,))


def check_dest(dest):
    """A fetch's ``dest`` is a file in a directory that exists."""
    if not os.path.isdir(os.path.dirname(os.path.abspath(dest))):
        raise ObjectError("dest: the directory of %s does not exist" % dest)


def fetch_to_file(client, js, bucket, name, dest, mode, check_mode):
    """``dest`` made the object's content (fetched only when its digest differs) with ``mode``; in check mode
    only what would change. Returns (result: changed, digest, size, dest; the file's digest before)."""
    check_dest(dest)
    before, checksum = file_digests(dest) if os.path.isfile(dest) else (None, None)
    found = objects(client, js, bucket).get(name)
    if found is None:
        raise ObjectError("it is not in the bucket %s" % js.where())
    changed = not kv.same_digest(before, found.get("digest"))
    if changed and check_mode:
        # read and checked, not written: the checksum the file would have
        checksum = hashlib.sha1(b"".join(data for _s, _h, data, _q in _chunks(client, js, bucket, name, found))).hexdigest()
    elif changed:
        fetch(client, js, bucket, name, dest, mode, found)
        checksum = file_digests(dest)[1]
    elif os.stat(dest).st_mode & 0o7777 != mode:
        changed = True
        if not check_mode:
            os.chmod(dest, mode)
    return dict(changed=changed, digest=found.get("digest"), size=found.get("size"), dest=dest,
                checksum=checksum), before


def _chunks(client, js, bucket, name, found, check_digest=True):
    """Every chunk of an object (its metadata ``found``), all of them there, and (``check_digest``) matching
    its digest."""
    messages = client.read_stream(js.prefix, "OBJ_" + bucket, kv.chunk_subject(bucket, found["nuid"]))
    if len(messages) != found.get("chunks", len(messages)):
        raise ObjectError("object %r of bucket %r %s: %d of its %d chunks are there (a copy still catching up?)" % (
            name, bucket, js.where(), len(messages), found.get("chunks")))
    if check_digest and not kv.same_digest(
            content_digest(b"".join(data for _s, _h, data, _q in messages)), found.get("digest")):
        raise ObjectError("object %r of bucket %r %s: its content does not match its digest %s" % (
            name, bucket, js.where(), found.get("digest")))
    return messages


def fetch(client, js, bucket, name, dest, mode=0o644, found=None):
    """Read an object (from a bucket or a copy of one; ``found``, its metadata, when already read) into
    ``dest``, written whole and only after its digest matched. Returns its metadata."""
    found = found or objects(client, js, bucket).get(name)
    if found is None:
        raise ObjectError("object %r is not in bucket %r %s" % (name, bucket, js.where()))
    messages = _chunks(client, js, bucket, name, found, check_digest=False)
    digest = hashlib.sha256()
    directory = os.path.dirname(os.path.abspath(dest))
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".%s." % os.path.basename(dest))
    try:
        with os.fdopen(handle, "wb") as stream:
            for _subject, _headers, data, _seq in messages:
                digest.update(data)
                stream.write(data)
        if not kv.same_digest(kv.digest_of(digest.digest()), found.get("digest")):
            raise ObjectError("object %r of bucket %r %s: its content does not match its digest %s; %s was left "
                              "as it was" % (name, bucket, js.where(), found.get("digest"), dest))
        os.chmod(temporary, mode)
        os.replace(temporary, dest)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return found
