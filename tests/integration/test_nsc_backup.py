"""nsc_backup: a real store made by nsc_store is backed up (a second backup writes nothing, check mode predicts),
restored into an empty store byte for byte (JWTs, seeds and creds, 0600), which the nsc modules then keep
unchanged; a restore over the same store changes nothing, over another store is refused without replace and done
with it, and a damaged backup is refused before anything is written."""

import hashlib
import io
import json
import os
import stat
import tarfile

from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import directory_lock

from conftest import run_module
from test_nsc_modules import tree_hash

ACCOUNTS = [
    {"name": "SENSORS", "signing_key": True, "jetstream": {"disk_storage": "1MiB", "streams": 4}},
    {"name": "OPS"},
]
USERS = [{"account": "SENSORS", "name": "edge"}, {"account": "OPS", "name": "ops"}]


def _base(tmp_path, name="a"):
    return dict(store_dir=str(tmp_path / name / "stores"), keys_dir=str(tmp_path / name / "keys"), operator="fleet")


def _files(*roots):
    """{path below its root: (bytes, mode)} of every file below ``roots``."""
    found = {}
    for root in roots:
        for directory, _dirs, names in os.walk(root):
            for name in names:
                path = os.path.join(directory, name)
                with open(path, "rb") as handle:
                    found[os.path.relpath(path, os.path.dirname(root))] = (
                        handle.read(), stat.S_IMODE(os.stat(path).st_mode))
    return found


def _make(base, accounts=None, users=None):
    made = run_module("nsc_store", dict(base, signing_key=True, accounts=ACCOUNTS if accounts is None else accounts,
                                        users=USERS if users is None else users))
    assert made["changed"] and not made.get("failed"), made
    return made


def test_backup_and_restore_reproduce_a_working_store(tmp_path):
    base = _base(tmp_path)
    made = _make(base)
    path = str(tmp_path / "backups" / "fleet")

    predicted = run_module("nsc_backup", dict(base, path=path), check_mode=True)
    assert predicted["changed"] and predicted["action"] == "written" and not predicted.get("failed"), predicted
    assert not os.path.exists(path)

    written = run_module("nsc_backup", dict(base, path=path), diff=True)
    assert written["changed"] and written["action"] == "written", written
    assert written["operator_public_key"] == made["operator"]["operator_public_key"]
    assert written["counts"] == {"accounts": 3, "users": 3, "seeds": written["counts"]["seeds"], "creds": 3,
                                 "files": written["counts"]["files"]}, written
    # operator + its signing key, 3 accounts + SENSORS' signing key, 3 users
    assert written["counts"]["seeds"] == 9, written
    assert sorted(os.listdir(path)) == sorted(["manifest.json", os.path.basename(written["archive"])])
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
    assert all(stat.S_IMODE(os.stat(os.path.join(path, f)).st_mode) == 0o600 for f in os.listdir(path))
    with open(os.path.join(path, "manifest.json")) as handle:
        manifest = json.load(handle)
    assert manifest["operator"] == "fleet" and manifest["archive"]["sha256"] == written["archive_sha256"]
    assert len(manifest["members"]) == written["counts"]["files"] == len(written["diff"]["after"])
    assert "store/fleet/fleet.jwt" in [m["path"] for m in manifest["members"]]
    # no seed anywhere in the result
    seeds = [data.decode().strip() for name, (data, _mode) in _files(base["keys_dir"]).items() if name.endswith(".nk")]
    assert len(seeds) == 9 and not any(seed in json.dumps(written) for seed in seeds)

    # nothing changed: nothing written, and check mode says so too
    before = tree_hash(path)
    again = run_module("nsc_backup", dict(base, path=path))
    assert again["changed"] is False and again["action"] == "unchanged", again
    assert again["archive"] == written["archive"] and tree_hash(path) == before
    assert run_module("nsc_backup", dict(base, path=path), check_mode=True)["changed"] is False
    # a change in the store: predicted, then written, the old archive gone
    changed = [dict(ACCOUNTS[0], jetstream={"disk_storage": "2MiB", "streams": 4})] + ACCOUNTS[1:]
    _make(base, accounts=changed)
    assert run_module("nsc_backup", dict(base, path=path), check_mode=True)["action"] == "written"
    assert tree_hash(path) == before
    newer = run_module("nsc_backup", dict(base, path=path))
    assert newer["changed"] and newer["archive"] != written["archive"], newer
    assert sorted(os.listdir(path)) == sorted(["manifest.json", os.path.basename(newer["archive"])])

    # restore into an empty store: predicted, then every file byte for byte, 0600
    other = _base(tmp_path, "b")
    check = run_module("nsc_backup", dict(other, path=path, state="restore"), check_mode=True)
    assert check["changed"] and check["action"] == "restored", check
    assert not os.path.exists(other["store_dir"]) and not os.path.exists(other["keys_dir"])
    restored = run_module("nsc_backup", dict(other, path=path, state="restore"))
    assert restored["changed"] and restored["action"] == "restored", restored
    original = _files(os.path.join(base["store_dir"], "fleet"), os.path.join(base["keys_dir"], "keys"),
                      os.path.join(base["keys_dir"], "creds"))
    copy = _files(os.path.join(other["store_dir"], "fleet"), os.path.join(other["keys_dir"], "keys"),
                  os.path.join(other["keys_dir"], "creds"))
    assert copy == original
    assert set(mode for _data, mode in copy.values()) == {0o600}
    assert not any(seed in json.dumps(restored) for seed in seeds)

    # the restored store works: the same listing, the nsc modules change nothing
    listed, listed_before = run_module("nsc_info", other), run_module("nsc_info", base)
    for key in ("operators", "accounts", "users"):
        assert (json.dumps(listed[key]).replace(other["keys_dir"], "KEYS")
                == json.dumps(listed_before[key]).replace(base["keys_dir"], "KEYS")), key
    assert sorted(a["name"] for a in listed["accounts"]) == ["OPS", "SENSORS", "SYS"]
    kept = run_module("nsc_store", dict(other, signing_key=True, accounts=changed, users=USERS))
    assert kept["changed"] is False and not kept.get("failed"), kept
    assert run_module("nsc_account", dict(other, accounts=changed))["changed"] is False

    # a restore over the same store: unchanged, in check mode too
    roots = (other["store_dir"], other["keys_dir"])
    same = tree_hash(*roots)
    for check_mode in (True, False):
        unchanged = run_module("nsc_backup", dict(other, path=path, state="restore"), check_mode=check_mode)
        assert unchanged["changed"] is False and unchanged["action"] == "unchanged", unchanged
    assert tree_hash(*roots) == same


