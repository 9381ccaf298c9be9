# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Backups of an operator's part of an nsc store - its JWTs, the seeds of its keys and its creds - and their
restore. Private to the collection.

The backup directory (0700) holds one backup of one operator, each file 0600::

    <path>/manifest.json                 format, operator name and public key, the archive's name, sha256 and
                                         size, every member's path, sha256 and size, when it was made
    <path>/<operator>.<sha256[:12]>.tar  the archive (.tar.gz when compressed)

The archive's members are named after where they go::

    store/<OP>/...                            <store_dir>/<OP>/...          (JWTs, the .nsc marker, kept keys)
    keys/keys/<O|A|U>/<pub[1:3]>/<PUB>.nk     <keys_dir>/keys/...           (seeds of the operator's keys)
    keys/creds/<OP>/<ACC>/<U>.creds           <keys_dir>/creds/<OP>/...     (creds files)

The seeds are those of the keys the operator's JWTs name - the operator's, its accounts' and its users' identity
and signing keys, and the keys a rotation replaced and keeps (``.previous-signing-keys``, ``.<user>.previous-keys``)
- that the key store holds; the key store may hold other operators' seeds, which are left out.

A new archive is written under a new name, then the manifest is renamed over the old one, then the old archive is
removed: an interrupted run leaves the last good backup. A restore checks the manifest, the archive and every
member before it writes anything.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import posixpath
import re
import shutil
import stat
import tarfile
import tempfile
import time

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
from ansible_collections.nats_edge.fleet.plugins.module_utils._files import sha256_file
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.common import STORE_ARGSPEC
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import (
    Store, StoreError, atomic_write, directory_lock, make_dirs)

FORMAT = 1
KIND = "nsc-operator"
MANIFEST = "manifest.json"
FILE_MODE = 0o600
STORE, KEYS = "store", "keys"
# the largest archive a restore reads (a store of many thousand users is a few MiB)
MAX_ARCHIVE = 256 * 1024 * 1024

ARGUMENT_SPEC = dict(
    STORE_ARGSPEC,
    state=dict(type="str", default="backup", choices=["backup", "restore"]),
    path=dict(type="path", required=True),
    replace=dict(type="bool", default=False),
    compress=dict(type="bool", default=True),
)

_PUBLIC = re.compile(r"^[OAU][A-Z2-7]{55}$")
_ARCHIVE_NAME = re.compile(r"^[^/\\\x00]+\.tar(\.gz)?$")


class BackupError(StoreError):
    """A backup that cannot be written or restored; the message names the operator and the file or option."""


# --------------------------------------------------------------------------
# pure: member names, the keys a store names, manifests


def store_member(operator, *parts):
    return posixpath.join(STORE, operator, *parts)


def seed_member(public):
    """The member name of the seed of ``public``, as nsc's key store lays it out."""
    return posixpath.join(KEYS, "keys", jwt.KINDS[jwt.kind_of(public)], public[1:3], "%s.nk" % public)


def creds_member(operator, *parts):
    return posixpath.join(KEYS, "creds", operator, *parts)


def check_member(name, operator):
    """(``STORE`` or ``KEYS``, the path below that root as a list of parts) of a member name of a backup of
    ``operator``; BackupError for a name that is absolute, holds '..', '.', an empty part or a backslash, or that
    names anything but the operator's directory, a seed or the operator's creds - a member never lands outside
    them."""
    if not isinstance(name, str) or not name:
        raise BackupError("member %r is not a file name" % (name,))
    if name.startswith("/") or "\\" in name or "\x00" in name:
        raise BackupError("member %r is an absolute path or holds a backslash: refused" % name)
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise BackupError("member %r holds '..', '.' or an empty part: refused" % name)
    if parts[0] == STORE and len(parts) >= 3 and parts[1] == operator:
        return STORE, parts[1:]
    if parts[0] == KEYS and len(parts) >= 4 and parts[1:3] == ["creds", operator]:
        return KEYS, parts[1:]
    if parts[0] == KEYS and len(parts) == 5 and parts[1] == "keys" and parts[4].endswith(".nk"):
        public = parts[4][:-len(".nk")]
        if _PUBLIC.match(public) and parts[2] == public[0] and parts[3] == public[1:3]:
            return KEYS, parts[1:]
    raise BackupError("member %r is none of operator %r's files (%s/%s/..., %s/keys/<kind>/<xx>/<key>.nk, "
                      "%s/creds/%s/...): refused" % (name, operator, STORE, operator, KEYS, KEYS, operator))


def is_seed(name):
    return name.startswith(KEYS + "/keys/")


def referenced_keys(files):
    """The public keys the operator's files name, sorted: the subject and signing keys of every JWT
    (``*.jwt``; a scoped signing key by its ``key``) and the keys a rotation kept (``*previous-keys``,
    ``*previous-signing-keys``, JSON lists). ``files``: {member name: bytes} of the store's part. A file that
    cannot be read is refused, naming it."""
    keys = set()
    for name in sorted(files):
        if not name.startswith(STORE + "/"):
            continue
        base = posixpath.basename(name)
        if base.endswith(".jwt"):
            try:
                claims = jwt.decode(files[name].decode(), verify=False)
            except (jwt.JWTError, UnicodeDecodeError) as exc:
                raise BackupError("%s is not a JWT: %s" % (name, exc)) from exc
            found = [claims.get("sub")] + [jwt.signing_key_id(key) for key in
                                           (claims.get("nats") or {}).get("signing_keys") or []]
        elif base.endswith(("previous-keys", "previous-signing-keys")):
            try:
                found = json.loads(files[name].decode())
            except (ValueError, UnicodeDecodeError) as exc:
                raise BackupError("%s is not a JSON list of keys: %s" % (name, exc)) from exc
            found = found if isinstance(found, list) else []
        else:
            continue
        keys.update(key for key in found if isinstance(key, str) and _PUBLIC.match(key))
    return sorted(keys)


def digest(data):
    return hashlib.sha256(data).hexdigest()


def describe(files):
    """{member name: {sha256, size}} of {member name: bytes}."""
    return dict((name, {"sha256": digest(data), "size": len(data)}) for name, data in files.items())


def counts(names, operator):
    """How many accounts, users, seeds, creds and files the member ``names`` hold."""
    names = list(names)
    accounts = [n for n in names if re.match(r"^%s/[^/]+/accounts/([^/]+)/\1\.jwt$" % STORE, n)]
    users = [n for n in names if re.match(r"^%s/[^/]+/accounts/[^/]+/users/[^/]+\.jwt$" % STORE, n)]
    return {"accounts": len(accounts), "users": len(users), "seeds": len([n for n in names if is_seed(n)]),
            "creds": len([n for n in names if n.startswith(creds_member(operator) + "/")]), "files": len(names)}


def archive_name(operator, archive_digest, compress):
    return "%s.%s.tar%s" % (operator, archive_digest[:12], ".gz" if compress else "")


def make_manifest(operator, public, members, name, archive_digest, size, compress, created):
    """The manifest of a backup: ``members`` ({name: {sha256, size}}) as a list sorted by path."""
    return {"format": FORMAT, "kind": KIND, "operator": operator, "operator_public_key": public,
            "created": created,
            "archive": {"name": name, "sha256": archive_digest, "size": size,
                        "compression": "gzip" if compress else "none"},
            "members": [dict(path=path, **members[path]) for path in sorted(members)]}


def check_manifest(manifest, operator, where):
    """{member name: {sha256, size}} of a manifest of a backup of ``operator`` read from ``where``; BackupError
    naming the file and the field that is not right, or naming both operators."""
    if not isinstance(manifest, dict) or manifest.get("kind") != KIND or manifest.get("format") != FORMAT:
        raise BackupError("%s is not a manifest (format %d) of an nsc operator backup" % (where, FORMAT))
    if manifest.get("operator") != operator:
        raise BackupError("%s is the backup of operator %r, not of operator %r" % (
            where, manifest.get("operator"), operator))
    public = manifest.get("operator_public_key")
    if not isinstance(public, str) or not _PUBLIC.match(public) or public[0] != "O":
        raise BackupError("%s: operator_public_key %r is not an operator's public key" % (where, public))
    archive = manifest.get("archive")
    if (not isinstance(archive, dict) or not isinstance(archive.get("name"), str)
            or not _ARCHIVE_NAME.match(archive["name"]) or archive["name"] in (".", "..")
            or not isinstance(archive.get("sha256"), str) or not isinstance(archive.get("size"), int)):
        raise BackupError("%s: archive is not a file name with its sha256 and size" % where)
    members = manifest.get("members")
    if not isinstance(members, list) or not members:
        raise BackupError("%s: members is not a list of files" % where)
    found = {}
    for index, entry in enumerate(members):
        if (not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str)
                or not isinstance(entry.get("size"), int)):
            raise BackupError("%s: members[%d] has no path, sha256 and size" % (where, index))
        try:
            check_member(entry.get("path"), operator)
        except BackupError as exc:
            raise BackupError("%s: members[%d]: %s" % (where, index, exc)) from exc
        if entry["path"] in found:
            raise BackupError("%s: members[%d]: %s is listed twice" % (where, index, entry["path"]))
        found[entry["path"]] = {"sha256": entry["sha256"], "size": entry["size"]}
    if store_member(operator, "%s.jwt" % operator) not in found:
        raise BackupError("%s: members do not hold the operator's JWT %s" % (
            where, store_member(operator, "%s.jwt" % operator)))
    return found


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# --------------------------------------------------------------------------
# reading the store


