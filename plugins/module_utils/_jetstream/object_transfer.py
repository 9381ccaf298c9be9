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
import re
import stat
import tempfile

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import buckets as kv
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import API, NatsClientError, NoRespondersError

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


class FetchRefused(NatsEdgeError):
    """A fetch that no later run would make either (no object store of that name where the task reads, a domain
    nothing answers for, an object whose digest cannot be checked), worded for the user with the object's name.
    Unlike an ObjectError, which jetstream_domain's defer_copies may leave to a later run, it always fails."""


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


# the JetStream API's answer when a subject holds no message
_NO_MESSAGE = 10037
# how often an upload writes its chunks again when a concurrent upload of the same object dropped them
UPLOAD_ATTEMPTS = 3


def _stored_meta(js, bucket, name):
    """The object's metadata as the store has it now (deleted or not), None when it has none."""
    try:
        reply = js.call("STREAM.MSG.GET.OBJ_%s" % bucket, {"last_by_subj": kv.meta_subject(bucket, name)})
    except NatsEdgeError as exc:
        if getattr(exc, "err_code", None) == _NO_MESSAGE:
            return None
        raise
    return kv.meta_of_message(reply.get("message"))


def _chunk_subjects(js, bucket, filter_subject):
    """{chunk subject: messages} of the store on ``filter_subject``, every page of the server's answer."""
    subjects, offset = {}, 0
    while True:
        reply = js.call("STREAM.INFO.OBJ_%s" % bucket, {"subjects_filter": filter_subject, "offset": offset})
        page = (reply.get("state") or {}).get("subjects") or {}
        subjects.update(page)
        offset += len(page)
        if not page or offset >= (reply.get("total") or 0):
            return subjects


def _purge(js, bucket, subjects):
    for subject in subjects:
        js.call("STREAM.PURGE.OBJ_%s" % bucket, {"filter": subject})


def _drop_orphans(js, bucket, name, previous=None):
    """Purge every chunk subject of ``name`` that its stored metadata does not name: the uploads this collection
    wrote of it (found by their nuid's prefix, kv.nuid_prefix) and ``previous``, the version a run read before
    writing. A concurrent upload's chunks go too: that upload writes them again (see upload). Returns the stored
    metadata."""
    stored = _stored_meta(js, bucket, name)
    named = (stored or {}).get("nuid") if stored and not stored.get("deleted") else None
    orphans = kv.orphaned_chunks(bucket, name, _chunk_subjects(js, bucket, kv.chunk_subject(bucket, ">")), named)
    if previous and previous.get("nuid") and previous["nuid"] != named:
        orphans.append(kv.chunk_subject(bucket, previous["nuid"]))
    _purge(js, bucket, sorted(set(orphans)))
    return stored


def _intact(js, bucket, nuid, chunks):
    """Whether all ``chunks`` chunks of upload ``nuid`` are in the store."""
    subject = kv.chunk_subject(bucket, nuid)
    return _chunk_subjects(js, bucket, subject).get(subject, 0) == chunks


def _chunks(source, subject, totals, size=kv.CHUNK_SIZE):
    """``source`` (a path or bytes) in chunks of ``size`` bytes to publish on ``subject``, counted into ``totals``
    as they go."""
    handle = open(source, "rb") if isinstance(source, str) else None
    try:
        offset = 0
        while True:
            block = handle.read(size) if handle else source[offset:offset + size]
            offset += len(block)
            if not block:
                return
            totals["size"] += len(block)
            totals["chunks"] += 1
            yield subject, block, None
    finally:
        if handle:
            handle.close()