def test_restore_over_another_store_needs_replace(tmp_path):
    base = _base(tmp_path)
    _make(base)
    path = str(tmp_path / "backups")
    assert run_module("nsc_backup", dict(base, path=path, compress=False))["archive"].endswith(".tar")

    # the same operator name, other keys and accounts: refused naming the operator, nothing written
    other = _base(tmp_path, "b")
    _make(other, accounts=[{"name": "ELSE"}], users=[])
    roots = (other["store_dir"], other["keys_dir"])
    before = tree_hash(*roots)
    refused = run_module("nsc_backup", dict(other, path=path, state="restore"))
    assert refused.get("failed") and refused["changed"] is False, refused
    assert "operator 'fleet'" in refused["msg"] and "replace=true" in refused["msg"], refused
    assert "store/fleet/fleet.jwt" in refused["msg"], refused
    assert tree_hash(*roots) == before
    assert run_module("nsc_backup", dict(other, path=path, state="restore"), check_mode=True).get("failed")

    # with replace: predicted, then the backup's store, the old operator's seeds kept (seeds are only added)
    predicted = run_module("nsc_backup", dict(other, path=path, state="restore", replace=True), check_mode=True)
    assert predicted["action"] == "replaced" and tree_hash(*roots) == before, predicted
    replaced = run_module("nsc_backup", dict(other, path=path, state="restore", replace=True))
    assert replaced["changed"] and replaced["action"] == "replaced", replaced
    assert (_files(os.path.join(other["store_dir"], "fleet"), os.path.join(other["keys_dir"], "creds"))
            == _files(os.path.join(base["store_dir"], "fleet"), os.path.join(base["keys_dir"], "creds")))
    assert not os.path.exists(os.path.join(other["store_dir"], "fleet", "accounts", "ELSE"))
    again = run_module("nsc_backup", dict(other, path=path, state="restore", replace=True))
    assert again["changed"] is False and again["action"] == "unchanged", again
    kept = run_module("nsc_store", dict(other, signing_key=True, accounts=ACCOUNTS, users=USERS))
    assert kept["changed"] is False and not kept.get("failed"), kept

    # replace applies to restore only; a backup of another operator in path is refused naming both
    wrong = run_module("nsc_backup", dict(base, path=path, replace=True))
    assert wrong.get("failed") and "replace" in wrong["msg"], wrong
    third = dict(_base(tmp_path, "c"), operator="other")
    run_module("nsc_store", dict(third, accounts=[]))
    mixed = run_module("nsc_backup", dict(third, path=path))
    assert mixed.get("failed") and "'fleet'" in mixed["msg"] and "'other'" in mixed["msg"], mixed


