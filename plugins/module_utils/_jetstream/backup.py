# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Backups of JetStream streams - the server's own snapshots, consumers included - and their restore.
Private to the collection.

One directory per stream under the backup directory (0700), each file 0600::

    <path>/<stream>/snapshot.s2     the snapshot as the server sent it (an s2-compressed archive)
    <path>/<stream>/stream.json     the stream's config and state the snapshot reply gave (what a restore sends)
    <path>/<stream>/manifest.json   sha256 and size of both, the server's version, a summary of the stream
                                    and of its consumers, and the fingerprint a second backup compares

A backup is written beside the old one and renamed over it once complete, so an interrupted run leaves the last
good backup. A restore checks every file of every stream named before it sends anything.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time

from ansible_collections.nats_edge.fleet.plugins.module_utils import _versions
from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._files import make_private_dirs, sha256_file
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import JetStream
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import stream_model
from ansible_collections.nats_edge.fleet.plugins.module_utils._units import check_name

FORMAT = 1
SNAPSHOT, STREAM, MANIFEST = "snapshot.s2", "stream.json", "manifest.json"
FILE_MODE = 0o600
CHUNK = 128 * 1024

ARGUMENT_SPEC = dict(
    state=dict(type="str", default="backup", choices=["backup", "restore"]),
    streams=dict(type="list", elements="str", aliases=["name"]),
    path=dict(type="path", required=True),
    replace=dict(type="bool", default=False),
    check_messages=dict(type="bool", default=False),
    consumers=dict(type="bool", default=True),
    replicas=dict(type="int"),
    placement=dict(type="dict", options=dict(
        cluster=dict(type="str"),
        tags=dict(type="list", elements="str"),
    )),
    copies=dict(type="list", elements="dict", default=[], options=dict(
        stream=dict(type="str", required=True),
        domain=dict(type="str"),
    )),
)
# the JetStream API level of the first release (2.15.0) whose sources notice that the stream they read was made again
RECREATION_LEVEL = 5


class BackupError(NatsEdgeError):
    """A backup that cannot be taken or restored; the message names the stream and the file or option."""


# --------------------------------------------------------------------------
# pure: names, summaries, fingerprints, manifests


def check_streams(names, option="streams"):
    """The stream names given, each a valid stream name (no '.', '*', '>', '/', '\\' or whitespace), without
    repeats; refused naming the option and the name."""
    seen = []
    for name in names or []:
        try:
            check_name(name)
        except ValueError as exc:
            raise BackupError("%s: %r is not a stream name: %s" % (option, name, exc)) from exc
        if name not in seen:
            seen.append(name)
    return seen


def summary(state):
    """The counts of a stream state: messages, bytes, consumers, first and last sequence."""
    state = state or {}
    return {"messages": int(state.get("messages") or 0), "bytes": int(state.get("bytes") or 0),
            "consumers": int(state.get("consumer_count") or 0), "first_seq": int(state.get("first_seq") or 0),
            "last_seq": int(state.get("last_seq") or 0)}


def consumer_positions(consumers):
    """What a backup keeps of each consumer, by name: its config and where it stands (delivered and ack floor)."""
    found = {}
    for info in consumers or []:
        delivered, floor = info.get("delivered") or {}, info.get("ack_floor") or {}
        found[info.get("name")] = {
            "config": info.get("config") or {},
            "delivered": [int(delivered.get("consumer_seq") or 0), int(delivered.get("stream_seq") or 0)],
            "ack_floor": [int(floor.get("consumer_seq") or 0), int(floor.get("stream_seq") or 0)],
            "num_ack_pending": int(info.get("num_ack_pending") or 0),
            "num_redelivered": int(info.get("num_redelivered") or 0)}
    return found


