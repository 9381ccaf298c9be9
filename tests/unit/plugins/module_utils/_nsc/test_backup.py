"""Backups of an nsc operator: member names and the paths they may not escape to, the keys whose seeds are kept,
manifests, and archives that are read only when every member is what the manifest says."""

import io
import json
import os
import tarfile

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import backup
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import Store

OP = "fleet"


def public(kind):
    return jwt.public_key(jwt.new_seed(kind))


# --------------------------------------------------------------------------
# member names


@pytest.mark.parametrize("name, root", [
    ("store/fleet/fleet.jwt", "store"),
    ("store/fleet/.nsc", "store"),
    ("store/fleet/accounts/APP/users/.edge.previous-keys", "store"),
    ("keys/creds/fleet/APP/edge.creds", "keys"),
])
def test_the_operators_files_are_members(name, root):
    assert backup.check_member(name, OP)[0] == root


def test_a_seed_member_is_named_after_its_key():
    key = public("account")
    name = backup.seed_member(key)
    assert name == "keys/keys/A/%s/%s.nk" % (key[1:3], key)
    assert backup.check_member(name, OP) == ("keys", ["keys", "A", key[1:3], "%s.nk" % key])


@pytest.mark.parametrize("name", [
    "/etc/passwd",
    "store/fleet/../../escaped",
    "store/fleet/./fleet.jwt",
    "store//fleet/fleet.jwt",
    "store/fleet",
    "store/other/other.jwt",
    "keys/creds/other/APP/u.creds",
    "keys/keys/A/XX/ANOTAKEY.nk",
    "keys/keys/U/AB/%s.nk" % ("A" + "B" * 55),
    "keys/seeds.txt",
    "store\\fleet\\fleet.jwt",
    "elsewhere/fleet.jwt",
    "",
])
def test_names_that_escape_or_belong_to_others_are_refused(name):
    with pytest.raises(backup.BackupError, match="member"):
        backup.check_member(name, OP)


def test_a_seed_member_in_the_wrong_folder_is_refused():
    key = public("user")
    with pytest.raises(backup.BackupError):
        backup.check_member("keys/keys/A/%s/%s.nk" % (key[1:3], key), OP)
    with pytest.raises(backup.BackupError):
        backup.check_member("keys/keys/U/ZZ/%s.nk" % key, OP)


# --------------------------------------------------------------------------
# which seeds belong to the operator


def _token(claims, seed):
    return jwt.encode(claims, seed).encode()


def test_the_keys_the_operators_files_name():
    op_seed, account_seed, user_seed = jwt.new_seed("operator"), jwt.new_seed("account"), jwt.new_seed("user")
    op_signing, account_signing, scoped, kept, kept_user = (public("operator"), public("account"),
                                                            public("account"), public("account"), public("user"))
    account = jwt.account_claims("APP", jwt.public_key(account_seed), signing_keys=[account_signing])
    account["nats"]["signing_keys"].append({"kind": "user_scope", "key": scoped, "role": "r", "template": {}})
    files = {
        "store/fleet/fleet.jwt": _token(jwt.operator_claims("fleet", jwt.public_key(op_seed),
                                                            signing_keys=[op_signing]), op_seed),
        "store/fleet/accounts/APP/APP.jwt": _token(account, op_seed),
        "store/fleet/accounts/APP/users/u.jwt": _token(
            jwt.user_claims("u", jwt.public_key(user_seed)), account_seed),
        "store/fleet/accounts/APP/.previous-signing-keys": json.dumps([kept]).encode(),
        "store/fleet/accounts/APP/users/.u.previous-keys": json.dumps([kept_user, "not a key"]).encode(),
        "store/fleet/.nsc": b'{"name": "fleet"}',
        # creds are not read for keys: they hold a seed, and their user's JWT is in the store
        "keys/creds/fleet/APP/u.creds": b"not read",
    }
    assert backup.referenced_keys(files) == sorted([
        jwt.public_key(op_seed), op_signing, jwt.public_key(account_seed), account_signing, scoped, kept,
        jwt.public_key(user_seed), kept_user])


def test_a_file_that_cannot_be_read_for_keys_is_refused_by_name():
    with pytest.raises(backup.BackupError, match="store/fleet/accounts/APP/APP.jwt is not a JWT"):
        backup.referenced_keys({"store/fleet/accounts/APP/APP.jwt": b"garbage"})
    with pytest.raises(backup.BackupError, match=r"\.previous-signing-keys is not a JSON list"):
        backup.referenced_keys({"store/fleet/accounts/APP/.previous-signing-keys": b"{"})


def test_counts_of_the_members():
    key = public("user")
    names = ["store/fleet/fleet.jwt", "store/fleet/.nsc", "store/fleet/accounts/APP/APP.jwt",
             "store/fleet/accounts/APP/users/u.jwt", "store/fleet/accounts/APP/users/.u.previous-keys",
             "keys/creds/fleet/APP/u.creds", backup.seed_member(key)]
    assert backup.counts(names, OP) == {"accounts": 1, "users": 1, "seeds": 1, "creds": 1, "files": 7}