def _read_regular(path, name):
    """The bytes of the regular file ``path``; a symlink or anything else is refused naming ``name``."""
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):
        raise BackupError("%s (%s) is %s, not a file: refused" % (
            name, path, "a symlink" if stat.S_ISLNK(info.st_mode) else "not a regular file"))
    with open(path, "rb") as handle:
        return handle.read(), int(info.st_mtime)


def _walk(root, prefix, files, mtimes):
    """Every file below ``root`` as members named ``prefix/...``; a symlink or other non-file is refused."""
    if not os.path.lexists(root):
        return
    if os.path.islink(root) or not os.path.isdir(root):
        raise BackupError("%s (%s) is not a directory: refused" % (prefix, root))
    for entry in sorted(os.listdir(root)):
        path = os.path.join(root, entry)
        name = posixpath.join(prefix, entry)
        if os.path.isdir(path) and not os.path.islink(path):
            _walk(path, name, files, mtimes)
        else:
            files[name], mtimes[name] = _read_regular(path, name)


def collect(store):
    """({member name: bytes}, {member name: mtime}) of ``store``'s operator: the files of its directory, its creds
    and the seeds of the keys its files name that the key store holds. Empty when the store holds nothing of the
    operator. A seed file that holds another key's seed is refused, naming the file (never the seed)."""
    files, mtimes = {}, {}
    _walk(store.root, store_member(store.operator), files, mtimes)
    _walk(os.path.join(store.keys_dir, "creds", store.operator), creds_member(store.operator), files, mtimes)
    for public in referenced_keys(files):
        path = store.key_path(public)
        if not os.path.lexists(path):
            continue
        name = seed_member(public)
        files[name], mtimes[name] = _read_regular(path, name)
        check_seed(files[name], public, "%s (%s)" % (name, path))
    return files, mtimes