def upload(client, js, bucket, name, source, digest, description=None, metadata=None, previous=None, headers=None,
           chunk_size=None):
    """Write an object: its chunks pipelined, then its metadata (a rollup of its subject), then drop every chunk
    subject of the object that the stored metadata does not name (the version it replaces, ``previous``, and
    those of uploads of the same object running at the same time, whichever wrote its metadata first), so no
    upload leaves chunks behind. An upload whose chunks a concurrent one dropped before its metadata was written
    writes them again. ``source`` is a path or bytes, ``digest`` its nats digest (already computed to decide
    the upload); ``headers`` (object_headers) go into its metadata, ``chunk_size`` (bytes, checked against the
    server's max payload before) the size of its chunks, left out the nats clients' 128 KiB."""
    where = "object %r of bucket %r" % (name, bucket)
    for _attempt in range(UPLOAD_ATTEMPTS):
        nuid = kv.nuid_prefix(name) + os.urandom(8).hex()
        subject = kv.chunk_subject(bucket, nuid)
        totals = {"size": 0, "chunks": 0}

        try:
            _publish(client, js, bucket, _chunks(source, subject, totals, chunk_size or kv.CHUNK_SIZE), where)
        except NatsEdgeError:
            try:
                _purge(js, bucket, [subject])  # what was written of them is named by no metadata
            except NatsEdgeError:
                pass  # the connection is gone: the next upload of the object drops them (_drop_orphans)
            raise
        if not _intact(js, bucket, nuid, totals["chunks"]):
            _purge(js, bucket, [subject])  # a concurrent upload of the object dropped them: write them again
            continue
        meta = kv.object_meta(bucket, name, nuid, totals["size"], totals["chunks"], digest, now(), description,
                              metadata, headers, chunk_size)
        _publish(client, js, bucket, [(kv.meta_subject(bucket, name), json.dumps(meta).encode(), ROLLUP)], where)
        stored = _drop_orphans(js, bucket, name, previous)
        if (stored or {}).get("nuid") != nuid or _intact(js, bucket, nuid, totals["chunks"]):
            # replaced by a later upload (whose chunks stand, ours dropped), or the object's version now
            return meta
        previous = None  # dropped by a concurrent upload after its metadata was written: the object again
    raise ObjectError("%s: concurrent uploads of the object dropped its chunks %d times; run the task again" % (
        where, UPLOAD_ATTEMPTS))


def update_meta(client, js, bucket, current, description, metadata, headers=None):
    """Change an object's description, metadata or headers without writing its chunks again: the metadata the
    store has now (``current`` when nothing changed it since it was read) with the new description, metadata and
    ``headers`` (None: those it has), so it names the chunks that are there, with the chunk size they have."""
    name = current["name"]
    stored = _stored_meta(js, bucket, name)
    base = stored if stored and not stored.get("deleted") and stored.get("nuid") else current
    meta = kv.object_meta(bucket, name, base["nuid"], base["size"], base["chunks"], base["digest"], now(),
                          description, metadata, base.get("headers") if headers is None else headers,
                          (base.get("options") or {}).get("max_chunk_size"))
    _publish(client, js, bucket, [(kv.meta_subject(bucket, name), json.dumps(meta).encode(), ROLLUP)],
             "object %r of bucket %r" % (name, bucket))
    return meta


def max_payload(client):
    """The most bytes the connected server takes in one message (its INFO's max_payload), None when not known."""
    return getattr(getattr(client, "_nc", None), "max_payload", None) or None


def remove(client, js, bucket, current):
    """Mark an object deleted and drop its chunks, as the nats clients do: those of ``current`` and of every
    upload of the object this collection wrote."""
    meta = kv.deleted_meta(bucket, current, now())
    _publish(client, js, bucket, [(kv.meta_subject(bucket, current["name"]), json.dumps(meta).encode(), ROLLUP)],
             "object %r of bucket %r" % (current["name"], bucket))
    _drop_orphans(js, bucket, current["name"], current)


# a fetched file's mode: 3 or 4 octal digits (also written 0o640, as YAML 1.2 does); permission bits only
_MODE_RE = re.compile(r"^(?:0[oO])?([0-7]{3,4})$")
_LONG_MODE_RE = re.compile(r"^(?:0[oO])?[0-7]{5,}$")
_SPECIAL_BITS = ((0o4000, "setuid"), (0o2000, "setgid"), (0o1000, "sticky"))
DEFAULT_MODE = "0644"