# --------------------------------------------------------------------------
# manifests


def _manifest(**changes):
    members = backup.describe({"store/fleet/fleet.jwt": b"jwt", "keys/creds/fleet/A/u.creds": b"creds"})
    manifest = backup.make_manifest(OP, public("operator"), members, "fleet.0123456789ab.tar.gz", "f" * 64, 10,
                                    True, "2026-11-28T18:00:00Z")
    manifest.update(changes)
    return manifest


def test_a_manifest_lists_every_member_with_its_checksum():
    manifest = _manifest()
    assert manifest["format"] == backup.FORMAT and manifest["operator"] == OP
    assert [m["path"] for m in manifest["members"]] == ["keys/creds/fleet/A/u.creds", "store/fleet/fleet.jwt"]
    assert manifest["archive"]["compression"] == "gzip"
    found = backup.check_manifest(json.loads(json.dumps(manifest)), OP, "m.json")
    assert found["store/fleet/fleet.jwt"] == {"sha256": backup.digest(b"jwt"), "size": 3}


@pytest.mark.parametrize("changes, fragment", [
    (dict(format=2), "is not a manifest"),
    (dict(kind="stream"), "is not a manifest"),
    (dict(operator="other"), "backup of operator 'other', not of operator 'fleet'"),
    (dict(operator_public_key="ABC"), "operator_public_key"),
    (dict(archive={"name": "../x.tar", "sha256": "f", "size": 1}), "archive is not a file name"),
    (dict(archive={"name": "x.zip", "sha256": "f", "size": 1}), "archive is not a file name"),
    (dict(members=[]), "members is not a list"),
    (dict(members=[{"path": "store/fleet/fleet.jwt"}]), "members[0] has no path"),
    (dict(members=[{"path": "store/fleet/../../x", "sha256": "f", "size": 1}]), "members[0]: member"),
    (dict(members=[{"path": "store/fleet/fleet.jwt", "sha256": "f", "size": 1}] * 2), "listed twice"),
    (dict(members=[{"path": "store/fleet/.nsc", "sha256": "f", "size": 1}]), "operator's JWT"),
])
def test_a_manifest_that_is_not_right_is_refused_naming_the_field(changes, fragment):
    with pytest.raises(backup.BackupError) as caught:
        backup.check_manifest(_manifest(**changes), OP, "/b/manifest.json")
    assert fragment in str(caught.value) and "/b/manifest.json" in str(caught.value)


def test_summary_names_what_differs():
    text = backup.summary({"a": "1", "b": "2", "x": "9"}, {"a": "1", "b": "3", "c": "4"})
    assert text == "b differ; x not in the backup; c missing"


# --------------------------------------------------------------------------
# archives


def test_the_same_files_give_the_same_archive():
    files, mtimes = {"store/fleet/fleet.jwt": b"a", "store/fleet/.nsc": b"b"}, {"store/fleet/fleet.jwt": 5}
    assert backup.build_archive(files, mtimes, True) == backup.build_archive(files, mtimes, True)
    with tarfile.open(fileobj=io.BytesIO(backup.build_archive(files, mtimes, False))) as archive:
        members = archive.getmembers()
    assert [m.name for m in members] == ["store/fleet/.nsc", "store/fleet/fleet.jwt"]
    assert all(m.isreg() and m.mode == 0o600 for m in members)


def _archive(tmp_path, add):
    path = str(tmp_path / "a.tar")
    with tarfile.open(path, "w") as archive:
        add(archive)
    return path


def _file(archive, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))


def test_an_archive_is_read_when_every_member_is_listed_and_right(tmp_path):
    seed = jwt.new_seed("user")
    key = jwt.public_key(seed)
    files = {"store/fleet/fleet.jwt": b"jwt", backup.seed_member(key): seed}
    path = str(tmp_path / "a.tar.gz")
    with open(path, "wb") as handle:
        handle.write(backup.build_archive(files, {}, True))
    read, _mtimes = backup.read_archive(path, backup.describe(files), OP)
    assert read == files


@pytest.mark.parametrize("kind, fragment", [
    ("symlink", "is a symlink"), ("hardlink", "is a hard link"), ("directory", "is a directory"),
])
def test_links_and_directories_in_an_archive_are_refused(tmp_path, kind, fragment):
    def add(archive):
        info = tarfile.TarInfo("store/fleet/accounts")
        if kind == "symlink":
            info.type, info.linkname = tarfile.SYMTYPE, "/etc"
        elif kind == "hardlink":
            info.type, info.linkname = tarfile.LNKTYPE, "store/fleet/fleet.jwt"
        else:
            info.type = tarfile.DIRTYPE
        archive.addfile(info)
    members = backup.describe({"store/fleet/accounts": b""})
    with pytest.raises(backup.BackupError, match="store/fleet/accounts %s" % fragment):
        backup.read_archive(_archive(tmp_path, add), members, OP)