def check_seed(data, public, where):
    try:
        found = jwt.check_seed(data.decode().strip())
    except (jwt.JWTError, UnicodeDecodeError) as exc:
        raise BackupError("%s does not hold a valid seed" % where) from exc
    if found != public:
        raise BackupError("%s does not hold the seed of %s" % (where, public))


def operator_public_key(files, operator):
    name = store_member(operator, "%s.jwt" % operator)
    if name not in files:
        return None
    try:
        claims = jwt.decode(files[name].decode(), verify=True)
    except (jwt.JWTError, UnicodeDecodeError) as exc:
        raise BackupError("%s: %s" % (name, exc)) from exc
    if (claims.get("nats") or {}).get("type") != "operator" or claims.get("iss") != claims.get("sub"):
        raise BackupError("%s is not an operator JWT signed by the operator's own key" % name)
    return claims.get("sub")


# --------------------------------------------------------------------------
# files


def build_archive(files, mtimes, compress):
    """The archive (bytes) of ``files``: regular members only, each 0600, owned by nobody in particular; the gzip
    header carries no time, so the same files and times give the same bytes."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(files[name]), FILE_MODE, mtimes.get(name, 0)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            archive.addfile(info, io.BytesIO(files[name]))
    data = raw.getvalue()
    if not compress:
        return data
    packed = io.BytesIO()
    with gzip.GzipFile(filename="", fileobj=packed, mode="wb", mtime=0) as stream:
        stream.write(data)
    return packed.getvalue()


def read_manifest(path, operator):
    """The manifest in the backup directory ``path``, None when there is none."""
    where = os.path.join(path, MANIFEST)
    try:
        with open(where) as handle:
            manifest = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise BackupError("%s is not a backup manifest: %s" % (where, exc)) from exc
    check_manifest(manifest, operator, where)
    return manifest


def other_operator(path, operator):
    """Whether ``path`` holds the manifest of a backup of another operator than ``operator``."""
    try:
        with open(os.path.join(path, MANIFEST)) as handle:
            manifest = json.load(handle)
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("kind") == KIND and manifest.get("operator") != operator


def verify_archive(path, manifest):
    """The archive's path once its size and sha256 are the manifest's; BackupError naming it otherwise."""
    archive = manifest["archive"]
    where = os.path.join(path, archive["name"])
    if not os.path.isfile(where) or os.path.islink(where):
        raise BackupError("the backup's archive %s is missing" % where)
    size, found = os.path.getsize(where), sha256_file(where)
    if size != archive["size"] or found != archive["sha256"]:
        raise BackupError("the backup's archive %s fails its checksum (sha256 %s, %d bytes; the manifest says %s, "
                          "%s bytes): it is damaged or was changed, nothing was restored" % (
                              where, found, size, archive["sha256"], archive["size"]))
    return where


def read_archive(where, members, operator):
    """({member name: bytes}, {member name: mtime}) of the verified archive at ``where``: every member a regular
    file with a name check_member takes, listed in the manifest's ``members`` with the same sha256 and size, each
    of those members in it once; every seed the seed of the key it is named after. BackupError naming the archive
    and the member otherwise."""
    files, mtimes = {}, {}
    try:
        with tarfile.open(where, mode="r:*") as archive:
            for info in archive:
                name = info.name
                try:
                    check_member(name, operator)
                except BackupError as exc:
                    raise BackupError("the backup's archive %s: %s" % (where, exc)) from exc
                if not info.isreg():
                    kind = "a symlink" if info.issym() else "a hard link" if info.islnk() else (
                        "a directory" if info.isdir() else "not a regular file")
                    raise BackupError("the backup's archive %s: member %s is %s: refused" % (where, name, kind))
                if name in files:
                    raise BackupError("the backup's archive %s: member %s is in it twice: refused" % (where, name))
                if name not in members:
                    raise BackupError("the backup's archive %s: member %s is not in the manifest: refused" % (
                        where, name))
                if info.size != members[name]["size"]:
                    raise BackupError("the backup's archive %s: member %s fails its checksum (%d bytes; the "
                                      "manifest says %d): it is damaged or was changed, nothing was restored" % (
                                          where, name, info.size, members[name]["size"]))
                data = archive.extractfile(info).read()
                if digest(data) != members[name]["sha256"] or len(data) != members[name]["size"]:
                    raise BackupError("the backup's archive %s: member %s fails its checksum: it is damaged or "
                                      "was changed, nothing was restored" % (where, name))
                files[name], mtimes[name] = data, int(info.mtime)
    except (tarfile.TarError, EOFError, OSError, gzip.BadGzipFile) as exc:
        raise BackupError("the backup's archive %s cannot be read: %s" % (where, exc)) from exc
    missing = sorted(set(members) - set(files))
    if missing:
        raise BackupError("the backup's archive %s lacks %s, which the manifest lists: nothing was restored" % (
            where, ", ".join(missing)))
    for name in files:
        if is_seed(name):
            check_seed(files[name], posixpath.basename(name)[:-len(".nk")], "the backup's member %s" % name)
    return files, mtimes


def target(store, name):
    """Where member ``name`` goes in ``store``."""
    root, parts = check_member(name, store.operator)
    return os.path.join(store.store_dir if root == STORE else store.keys_dir, *parts)


def _write_tree(store, files, mtimes, prefix, final):
    """Put the members below ``prefix`` in place of the directory ``final``, whole: written into a new directory
    beside it (0700, files 0600), then renamed over it. No member: ``final`` goes."""
    names = [name for name in files if name.startswith(prefix + "/")]
    parent = os.path.dirname(final)
    if not names:
        if os.path.lexists(final):
            shutil.rmtree(final)
        return
    make_dirs(parent)
    work = tempfile.mkdtemp(prefix=".%s.restore-" % os.path.basename(final), dir=parent)  # 0700
    try:
        for name in sorted(names):
            path = os.path.join(work, *name[len(prefix) + 1:].split("/"))
            make_dirs(os.path.dirname(path))
            handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
            with os.fdopen(handle, "wb") as stream:
                stream.write(files[name])
                stream.flush()
                os.fsync(stream.fileno())
            os.utime(path, (mtimes.get(name, 0), mtimes.get(name, 0)))
        old = None
        if os.path.lexists(final):
            old = tempfile.mkdtemp(prefix=".%s.old-" % os.path.basename(final), dir=parent)
            os.rmdir(old)
            os.rename(final, old)
        os.rename(work, final)
        if old:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def write_store(store, files, mtimes):
    """Write the members into ``store``: the seeds first (added, or put right), then the creds, then the
    operator's directory, each directory replaced whole."""
    for name in sorted(files):
        if is_seed(name):
            path = target(store, name)
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as handle:
                    if handle.read() == files[name]:
                        continue
            elif os.path.lexists(path):
                os.unlink(path)
            atomic_write(path, files[name], FILE_MODE)
            os.utime(path, (mtimes.get(name, 0), mtimes.get(name, 0)))
    _write_tree(store, files, mtimes, creds_member(store.operator),
                os.path.join(store.keys_dir, "creds", store.operator))
    _write_tree(store, files, mtimes, store_member(store.operator), store.root)