def _special(field, shown, mode, note=""):
    """The error for a mode with bits beyond 0777: the setuid, setgid and sticky bits a fetched file does not take."""
    bits = [name for bit, name in _SPECIAL_BITS if mode & bit]
    named = " and ".join([", ".join(bits[:-1]), bits[-1]] if len(bits) > 1 else bits)
    return ObjectError("%s: %s sets the %s bit%s, which a fetched file does not take (permission bits only, 0000 to "
                       "0777); write %s: '%04o'%s" % (field, shown, named, "s" if len(bits) > 1 else "", field,
                                                      mode & 0o777, note))


def file_mode(value, field="mode"):
    """A fetched file's mode as a number, checked: an octal string of 3 or 4 digits ("0640", "640", also "0o640")
    or YAML's number for an unquoted 0640 (416); None is the default, 0644. A fetched file takes permission bits
    only (0000 to 0777): a boolean, a negative number, the number YAML reads from an unquoted 640 (0o1200), more
    than 4 digits, the setuid, setgid or sticky bit and anything else raise ObjectError naming ``field`` and the
    value, and saying what to write instead."""
    if value is None:
        value = DEFAULT_MODE
    write = "write the mode quoted, as 3 or 4 octal digits: %s: '0644'" % field
    if isinstance(value, bool):
        raise ObjectError("%s: %r is a boolean, not a mode; %s" % (field, value, write))
    if isinstance(value, int):
        if value < 0:
            raise ObjectError("%s: %d is a negative number, not a mode; %s" % (field, value, write))
        if value <= 0o777:
            return value
        if re.match(r"^[0-7]{3}$", str(value)):
            # written unquoted and without its leading 0: YAML read the digits as a decimal number
            raise ObjectError("%s: %d is read by YAML as the decimal number %d, which is the mode %04o; quote it: "
                              "%s: '0%d'" % (field, value, value, value, field, value))
        if value > 0o7777:
            raise ObjectError("%s: %d is the number %o in octal, more than 4 digits, not a mode; %s" % (
                field, value, value, write))
        # YAML's number for an unquoted 04755, or for an unquoted 2750 (read as a decimal number)
        note = "; YAML reads digits without quotes and without a leading 0 as a decimal number: quote a mode" \
            if re.match(r"^[0-7]{4}$", str(value)) else ""
        raise _special(field, "%d (the mode %04o)" % (value, value), value, note)
    if not isinstance(value, str):
        raise ObjectError("%s: %r is not an octal mode; %s" % (field, value, write))
    text = value.strip()
    match = _MODE_RE.match(text)
    if not match:
        if _LONG_MODE_RE.match(text):
            raise ObjectError("%s: %r has more than 4 digits; a mode has 3 or 4 octal digits, such as %s: '0%s'" % (
                field, value, field, text[-3:]))
        raise ObjectError("%s: %r is not an octal mode; %s" % (field, value, write))
    mode = int(match.group(1), 8)
    if mode > 0o777:
        raise _special(field, repr(value), mode)
    return mode


def _kind(mode):
    for test, kind in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "not a regular file"


def check_dest_path(dest):
    """A fetch's ``dest`` as a path, wherever the file is written: a file's path, not empty nor a directory's."""
    if not isinstance(dest, str) or not dest.strip():
        raise ObjectError("dest: %r names no file; give the path of the file to write" % (dest,))
    if dest.endswith("/") or os.path.basename(dest) in (".", ".."):
        raise ObjectError("dest: %s is the path of a directory; give the path of the file to write in it" % dest)


