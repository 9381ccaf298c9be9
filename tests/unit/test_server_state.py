"""nats_server_state's readings of a host and the comparison the nats_server role skips its writes by."""

import hashlib
import os

import pytest

from ansible_collections.nats_edge.fleet.plugins.filter.nats_server import nats_server_stale_paths
from ansible_collections.nats_edge.fleet.plugins.module_utils import _host_state as state


def test_a_regular_file_is_described_with_its_checksum(tmp_path):
    path = tmp_path / "nats-server.conf"
    path.write_bytes(b"port: 4222\n")
    os.chmod(path, 0o640)
    found = state.describe_path(str(path))
    assert found["exists"] and found["type"] == "file" and found["mode"] == "0640"
    assert found["checksum"] == hashlib.sha1(b"port: 4222\n").hexdigest()
    assert found["mtime"] == pytest.approx(os.stat(path).st_mtime, abs=1e-6)


def test_a_directory_has_no_checksum_and_a_missing_path_only_says_so(tmp_path):
    os.chmod(tmp_path, 0o750)
    found = state.describe_path(str(tmp_path))
    assert found["type"] == "directory" and found["mode"] == "0750" and "checksum" not in found
    assert state.describe_path(str(tmp_path / "nope")) == {"exists": False}


def test_a_link_is_not_taken_for_its_target(tmp_path):
    (tmp_path / "target").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    assert state.describe_path(str(tmp_path / "link"))["type"] == "link"


@pytest.mark.parametrize("manager, rc, out, expected", [
    ("dpkg", 0, "installed 2.9.10-1+b3", (True, "2.9.10-1+b3")),
    # removed but its config kept: not installed
    ("dpkg", 0, "config-files 2.9.10-1+b3", (False, "")),
    ("dpkg", 1, "", (False, "")),
    ("rpm", 0, "2.10.22", (True, "2.10.22")),
    ("rpm", 1, "package nats-server is not installed", (False, "")),
])
def test_package_versions(manager, rc, out, expected):
    assert state.parse_package_version(manager, rc, out) == expected


def test_unit_properties():
    text = "LoadState=loaded\nActiveState=active\nSubState=running\nUnitFileState=enabled\nMainPID=612\n"
    assert state.parse_unit_properties(text) == {"LoadState": "loaded", "ActiveState": "active", "SubState": "running",
                                                 "UnitFileState": "enabled", "MainPID": "612"}


@pytest.mark.parametrize("rc, active, sub", [
    (0, "active", "running"), (3, "inactive", "dead"), (32, "failed", "crashed"), (8, "activating", "start"),
    (99, "failed", "unknown")])
def test_openrc_status_as_unit_states(rc, active, sub):
    found = state.openrc_unit_state(True, rc, True, "812\n")
    assert (found["LoadState"], found["ActiveState"], found["SubState"]) == ("loaded", active, sub)
    assert found["MainPID"] == ("812" if active == "active" else "0")
    assert found["UnitFileState"] == "enabled"
    assert set(found) == set(state.UNIT_PROPERTIES)


def test_openrc_without_script_or_runlevel():
    assert state.openrc_unit_state(False, 0, True, "812")["LoadState"] == "not-found"
    assert state.openrc_unit_state(False, 0, True, "812")["MainPID"] == "0"
    assert state.openrc_unit_state(True, 0, False, "")["UnitFileState"] == "disabled"
    assert state.openrc_unit_state(True, 0, False, "")["MainPID"] == "0"


@pytest.mark.parametrize("asked, systemd_booted, has_openrc, expected", [
    ("auto", True, True, "systemd"), ("auto", False, True, "openrc"), ("auto", False, False, "systemd"),
    ("openrc", True, False, "openrc"), ("systemd", False, True, "systemd")])
def test_service_manager(asked, systemd_booted, has_openrc, expected):
    assert state.service_manager(asked, systemd_booted, has_openrc) == expected