# --------------------------------------------------------------------------
# the two directions


def _result(action, store, path, manifest, archive_path, members):
    return dict(action=action, operator=store.operator, operator_public_key=manifest["operator_public_key"],
                backup_dir=path, manifest=os.path.join(path, MANIFEST), archive=archive_path,
                archive_sha256=manifest["archive"]["sha256"], archive_size=manifest["archive"]["size"],
                created=manifest["created"], store_path=store.root, keys_dir=store.keys_dir,
                counts=counts(members, store.operator))


def check_path(store, path):
    """Refuse a backup directory inside the operator's directory or the key store: a backup would hold itself, a
    restore would remove it."""
    real = os.path.realpath(path)
    for place, what in ((store.root, "the operator's directory"), (store.keys_dir, "the key store")):
        inside = os.path.realpath(place)
        if real == inside or real.startswith(inside.rstrip(os.sep) + os.sep):
            raise BackupError("path: %s is inside %s %s; keep the backup apart from the store" % (path, what, place))
    return path


def _digests(members):
    return dict((name, entry["sha256"]) for name, entry in (members or {}).items())


def backup(params, check_mode):
    """Back up the operator's part of the store into ``params['path']``. Returns (result, diff): the action is
    ``written`` or ``unchanged`` (the backup there holds the same members, with the same compression)."""
    store = Store(params["store_dir"], params["keys_dir"], params["operator"])
    path = check_path(store, os.path.abspath(os.path.expanduser(params["path"])))
    with directory_lock(store.store_dir, params["lock_timeout"], shared=True, create=False):
        files, mtimes = collect(store)
    public = operator_public_key(files, store.operator)
    if public is None:
        raise BackupError("the store %s does not hold operator %r (no %s): nothing to back up" % (
            store.store_dir, store.operator, store.operator_jwt_path))
    members = describe(files)
    try:
        current = read_manifest(path, store.operator)
    except BackupError:
        if other_operator(path, store.operator):
            raise
        current = None  # a damaged manifest is replaced
    current_members, old = None, current["archive"]["name"] if current else None
    if current is not None:
        current_members = check_manifest(current, store.operator, os.path.join(path, MANIFEST))
        try:
            verify_archive(path, current)
        except BackupError:
            current = None  # a damaged backup is replaced
    compression = "gzip" if params["compress"] else "none"
    diff = {"before": _digests(current_members), "after": _digests(members)}
    if (current is not None and _digests(current_members) == _digests(members)
            and current["archive"].get("compression") == compression):
        return _result("unchanged", store, path, current, os.path.join(path, current["archive"]["name"]),
                       current_members), diff
    data = build_archive(files, mtimes, params["compress"])
    name = archive_name(store.operator, digest(data), params["compress"])
    manifest = make_manifest(store.operator, public, members, name, digest(data), len(data), params["compress"],
                             now())
    if not check_mode:
        make_dirs(path)
        atomic_write(os.path.join(path, name), data, FILE_MODE)
        atomic_write(os.path.join(path, MANIFEST), json.dumps(manifest, indent=1, sort_keys=True) + "\n", FILE_MODE)
        if old and old != name and os.path.lexists(os.path.join(path, old)):
            os.unlink(os.path.join(path, old))
        _fsync_dir(path)
    return _result("written", store, path, manifest, os.path.join(path, name), members), diff


