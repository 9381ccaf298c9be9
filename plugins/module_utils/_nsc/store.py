# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An operator's JWTs, seeds and creds in nsc's on-disk layout. Private to the collection.

Pure file logic without Ansible imports, so that nsc and these modules can
work on the same store::

    <store_dir>/<OP>/.nsc                              store marker (JSON)
    <store_dir>/<OP>/<OP>.jwt                          operator JWT
    <store_dir>/<OP>/accounts/<ACC>/<ACC>.jwt          account JWT
    <store_dir>/<OP>/accounts/<ACC>/users/<U>.jwt      user JWT
    <keys_dir>/keys/<O|A|U>/<pub[1:3]>/<PUB>.nk        seeds
    <keys_dir>/creds/<OP>/<ACC>/<U>.creds              user creds

Every file is written whole (temporary file, then rename), files are 0600
and directories 0700 when created; an existing file never gets a looser
mode than it had.

A run that changes the store holds an exclusive advisory lock on the store
directory from its first read to its last write (and push), so parallel runs
(forks over many hosts, all delegated to one controller) apply their changes
one after another instead of overwriting each other's; readers take a shared
lock and see a store that holds together.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import stat
import tempfile
import time

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._files import make_private_dirs as make_dirs
from ansible_collections.nats_edge.fleet.plugins.module_utils._units import check_name

DEFAULT_STORE_DIR = "~/.local/share/nats/nsc/stores"
DEFAULT_KEYS_DIR = "~/.local/share/nats/nsc/keys"
MARKER = ".nsc"
STORE_VERSION = "1"
FILE_MODE = 0o600
DEFAULT_LOCK_TIMEOUT = 120.0


class StoreError(NatsEdgeError):
    """A store that is missing something or does not hold together."""


def valid_name(kind, value):
    """Names become directory and file names: no whitespace, '.', '*', '>', '/' or '\\'."""
    try:
        check_name(value)
    except ValueError as exc:
        raise StoreError("%s name: %s" % (kind, exc)) from exc
    return value


def atomic_write(path, data, mode=FILE_MODE):
    """Replace ``path`` with ``data`` in one rename. Missing directories are
    created 0700; an existing file keeps its mode if that is stricter."""
    if isinstance(data, str):
        data = data.encode()
    directory = os.path.dirname(path)
    make_dirs(directory)
    try:
        mode &= stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        pass
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".%s." % os.path.basename(path))
    try:
        os.fchmod(handle, mode)
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def read_text(path):
    try:
        with open(path) as handle:
            return handle.read()
    except FileNotFoundError:
        return None


# directories this process holds an exclusive lock on: a run that holds it for all its parts (nsc_store) lets
# each part take it again without waiting for itself
_HELD = {}


@contextlib.contextmanager
def directory_lock(path, timeout=DEFAULT_LOCK_TIMEOUT, shared=False, create=True):
    """Hold an advisory lock (flock) on the directory ``path``. A missing
    directory is created 0700 when ``create``, else nothing is locked: a
    store that does not exist has nothing to keep consistent yet. Within an
    exclusive lock this process holds on ``path``, the lock is taken again at
    once."""
    if _HELD.get(os.path.realpath(path)):
        yield
        return
    if not os.path.isdir(path):
        if not create:
            yield
            return
        make_dirs(path)
    handle = os.open(path, os.O_RDONLY)
    try:
        deadline = time.monotonic() + max(float(timeout), 0.0)
        mode = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
        while True:
            try:
                fcntl.flock(handle, mode)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    raise StoreError("the store %s stayed locked by another run for %ss (lock_timeout); nothing "
                                     "was changed. Is another play writing to it?" % (path, timeout)) from exc
                time.sleep(0.02)
        held = os.path.realpath(path)
        if not shared:
            _HELD[held] = _HELD.get(held, 0) + 1
        try:
            yield
        finally:
            if not shared:
                _HELD[held] -= 1
    finally:
        os.close(handle)