def check_dest(dest):
    """A fetch's ``dest`` on this host, before anything is read: no file yet or a regular file (not a directory, a
    symbolic link or anything else), in a directory that exists."""
    check_dest_path(dest)
    try:
        found = os.lstat(dest)
    except (FileNotFoundError, NotADirectoryError):
        found = None  # its directory is checked below
    except OSError as exc:
        raise ObjectError("dest: %s cannot be read: %s" % (dest, exc.strerror)) from exc
    if found is not None and stat.S_ISLNK(found.st_mode):
        raise ObjectError("dest: %s is a symbolic link (to %s); give the path of the file itself: a fetch neither "
                          "follows a link nor replaces it" % (dest, os.readlink(dest)))
    if found is not None and stat.S_ISDIR(found.st_mode):
        raise ObjectError("dest: %s is a directory; give the path of the file to write in it, such as %s" % (
            dest, os.path.join(dest, "<name>")))
    if found is not None and not stat.S_ISREG(found.st_mode):
        raise ObjectError("dest: %s is %s; give the path of a regular file" % (dest, _kind(found.st_mode)))
    directory = os.path.dirname(os.path.abspath(dest))
    if not os.path.isdir(directory):
        if os.path.lexists(directory):
            raise ObjectError("dest: the directory of %s, %s, is not a directory" % (dest, directory))
        raise ObjectError("dest: the directory of %s does not exist" % dest)


def checked_fetch_item(item, on_this_host=False):
    """A fetch item (bucket, dest, mode, as FETCH_ARGUMENT_SPEC validates them) checked before anything is read,
    returned with its mode as a number (raises kv.BucketError or ObjectError): the store's name, the mode
    (file_mode), ``dest`` the path of a file; with ``on_this_host``, ``dest`` on this host too (check_dest).
    The fleet's preflight checks an inventory's fetches with it on the controller, where their files (written on
    the hosts) are not."""
    kv.check_bucket("object store", item.get("bucket"))
    mode = file_mode(item.get("mode"))
    if on_this_host:
        check_dest(item.get("dest"))
    else:
        check_dest_path(item.get("dest"))
    return dict(item, mode=mode)


def checked_fetch(bucket, mode, dest):
    """A fetch's input checked before anything is read, its file on this host (checked_fetch_item); returns the
    mode as a number."""
    return checked_fetch_item(dict(bucket=bucket, mode=mode, dest=dest), on_this_host=True)["mode"]


def _no_jetstream(client, js):
    """Why nothing answered the task's JetStream API, worded with what the task set."""
    if js.domain:
        connected = client.connected_domain()
        if connected == js.domain:
            return "JetStream does not answer in domain %r: check that JetStream is enabled for the account" % js.domain
        return ("no JetStream server of domain %r answers (the server this task is connected to is in %s): check "
                "domain, and that a server of that domain is up and linked to this one" % (
                    js.domain, "domain %r" % connected if connected else "no domain"))
    if js.prefix != API:
        return "nothing answers on the JetStream API %s: check api_prefix, and that its account exports it" % js.prefix
    return ("JetStream does not answer in the local domain: check that JetStream is enabled for the account, or set "
            "domain")


def object_store(client, js, bucket, where):
    """The stream of object store ``bucket`` where ``js`` reads (its STREAM.INFO, as the nats clients read it
    before an object), or FetchRefused saying what is there instead: a key-value bucket, no such store, or no
    JetStream at all."""
    try:
        info = js.lookup("STREAM.INFO.OBJ_" + bucket)
        if info is not None:
            return info
        bucket_info = js.lookup("STREAM.INFO.KV_" + bucket)
    except NoRespondersError as exc:
        raise FetchRefused("%s: %s" % (where, _no_jetstream(client, js))) from exc
    if bucket_info:
        raise FetchRefused("%s: %r is a key-value bucket %s, not an object store; no object store %r is there" % (
            where, bucket, js.where(), bucket))
    try:
        stores = sorted(name[len("OBJ_"):] for name in js.call("STREAM.NAMES").get("streams") or []
                        if name.startswith("OBJ_"))
        there = " (object stores there: %s)" % (", ".join(stores) or "none")
    except NatsClientError:
        there = ""  # the names are only a hint
    raise FetchRefused("%s: no object store %r exists %s%s" % (where, bucket, js.where(), there))