def _fsync_dir(path):
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


def restore(params, check_mode):
    """Restore the backup in ``params['path']`` into the store. Everything is verified before the store is
    locked; under the lock the store's part of the operator is compared with the backup. Returns (result, diff):
    the action is ``unchanged`` (the store holds exactly the backup), ``restored`` (it held nothing of the
    operator) or ``replaced`` (it held something else, and ``replace`` was set)."""
    store = Store(params["store_dir"], params["keys_dir"], params["operator"])
    path = check_path(store, os.path.abspath(os.path.expanduser(params["path"])))
    manifest = read_manifest(path, store.operator)
    if manifest is None:
        raise BackupError("path: no backup in %s (%s is missing)" % (path, MANIFEST))
    members = check_manifest(manifest, store.operator, os.path.join(path, MANIFEST))
    archive_path = verify_archive(path, manifest)
    if manifest["archive"]["size"] > MAX_ARCHIVE:
        raise BackupError("the backup's archive %s is larger than %d bytes: refused" % (archive_path, MAX_ARCHIVE))
    files, mtimes = read_archive(archive_path, members, store.operator)
    if operator_public_key(files, store.operator) != manifest["operator_public_key"]:
        raise BackupError("the backup's archive %s holds an operator JWT of another key than the manifest's %s" % (
            archive_path, manifest["operator_public_key"]))
    wanted = _digests(members)
    with directory_lock(store.store_dir, params["lock_timeout"], create=not check_mode):
        try:
            present, _mtimes = collect(store)
            before, why = _digests(describe(present)), None
        except (BackupError, OSError) as exc:
            before, why = None, str(exc)
        conflicts = _conflicts(store, files)
        if before == wanted:
            action = "unchanged"
        elif before == {} and not conflicts:
            action = "restored"
        elif not params["replace"]:
            if before is None:
                held = "what cannot be read (%s)" % why
            elif before == {}:
                held = "seeds of the backup's keys that differ from the backup's (%s)" % ", ".join(conflicts)
            else:
                held = "other files (%s)" % summary(before, wanted)
            raise BackupError("the store already holds %s for operator %r: nothing was restored; set replace=true "
                              "to replace them with the backup" % (held, store.operator))
        else:
            action = "replaced"
        if action != "unchanged" and not check_mode:
            write_store(store, files, mtimes)
    return _result(action, store, path, manifest, archive_path, members), {"before": before or {}, "after": wanted}


def _conflicts(store, files):
    """The seed members whose file in the key store exists and differs from the backup's."""
    found = []
    for name in sorted(files):
        if not is_seed(name):
            continue
        path = target(store, name)
        if os.path.lexists(path):
            try:
                with open(path, "rb") as handle:
                    same = not os.path.islink(path) and handle.read() == files[name]
            except OSError:
                same = False
            if not same:
                found.append(name)
    return found


def summary(before, wanted, most=5):
    """What differs between two {member: sha256}, in a few words: the members changed, added and missing."""
    changed = sorted(name for name in set(before) & set(wanted) if before[name] != wanted[name])
    extra = sorted(set(before) - set(wanted))
    missing = sorted(set(wanted) - set(before))
    parts = []
    for label, names in (("differ", changed), ("not in the backup", extra), ("missing", missing)):
        if names:
            shown = ", ".join(names[:most]) + (" and %d more" % (len(names) - most) if len(names) > most else "")
            parts.append("%s %s" % (shown, label))
    return "; ".join(parts)