# seeds written by this process since the store was snapshot: (path, directories the write made), undone by a
# rollback (seeds of other operators may share the key store, so only these go)
_NEW_SEEDS = []


class Snapshot(object):
    """The operator's part of a store as it was - its JWTs and marker, its creds - kept beside it, so that a run
    of many parts (nsc_store) can put it back byte for byte when a part fails after others wrote (``restore``), or
    drop the copy once all succeeded (``drop``). Seeds the run wrote new are removed by ``restore`` too; seeds are
    only ever added. Take it under the store's exclusive lock."""

    def __init__(self, store, made=()):
        """``made``: directories the run made before the snapshot (the store directory, to lock it), removed by
        ``restore`` when they are empty."""
        self.store = store
        self.parts = [(store.root, os.path.join(store.store_dir, ".%s.before-run" % store.operator)),
                      (os.path.join(store.keys_dir, "creds", store.operator),
                       os.path.join(store.keys_dir, "creds", ".%s.before-run" % store.operator))]
        self.existed = {}
        self.made = list(made)  # directories that did not exist (the store's, the key store's)
        for directory in (store.store_dir, store.keys_dir):
            missing = directory
            while missing and not os.path.isdir(missing):
                self.made.append(missing)
                missing = os.path.dirname(missing)
        for path, copy in self.parts:
            if os.path.lexists(copy):
                shutil.rmtree(copy)  # left by a run that was killed
            self.existed[path] = os.path.isdir(path)
            parent = os.path.dirname(path)
            while parent and not os.path.isdir(parent) and parent not in self.made:
                self.made.insert(0, parent)  # deeper than the store's and key store's own
                parent = os.path.dirname(parent)
            if self.existed[path]:
                shutil.copytree(path, copy, symlinks=True)
        del _NEW_SEEDS[:]

    def restore(self):
        """The store as it was when the snapshot was taken."""
        for path, copy in self.parts:
            if os.path.lexists(path):
                shutil.rmtree(path)
            if self.existed[path]:
                os.rename(copy, path)
        while _NEW_SEEDS:
            path, made = _NEW_SEEDS.pop()
            if os.path.exists(path):
                os.unlink(path)
            for directory in made:
                with contextlib.suppress(OSError):
                    os.rmdir(directory)
        for directory in self.made:
            with contextlib.suppress(OSError):
                os.rmdir(directory)

    def drop(self):
        """Keep what the run wrote: the copy goes."""
        for _path, copy in self.parts:
            if os.path.lexists(copy):
                shutil.rmtree(copy)
        del _NEW_SEEDS[:]