def fingerprint(config, state, consumers):
    """A digest of what a snapshot of the stream would hold: its config, counts and sequences, and each consumer's
    config and positions. Two backups with the same fingerprint hold the same data."""
    state = dict(summary(state), num_deleted=int((state or {}).get("num_deleted") or 0))
    text = json.dumps({"config": config or {}, "state": state, "consumers": consumer_positions(consumers)},
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def verify(directory, stream):
    """The manifest of the backup of ``stream`` in ``directory`` once every file it lists has its size and
    sha256; refused naming the stream and the file that is missing or differs."""
    manifest = read_manifest(directory, stream)
    if manifest is None:
        raise BackupError("stream %s: no backup in %s (%s is missing)" % (stream, directory, MANIFEST))
    files = manifest.get("files")
    if not isinstance(files, dict) or set(files) != {SNAPSHOT, STREAM}:
        raise BackupError("stream %s: %s does not list %s and %s" % (
            stream, os.path.join(directory, MANIFEST), SNAPSHOT, STREAM))
    for name in sorted(files):
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            raise BackupError("stream %s: the backup's file %s is missing" % (stream, path))
        expected = files[name] or {}
        size, digest = os.path.getsize(path), sha256_file(path)
        if size != expected.get("size") or digest != expected.get("sha256"):
            raise BackupError("stream %s: the backup's file %s fails its checksum (sha256 %s, %d bytes; the "
                              "manifest says %s, %s bytes): it is damaged or was changed, nothing was restored" % (
                                  stream, path, digest, size, expected.get("sha256"), expected.get("size")))
    return manifest


def read_manifest(directory, stream):
    """The manifest in ``directory``, None when there is none; one that is not a manifest of ``stream`` is
    refused."""
    path = os.path.join(directory, MANIFEST)
    try:
        with open(path) as handle:
            manifest = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise BackupError("stream %s: %s is not a backup manifest: %s" % (stream, path, exc)) from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or manifest.get("stream") != stream:
        raise BackupError("stream %s: %s is not a manifest (format %d) of a backup of this stream" % (
            stream, path, FORMAT))
    return manifest


def version_refusal(stream, manifest, version):
    """Why a server of ``version`` (a stream_model.ServerVersion) cannot take the backup: a snapshot is read by
    the release that wrote it or a newer one."""
    taken = _versions.parse_version(manifest.get("server_version"))
    if not taken or version is None or version.number[:2] >= taken[:2]:
        return None
    return ("stream %s: the backup was taken on nats-server %s; restoring it needs nats-server %d.%d or later "
            "(the server is %s)" % (stream, manifest.get("server_version"), taken[0], taken[1],
                                    stream_model.version_text(version)))


def matches(manifest, info, consumers):
    """Whether the stream as it is (its info and consumers) holds what the backup holds: the same counts and
    sequences and the same consumers. A restored stream matches its backup."""
    return (summary(info.get("state")) == manifest.get("summary")
            and sorted(consumer_positions(consumers)) == sorted(manifest.get("consumers") or {}))


# --------------------------------------------------------------------------
# reading the account


def stream_names(js):
    """Every stream of the account in the domain, sorted."""
    return sorted(js.every_page("STREAM.NAMES", "streams"))


def consumers_of(js, stream):
    return js.every_page("CONSUMER.LIST.%s" % stream, "consumers")


def target_version(js, info=None):
    """The version (floor) of the domain's servers: a stream's stamp, else what $JS.API.INFO shows."""
    if info:
        version = stream_model.version_from_stream(info)
        if version.exact:
            return version
    return stream_model.version_from_account(js.call("INFO"))


# --------------------------------------------------------------------------
# files


def _write_json(path, data):
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    with os.fdopen(handle, "w") as stream:
        json.dump(data, stream, indent=1, sort_keys=True)
        stream.write("\n")


def _replace_dir(new, final):
    """Put the complete directory ``new`` in place of ``final`` (renames: the old backup stays until the new one
    is there)."""
    old = None
    if os.path.exists(final):
        old = tempfile.mkdtemp(prefix=".%s.old-" % os.path.basename(final), dir=os.path.dirname(final))
        os.rmdir(old)
        os.rename(final, old)
    os.rename(new, final)
    if old:
        shutil.rmtree(old, ignore_errors=True)


def _chunks(path):
    with open(path, "rb") as handle:
        yield from iter(lambda: handle.read(CHUNK), b"")


# --------------------------------------------------------------------------
# the two directions


def _entry(stream, action, path, counts, **more):
    entry = dict(name=stream, action=action, path=path, **counts)
    entry.update(more)
    return entry


def backup(client, js, streams, path, check_mode, check_messages=False, with_consumers=True):
    """Back up ``streams`` (every stream of the account when empty) into ``path``, with their consumers unless
    ``with_consumers`` is false. Returns (entries, before, after): an entry per stream, its action ``written`` or
    ``unchanged`` with its counts."""
    names = streams or stream_names(js)
    plans = []
    for stream in names:  # everything is read and checked before the first snapshot
        info = js.lookup("STREAM.INFO.%s" % stream)
        if info is None:
            raise BackupError("stream %s does not exist %s: nothing to back up" % (stream, js.where()))
        consumers = consumers_of(js, stream) if with_consumers else []
        directory = os.path.join(path, stream)
        print_ = fingerprint(info.get("config"), info.get("state"), consumers)
        try:
            current = verify(directory, stream) if os.path.exists(directory) else None
        except BackupError:
            current = None  # a damaged backup is replaced
        plans.append((stream, info, consumers, directory, print_, current))
    entries, before, after = [], {}, {}
    for stream, info, consumers, directory, print_, current in plans:
        before[stream] = current.get("summary") if current else None
        if current and current.get("fingerprint") == print_:
            entries.append(_entry(stream, "unchanged", directory, current["summary"], taken=current.get("taken")))
            after[stream] = before[stream]
            continue
        if check_mode:
            counts = dict(summary(info.get("state")), consumers=len(consumers))
            entries.append(_entry(stream, "written", directory, counts))
            after[stream] = counts
            continue
        manifest = _take(client, js, stream, directory, print_, consumers, check_messages, with_consumers)
        entries.append(_entry(stream, "written", directory, manifest["summary"], taken=manifest["taken"]))
        after[stream] = manifest["summary"]
    return entries, before, after


def _take(client, js, stream, directory, print_, consumers, check_messages, with_consumers=True):
    parent = os.path.dirname(directory)
    make_private_dirs(parent)
    work = tempfile.mkdtemp(prefix=".%s.new-" % stream, dir=parent)  # 0700
    try:
        snapshot = os.path.join(work, SNAPSHOT)
        handle = os.open(snapshot, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        with os.fdopen(handle, "wb") as out:
            body = {"no_consumers": not with_consumers}
            if check_messages:
                body["jsck"] = True
            reply, _size = client.snapshot_stream(js.prefix, stream, body, out)
            out.flush()
            os.fsync(out.fileno())
        _write_json(os.path.join(work, STREAM), {"config": reply.get("config") or {}, "state": reply.get("state") or {}})
        version = client.server_version() or stream_model.version_text(target_version(js))
        manifest = {
            "format": FORMAT, "stream": stream, "taken": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "server_version": version, "summary": dict(summary(reply.get("state")), consumers=len(consumers)),
            "consumers": consumer_positions(consumers), "fingerprint": print_,
            "files": dict((name, {"sha256": sha256_file(os.path.join(work, name)),
                                  "size": os.path.getsize(os.path.join(work, name))}) for name in (SNAPSHOT, STREAM))}
        _write_json(os.path.join(work, MANIFEST), manifest)
        _replace_dir(work, directory)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return manifest


def backed_up_streams(path):
    """The streams with a backup (a manifest) in ``path``."""
    if not os.path.isdir(path):
        return []
    return sorted(name for name in os.listdir(path)
                  if not name.startswith(".") and os.path.isfile(os.path.join(path, name, MANIFEST)))


def _external_prefix(source):
    return ((source.get("external") or {}).get("api") or "").rstrip(".")


def copy_plans(client, js, copies, stream, start):
    """How each of ``copies`` (``{stream, domain}``: the streams that source ``stream``, such as the hub's
    aggregates) is made to read the restored ``stream`` from sequence ``start``: a list of
    ``(copy js, copy name, new config or None when it already starts there, entry)``. A copy that does not exist,
    does not source ``stream`` in ``js``'s domain, or mirrors it is refused, naming it."""
    plans = []
    for index, copy in enumerate(copies or ()):
        in_domain = " in domain %s" % copy["domain"] if copy.get("domain") else ""
        where = "copies[%d]: stream %s%s" % (index, copy["stream"], in_domain)
        cjs = JetStream(client, domain=copy.get("domain"))
        info = cjs.lookup("STREAM.INFO.%s" % copy["stream"])
        if info is None:
            raise BackupError("%s does not exist: nothing was restored" % where)
        config = json.loads(json.dumps(info.get("config") or {}))
        if ((config.get("mirror") or {}).get("name")) == stream:
            raise BackupError("%s mirrors stream %s, and a mirror's start cannot change: nothing was restored; "
                              "leave it out of copies (it reads the restored stream from its first message)" % (
                                  where, stream))
        same_domain = (copy.get("domain") or None) == (js.domain or None)
        matching = [source for source in config.get("sources") or () if source.get("name") == stream and (
            _external_prefix(source) == js.prefix if source.get("external") else same_domain)]
        if not matching:
            raise BackupError("%s does not source stream %s from %s: nothing was restored" % (
                where, stream, js.where()))
        changed = False
        for source in matching:
            if source.get("opt_start_seq") != start or source.get("opt_start_time"):
                source["opt_start_seq"] = start
                source.pop("opt_start_time", None)
                changed = True
        level = int(((cjs.call("INFO").get("api") or {}).get("level")) or 0)
        entry = dict(stream=copy["stream"], domain=copy.get("domain"), start_seq=start, changed=changed)
        if level < RECREATION_LEVEL:
            entry["warning"] = (
                "%s: its servers (JetStream API level %d) are older than nats-server 2.15.0 and do not notice that "
                "stream %s was restored: it goes on after the last sequence it read from the lost stream, so what "
                "is published after the restore up to that sequence is not copied" % (where, level, stream))
        plans.append((cjs, copy["stream"], config if changed else None, entry))
    return plans


def restored_config(config, replicas=None, placement=None):
    """The config a restore sends: the backup's, with ``replicas`` and ``placement`` (``cluster``, ``tags``) in
    place of its own where given (a stream restored into another cluster, or with more replicas)."""
    config = dict(config or {})
    if replicas is not None:
        if not 1 <= replicas <= 5:
            raise BackupError("replicas: %d: a stream has 1 to 5 replicas" % replicas)
        config["num_replicas"] = replicas
    if placement:
        given = dict((key, value) for key, value in placement.items() if value)
        if given:
            config["placement"] = dict(config.get("placement") or {}, **given)
    return config


def restore(client, js, streams, path, replace, check_mode, copies=(), replicas=None, placement=None):
    """Restore ``streams`` (every stream backed up in ``path`` when empty). Every backup is verified and every
    target checked before anything is sent. Returns (entries, before, after); an entry's action is ``restored``,
    ``replaced`` (an existing stream deleted first, with ``replace``) or ``unchanged`` (the stream already holds
    what the backup holds)."""
    names = streams or backed_up_streams(path)
    if not names:
        raise BackupError("path: %s holds no stream backup" % path)
    plans, version = [], None
    for stream in names:
        directory = os.path.join(path, stream)
        manifest = verify(directory, stream)
        with open(os.path.join(directory, STREAM)) as handle:
            body = json.load(handle)
        if (body.get("config") or {}).get("name") != stream:
            raise BackupError("stream %s: %s holds the config of stream %r" % (
                stream, os.path.join(directory, STREAM), (body.get("config") or {}).get("name")))
        info = js.lookup("STREAM.INFO.%s" % stream)
        version = version or target_version(js, info)
        refusal = version_refusal(stream, manifest, version)
        if refusal:
            raise BackupError(refusal)
        action = "restored"
        if info is not None:
            if matches(manifest, info, consumers_of(js, stream)):
                action = "unchanged"
            elif not replace:
                raise BackupError(
                    "stream %s exists %s with %d messages (last sequence %d) and is not what the backup holds "
                    "(%d messages, last sequence %d): nothing was restored; set replace=true to delete it and "
                    "restore the backup" % (stream, js.where(), summary(info.get("state"))["messages"],
                                            summary(info.get("state"))["last_seq"], manifest["summary"]["messages"],
                                            manifest["summary"]["last_seq"]))
            else:
                action = "replaced"
        start = int(manifest["summary"].get("last_seq") or 0) + 1
        copied = copy_plans(client, js, copies, stream, start) if action != "unchanged" else []
        body = dict(body, config=restored_config(body.get("config"), replicas, placement))
        plans.append((stream, directory, manifest, body, info, action, copied))
    entries, before, after = [], {}, {}
    for stream, directory, manifest, body, info, action, copied in plans:
        before[stream] = summary(info.get("state")) if info is not None else None
        counts = manifest["summary"]
        if action != "unchanged" and not check_mode:
            # the copies first: they already hold what the backup holds, and read the restored stream from its
            # first new message once they notice it (before the restore, so that they cannot start earlier)
            for cjs, name, config, _entry_ in copied:
                if config is not None:
                    cjs.call("STREAM.UPDATE.%s" % name, config)
            if action == "replaced":
                js.call("STREAM.DELETE.%s" % stream)
            reply = client.restore_stream(js.prefix, stream, body, _chunks(os.path.join(directory, SNAPSHOT)),
                                          timeout=max(client.timeout, 30.0))
            counts = dict(summary(reply.get("state")), consumers=len(consumers_of(js, stream)))
        after[stream] = counts
        entries.append(_entry(stream, action, directory, counts, taken=manifest.get("taken"),
                              copies=[entry for _cjs, _name, _config, entry in copied]))
    return entries, before, after