FILES = {
    "/etc/nats-server": {"exists": True, "type": "directory", "owner": "root", "group": "nats", "mode": "0750"},
    "/etc/nats-server/nats-server.conf": {"exists": True, "type": "file", "owner": "root", "group": "nats",
                                          "mode": "0640", "checksum": "abc"},
    "/etc/nats-server/operator.jwt": {"exists": False},
}
DIR = {"path": "/etc/nats-server", "kind": "directory", "owner": "root", "group": "nats", "mode": "0750"}
CONF = {"path": "/etc/nats-server/nats-server.conf", "kind": "file", "owner": "root", "group": "nats", "mode": "0640",
        "checksum": "abc"}


@pytest.mark.parametrize("wanted, stale", [
    (DIR, False),
    (dict(DIR, mode=750), False),
    (dict(DIR, mode="0755"), True),
    (dict(DIR, owner="nats"), True),
    (dict(DIR, group="root"), True),
    (dict(DIR, kind="file"), True),
    (CONF, False),
    (dict(CONF, checksum="abd"), True),
    # without a checksum the content is not compared
    ({k: v for k, v in CONF.items() if k != "checksum"}, False),
    (dict(CONF, path="/etc/nats-server/operator.jwt"), True),
    # a path the state call was not asked about is never taken as current
    (dict(DIR, path="/etc/other"), True),
])
def test_a_path_is_stale_unless_everything_matches(wanted, stale):
    assert nats_server_stale_paths(FILES, [wanted]) == ([wanted["path"]] if stale else [])


def test_stale_paths_keep_the_order_given_and_no_state_means_everything_is_stale():
    wanted = [dict(CONF, checksum="new"), DIR, dict(DIR, path="/var/lib/nats-server")]
    assert nats_server_stale_paths(FILES, wanted) == ["/etc/nats-server/nats-server.conf", "/var/lib/nats-server"]
    assert nats_server_stale_paths({}, [DIR]) == ["/etc/nats-server"]
    assert nats_server_stale_paths(None, [DIR]) == ["/etc/nats-server"]


def test_a_listing_gives_the_regular_files_sizes_and_nothing_for_a_path_that_is_no_directory(tmp_path):
    (tmp_path / "pyspark-4.3.0-py2.py3-none-any.whl").write_bytes(b"x" * 7)
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.whl").symlink_to(tmp_path / "pyspark-4.3.0-py2.py3-none-any.whl")
    assert state.list_directory(str(tmp_path)) == {"pyspark-4.3.0-py2.py3-none-any.whl": 7}
    assert state.list_directory(str(tmp_path / "sub")) == {}
    assert state.list_directory(str(tmp_path / "none")) is None
    assert state.list_directory(str(tmp_path / "link.whl")) is None


def test_distributions_are_every_name_asked_and_unknown_when_the_reader_failed():
    found = '{"pyspark": {"version": "4.3.0", "location": "/v/lib/site-packages"}, "nats-edge-spark": null}'
    assert state.parse_distributions(["pyspark", "nats-edge-spark", "other"], 0, found) == {
        "pyspark": {"version": "4.3.0", "location": "/v/lib/site-packages"}, "nats-edge-spark": None, "other": None}
    assert state.parse_distributions(["pyspark"], 1, found) == {"pyspark": None}
    assert state.parse_distributions(["pyspark"], 0, "Traceback") == {"pyspark": None}


@pytest.mark.parametrize("name, unit", [("spark-master", "spark-master.service"), ("job.timer", "job.timer"),
                                        ("job.service", "job.service")])
def test_a_unit_named_without_its_type_is_a_service(name, unit):
    assert state.unit_name(name) == unit


def test_an_owner_or_group_not_asked_for_is_not_compared():
    wanted = dict(CONF, owner=None, group="")
    assert nats_server_stale_paths(FILES, [wanted]) == []
    assert nats_server_stale_paths(FILES, [dict(wanted, mode="0600")]) == [CONF["path"]]