def test_a_damaged_backup_is_refused_and_nothing_changes(tmp_path):
    base = _base(tmp_path)
    _make(base)
    path = str(tmp_path / "backups")
    written = run_module("nsc_backup", dict(base, path=path))
    target = _base(tmp_path, "b")

    def refused(fragment):
        for check_mode in (True, False):
            result = run_module("nsc_backup", dict(target, path=path, state="restore"), check_mode=check_mode)
            assert result.get("failed") and result["changed"] is False, result
            assert fragment in result["msg"] and "operator 'fleet'" in result["msg"], result
        assert not os.path.exists(target["keys_dir"])
        assert not os.path.exists(os.path.join(target["store_dir"], "fleet"))

    # one byte of the archive changed: refused naming the archive
    with open(written["archive"], "rb") as handle:
        good = handle.read()
    with open(written["archive"], "wb") as handle:
        handle.write(good[:100] + bytes([good[100] ^ 1]) + good[101:])
    refused("%s fails its checksum" % written["archive"])
    # the archive missing
    os.unlink(written["archive"])
    refused("%s is missing" % written["archive"])
    # a damaged backup is written again by the next backup, a damaged manifest too
    rewritten = run_module("nsc_backup", dict(base, path=path))
    assert rewritten["changed"] and rewritten["action"] == "written", rewritten
    with open(os.path.join(path, "manifest.json"), "w") as handle:
        handle.write("{not json")
    refused("manifest.json is not a backup manifest")
    rewritten = run_module("nsc_backup", dict(base, path=path))
    assert rewritten["changed"] and rewritten["action"] == "written", rewritten
    assert run_module("nsc_backup", dict(base, path=path))["changed"] is False

    # an archive with a member that escapes, its manifest made to match: refused naming the member
    manifest_path = os.path.join(path, "manifest.json")
    with open(manifest_path) as handle:
        manifest = json.load(handle)
    evil = os.path.join(path, "fleet.evil.tar")
    with tarfile.open(evil, "w") as archive:
        info = tarfile.TarInfo("store/fleet/../../escaped")
        info.size = 1
        archive.addfile(info, io.BytesIO(b"x"))
    with open(evil, "rb") as handle:
        data = handle.read()
    manifest["archive"] = {"name": "fleet.evil.tar", "sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
                           "compression": "none"}
    with open(manifest_path, "w") as handle:
        json.dump(manifest, handle)
    refused("store/fleet/../../escaped")
    assert not os.path.exists(os.path.join(target["store_dir"], "..", "escaped"))
    # a manifest that lists a path outside the store: refused naming it
    manifest["members"].append({"path": "/etc/passwd", "sha256": "0" * 64, "size": 1})
    with open(manifest_path, "w") as handle:
        json.dump(manifest, handle)
    refused("/etc/passwd")

    # no backup in path; no operator in the store
    empty = run_module("nsc_backup", dict(target, path=str(tmp_path / "none"), state="restore"))
    assert empty.get("failed") and "manifest.json is missing" in empty["msg"], empty
    nothing = run_module("nsc_backup", dict(target, path=str(tmp_path / "none")))
    assert nothing.get("failed") and "does not hold operator 'fleet'" in nothing["msg"], nothing
    assert not os.path.exists(str(tmp_path / "none"))


def test_the_store_lock_is_taken_and_the_backup_kept_apart(tmp_path):
    base = _base(tmp_path)
    _make(base)
    path = str(tmp_path / "backups")
    assert run_module("nsc_backup", dict(base, path=path))["changed"]
    target = _base(tmp_path, "b")
    os.makedirs(target["store_dir"])
    # another run writing to either store: the backup and the restore wait, then fail changing nothing
    for args in (dict(base, path=str(tmp_path / "other")), dict(target, path=path, state="restore")):
        with directory_lock(args["store_dir"]):
            waited = run_module("nsc_backup", dict(args, lock_timeout=0.5))
        assert waited.get("failed") and "stayed locked" in waited["msg"], waited
    assert not os.path.exists(str(tmp_path / "other")) and os.listdir(target["store_dir"]) == []
    # a backup directory inside the operator's directory or the key store is refused
    for inside in (os.path.join(base["store_dir"], "fleet", "backup"), os.path.join(base["keys_dir"], "b")):
        refused = run_module("nsc_backup", dict(base, path=inside))
        assert refused.get("failed") and "path: %s is inside" % inside in refused["msg"], refused
        assert not os.path.exists(inside)