def check_digest(found, where):
    """The object's digest is one a fetch checks (SHA-256, as the nats clients write it), else FetchRefused: the
    content could not be verified."""
    digest = found.get("digest") or ""
    algorithm = digest.split("=", 1)[0] if "=" in digest else ""
    if algorithm.upper() == kv.DIGEST_PREFIX[:-1]:
        return
    carries = ("the %s digest %r, which another client wrote" % (algorithm, digest) if algorithm
               else "the digest %r, in no form a nats client writes" % digest if digest else "no digest")
    raise FetchRefused("%s carries %s, not the SHA-256 digest the nats clients write: its content cannot be "
                       "verified, so it is not fetched and dest is left as it was; store the object again with "
                       "jetstream_object_store or a nats client" % (where, carries))


def file_state(dest):
    """(nats digest, SHA-1 checksum, mode) of the file ``dest`` (checked by check_dest), Nones when there is none."""
    try:
        mode = stat.S_IMODE(os.stat(dest).st_mode)
    except FileNotFoundError:
        return None, None, None
    try:
        digest, checksum = file_digests(dest)
    except OSError as exc:
        raise ObjectError("dest: %s cannot be read: %s" % (dest, exc.strerror)) from exc
    return digest, checksum, mode


def _shown_mode(mode):
    return None if mode is None else "%04o" % mode


def fetch_file(client, js, bucket, name, dest, mode, check_mode):
    """``dest`` made the object's content, fetched only when its digest differs, with ``mode``; in check mode only
    what would change. ``dest`` is checked again (check_dest), the store looked up and the object's digest checked
    before any chunk is read. Returns (result: changed, digest, size, dest, checksum; diff: before and after, each
    the file's digest and mode)."""
    where = "object %r of bucket %r" % (name, bucket)
    check_dest(dest)
    before, checksum, mode_before = file_state(dest)
    object_store(client, js, bucket, where)
    found = objects(client, js, bucket).get(name)
    if found is None:
        raise ObjectError("it is not in the bucket %s" % js.where())
    check_digest(found, "%s %s" % (where, js.where()))
    changed = not kv.same_digest(before, found.get("digest"))
    if changed:
        # in check mode read and checked, not written: the checksum the file would have
        checksum = fetch(client, js, bucket, name, found, None if check_mode else (dest, mode))
    elif mode_before != mode:
        changed = True
        if not check_mode:
            try:
                os.chmod(dest, mode)
            except OSError as exc:
                raise ObjectError("dest: the mode of %s cannot be set to %04o: %s" % (dest, mode, exc.strerror)) from exc
    result = dict(changed=changed, digest=found.get("digest"), size=found.get("size"), dest=dest, checksum=checksum)
    diff = dict(before=dict(digest=before, mode=_shown_mode(mode_before)),
                after=dict(digest=found.get("digest"), mode=_shown_mode(mode)))
    return result, diff


def fetch_to_file(client, js, bucket, name, dest, mode, check_mode):
    """fetch_file, returning (result, the file's digest before)."""
    result, diff = fetch_file(client, js, bucket, name, dest, mode, check_mode)
    return result, diff["before"]["digest"]


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
        try:
            handle, temporary = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(dest)),
                                                 prefix=".%s." % os.path.basename(dest))
        except OSError as exc:
            raise ObjectError("dest: %s cannot be written: %s" % (dest, exc.strerror)) from exc
        try:
            with os.fdopen(handle, "wb") as stream:
                for _subject, _headers, data, _seq in messages:
                    stream.write(data)
            os.chmod(temporary, mode)
            os.replace(temporary, dest)
        except OSError as exc:
            raise ObjectError("dest: %s cannot be written: %s" % (dest, exc.strerror)) from exc
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
    return checksum.hexdigest()