def test_a_member_that_escapes_is_refused_before_it_is_read(tmp_path):
    path = _archive(tmp_path, lambda archive: _file(archive, "../../etc/cron.d/x", b"x"))
    with pytest.raises(backup.BackupError, match=r"member '\.\./\.\./etc/cron\.d/x' holds '\.\.'"):
        backup.read_archive(path, {"../../etc/cron.d/x": {"sha256": backup.digest(b"x"), "size": 1}}, OP)


@pytest.mark.parametrize("members, fragment", [
    ({}, "is not in the manifest"),
    ({"store/fleet/fleet.jwt": {"sha256": backup.digest(b"other"), "size": 5}}, "fails its checksum"),
    ({"store/fleet/fleet.jwt": {"sha256": backup.digest(b"jwt"), "size": 3},
      "store/fleet/.nsc": {"sha256": "0", "size": 1}}, "lacks store/fleet/.nsc"),
])
def test_an_archive_that_differs_from_its_manifest_is_refused(tmp_path, members, fragment):
    path = _archive(tmp_path, lambda archive: _file(archive, "store/fleet/fleet.jwt", b"jwt"))
    with pytest.raises(backup.BackupError, match=fragment):
        backup.read_archive(path, members, OP)


def test_a_member_twice_is_refused(tmp_path):
    def add(archive):
        _file(archive, "store/fleet/fleet.jwt", b"jwt")
        _file(archive, "store/fleet/fleet.jwt", b"jwt")
    with pytest.raises(backup.BackupError, match="twice"):
        backup.read_archive(_archive(tmp_path, add), backup.describe({"store/fleet/fleet.jwt": b"jwt"}), OP)


def test_a_seed_of_another_key_is_refused_without_showing_it(tmp_path):
    seed, other = jwt.new_seed("user"), public("user")
    name = backup.seed_member(other)
    path = _archive(tmp_path, lambda archive: _file(archive, name, seed))
    with pytest.raises(backup.BackupError) as caught:
        backup.read_archive(path, backup.describe({name: seed}), OP)
    assert "does not hold the seed of %s" % other in str(caught.value)
    assert seed.decode() not in str(caught.value)


def test_garbage_is_refused_naming_the_archive(tmp_path):
    path = str(tmp_path / "a.tar.gz")
    with open(path, "wb") as handle:
        handle.write(b"\x1f\x8bnot gzip at all")
    with pytest.raises(backup.BackupError, match="a.tar.gz cannot be read"):
        backup.read_archive(path, {}, OP)


# --------------------------------------------------------------------------
# reading a store


def _store(tmp_path):
    store = Store(str(tmp_path / "stores"), str(tmp_path / "keys"), OP)
    seed = jwt.new_seed("operator")
    store.write_seed(seed)
    store.write_marker()
    store.write_operator(jwt.encode(jwt.operator_claims(OP, jwt.public_key(seed)), seed))
    return store, seed


def test_collect_takes_the_operators_seeds_only(tmp_path):
    store, seed = _store(tmp_path)
    stranger = jwt.new_seed("operator")
    store.write_seed(stranger)  # another operator's seed in the same key store
    files, _mtimes = backup.collect(store)
    assert sorted(files) == sorted(["store/fleet/.nsc", "store/fleet/fleet.jwt",
                                    backup.seed_member(jwt.public_key(seed))])
    assert backup.operator_public_key(files, OP) == jwt.public_key(seed)


def test_collect_refuses_a_symlink_in_the_store(tmp_path):
    store, _seed = _store(tmp_path)
    os.symlink("/etc/passwd", os.path.join(store.root, "accounts", "link"))
    with pytest.raises(backup.BackupError, match="store/fleet/accounts/link .* is a symlink"):
        backup.collect(store)


def test_collect_refuses_a_seed_file_with_another_key(tmp_path):
    store, seed = _store(tmp_path)
    with open(store.key_path(jwt.public_key(seed)), "wb") as handle:
        handle.write(jwt.new_seed("operator"))
    with pytest.raises(backup.BackupError, match="does not hold the seed of"):
        backup.collect(store)


def test_a_store_without_the_operator_holds_nothing(tmp_path):
    store = Store(str(tmp_path / "stores"), str(tmp_path / "keys"), OP)
    assert backup.collect(store) == ({}, {})
    assert backup.operator_public_key({}, OP) is None


def test_a_member_larger_than_the_manifest_says_is_refused_before_it_is_read(tmp_path):
    path = _archive(tmp_path, lambda archive: _file(archive, "store/fleet/fleet.jwt", b"x" * 1000))
    with pytest.raises(backup.BackupError, match=r"fleet\.jwt fails its checksum \(1000 bytes; the manifest says 3\)"):
        backup.read_archive(path, backup.describe({"store/fleet/fleet.jwt": b"jwt"}), OP)