class Store(object):
    """One operator's part of an nsc store, and the key store beside it."""

    def __init__(self, store_dir, keys_dir, operator):
        self.store_dir = os.path.abspath(os.path.expanduser(store_dir))
        self.keys_dir = os.path.abspath(os.path.expanduser(keys_dir))
        self.operator = valid_name("operator", operator)
        self.root = os.path.join(self.store_dir, operator)

    def locked(self, timeout=DEFAULT_LOCK_TIMEOUT, shared=False, create=True):
        """The store's lock (see directory_lock): exclusive for runs that
        may write, shared for runs that only read."""
        return directory_lock(self.store_dir, timeout, shared=shared, create=create)

    # -- paths -----------------------------------------------------------------

    @property
    def marker_path(self):
        return os.path.join(self.root, MARKER)

    @property
    def operator_jwt_path(self):
        return os.path.join(self.root, "%s.jwt" % self.operator)

    def account_dir(self, account):
        return os.path.join(self.root, "accounts", account)

    def account_jwt_path(self, account):
        return os.path.join(self.account_dir(account), "%s.jwt" % account)

    def user_jwt_path(self, account, user):
        return os.path.join(self.account_dir(account), "users", "%s.jwt" % user)

    def previous_keys_path(self, account, user):
        """Keys a rotation replaced and that are not revoked yet (not an nsc file:
        nsc reads only the *.jwt files of this directory)."""
        return os.path.join(self.account_dir(account), "users", ".%s.previous-keys" % user)

    def previous_signing_keys_path(self, account):
        """Signing keys a rotation replaced, kept in the account JWT until they are retired (not an nsc
        file: nsc reads only the *.jwt files of this directory)."""
        return os.path.join(self.account_dir(account), ".previous-signing-keys")

    def creds_path(self, account, user):
        return os.path.join(self.keys_dir, "creds", self.operator, account, "%s.creds" % user)

    def key_path(self, public):
        kind = jwt.kind_of(public)
        return os.path.join(self.keys_dir, "keys", jwt.KINDS[kind], public[1:3], "%s.nk" % public)

    # -- reading ---------------------------------------------------------------

    def has_operator(self):
        return os.path.isfile(self.operator_jwt_path)

    def accounts(self):
        """Names of the accounts with a JWT in the store."""
        base = os.path.join(self.root, "accounts")
        if not os.path.isdir(base):
            return []
        return sorted(name for name in os.listdir(base) if os.path.isfile(self.account_jwt_path(name)))

    def read_operator(self):
        """(token, claims) of the operator; fails if it is not in the store."""
        token = read_text(self.operator_jwt_path)
        if token is None:
            raise StoreError("operator %r is not in the store %s" % (self.operator, self.store_dir))
        claims = self._decode(token, self.operator_jwt_path)
        if claims.get("nats", {}).get("type") != "operator":
            raise StoreError("%s is not an operator JWT" % self.operator_jwt_path)
        if claims.get("iss") != claims.get("sub"):
            raise StoreError("operator %r: %s is not signed by the operator's own key"
                             % (self.operator, self.operator_jwt_path))
        return token, claims

    def users(self, account):
        """Names of the users of an account with a JWT in the store."""
        base = os.path.join(self.account_dir(account), "users")
        if not os.path.isdir(base):
            return []
        return sorted(name[:-len(".jwt")] for name in os.listdir(base) if name.endswith(".jwt"))

    def read_account(self, account):
        """(token, claims) of an account, or (None, None) if it is not in the store."""
        path = self.account_jwt_path(account)
        token = read_text(path)
        if token is None:
            return None, None
        return token, self._decode(token, path)

    def read_user(self, account, user):
        path = self.user_jwt_path(account, user)
        token = read_text(path)
        if token is None:
            return None, None
        return token, self._decode(token, path)

    def read_seed(self, public):
        """The seed (bytes) of a public key, or None when the key store lacks it."""
        text = read_text(self.key_path(public))
        if text is None:
            return None
        seed = text.strip().encode()
        try:
            if jwt.public_key(seed) != public:
                raise StoreError("%s does not hold the seed of %s" % (self.key_path(public), public))
        except (ValueError, TypeError) as exc:
            if isinstance(exc, StoreError):
                raise
            raise StoreError("%s does not hold a valid seed" % self.key_path(public)) from exc
        return seed

    def read_creds(self, account, user):
        return read_text(self.creds_path(account, user))

    def read_previous_keys(self, account, user):
        return self._read_keys(self.previous_keys_path(account, user))

    def read_previous_signing_keys(self, account):
        return self._read_keys(self.previous_signing_keys_path(account))

    @staticmethod
    def _read_keys(path):
        text = read_text(path)
        if text is None:
            return []
        try:
            keys = json.loads(text)
        except ValueError as exc:
            raise StoreError("%s is not JSON" % path) from exc
        return [key for key in keys if isinstance(key, str)] if isinstance(keys, list) else []

    @staticmethod
    def _decode(token, path):
        try:
            return jwt.decode(token, verify=True)
        except jwt.JWTError as exc:
            raise StoreError("%s: %s" % (path, exc)) from exc

    # -- consistency -----------------------------------------------------------

    def check_account(self, account, operator_claims, claims):
        """Refuse an account JWT the operator did not issue or that names
        another account."""
        path = self.account_jwt_path(account)
        if claims.get("nats", {}).get("type") != "account":
            raise StoreError("%s is not an account JWT" % path)
        if claims.get("name") != account:
            raise StoreError("%s names account %r, not %r" % (path, claims.get("name"), account))
        issuers = {operator_claims["sub"]} | set(operator_claims.get("nats", {}).get("signing_keys") or [])
        if claims.get("iss") not in issuers:
            raise StoreError("account %r: %s was issued by %s, which is neither operator %r nor one of its "
                             "signing keys" % (account, path, claims.get("iss"), self.operator))

    def check_user(self, account, user, account_claims, claims):
        """True if the user JWT is valid for the account as it is now (its issuer
        may since have been removed: then the user must be issued again)."""
        path = self.user_jwt_path(account, user)
        if claims.get("nats", {}).get("type") != "user":
            raise StoreError("%s is not a user JWT" % path)
        if claims.get("name") != user:
            raise StoreError("%s names user %r, not %r" % (path, claims.get("name"), user))
        account_key = account_claims["sub"]
        # a scoped signing key (an object with its key) issues users too
        signing = set(key.get("key") if isinstance(key, dict) else key
                      for key in account_claims.get("nats", {}).get("signing_keys") or [])
        issuer, issuer_account = claims.get("iss"), claims.get("nats", {}).get("issuer_account")
        if issuer == account_key and not issuer_account:
            return True
        return issuer in signing and issuer_account == account_key

    def check_marker(self):
        text = read_text(self.marker_path)
        if text is None:
            return False
        try:
            info = json.loads(text)
        except ValueError as exc:
            raise StoreError("%s is not JSON" % self.marker_path) from exc
        if info.get("name") != self.operator or info.get("kind", "operator") != "operator":
            raise StoreError("%s belongs to %r, not operator %r" % (self.marker_path, info.get("name"), self.operator))
        return True

    # -- writing ---------------------------------------------------------------

    def write_marker(self):
        info = {"managed": False, "name": self.operator, "kind": "operator", "version": STORE_VERSION}
        atomic_write(self.marker_path, json.dumps(info, separators=(",", ":")))
        make_dirs(os.path.join(self.root, "accounts"))

    def write_operator(self, token):
        atomic_write(self.operator_jwt_path, token)

    def write_account(self, account, token):
        atomic_write(self.account_jwt_path(account), token)

    def write_user(self, account, user, token):
        atomic_write(self.user_jwt_path(account, user), token)

    def write_seed(self, seed):
        seed = seed if isinstance(seed, bytes) else seed.encode()
        path = self.key_path(jwt.public_key(seed))
        if not os.path.exists(path):
            made, directory = [], os.path.dirname(path)
            while directory and not os.path.isdir(directory):
                made.append(directory)
                directory = os.path.dirname(directory)
            _NEW_SEEDS.append((path, made))
        atomic_write(path, seed)

    def write_creds(self, account, user, text):
        atomic_write(self.creds_path(account, user), text)

    def remove_account(self, account):
        """The account's JWTs and its users' creds; seeds stay, as with nsc."""
        if os.path.isdir(self.account_dir(account)):
            shutil.rmtree(self.account_dir(account))
        creds_dir = os.path.join(self.keys_dir, "creds", self.operator, account)
        if os.path.isdir(creds_dir):
            shutil.rmtree(creds_dir)

    def write_previous_keys(self, account, user, keys):
        self._write_keys(self.previous_keys_path(account, user), keys)

    def write_previous_signing_keys(self, account, keys):
        self._write_keys(self.previous_signing_keys_path(account), keys)

    @staticmethod
    def _write_keys(path, keys):
        if keys:
            atomic_write(path, json.dumps(sorted(set(keys))))
        elif os.path.exists(path):
            os.unlink(path)

    def remove_user(self, account, user):
        for path in (self.user_jwt_path(account, user), self.creds_path(account, user),
                     self.previous_keys_path(account, user)):
            if os.path.exists(path):
                os.unlink(path)
