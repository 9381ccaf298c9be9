"""nats-edge-pull's own logic: which sources it takes, the SHA-256 file, the archive it unpacks, the command it runs
and what it reads of the play recap (the runs themselves, against real servers, are in tests/integration)."""

import importlib.machinery
import importlib.util
import io
import json
import os
import tarfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOADER = importlib.machinery.SourceFileLoader("nats_edge_pull", os.path.join(ROOT, "roles/nats_pull/files/nats-edge-pull"))
SPEC = importlib.util.spec_from_loader("nats_edge_pull", LOADER)
runner = importlib.util.module_from_spec(SPEC)
LOADER.exec_module(runner)


@pytest.mark.parametrize("kind, url, allowed, scheme", [
    ("git", "https://git.example.net/fleet.git", False, "https"),
    ("git", "git@git.example.net:ops/fleet.git", False, "ssh"),
    ("git", "ssh://git@git.example.net/ops/fleet.git", False, "ssh"),
    ("artifact", "https://files.example.net/fleet.tar.gz", False, "https"),
    ("artifact", "http://files.example.net/fleet.tar.gz", True, "http"),
    ("git", "git://git.example.net/fleet.git", True, "git"),
])
def test_verified_sources_and_those_allowed_in_plain_text(kind, url, allowed, scheme):
    assert runner.check_url(kind, url, allowed) == scheme


@pytest.mark.parametrize("kind, url, message", [
    ("artifact", "http://files.example.net/fleet.tar.gz", "is not verified (http://): use https"),
    ("git", "git://git.example.net/fleet.git", "is not verified (git://)"),
    ("artifact", "ftp://files.example.net/fleet.tar.gz", "artifact sources are one of https, file, http://"),
])
def test_an_unverified_source_is_refused(kind, url, message):
    with pytest.raises(runner.PullError) as caught:
        runner.check_url(kind, url)
    assert message in str(caught.value)


def test_the_sha256_file():
    digest = "ab" * 32
    assert runner.parse_sha256(digest + "  fleet.tar.gz\n", "u") == digest
    assert runner.parse_sha256(digest.upper(), "u") == digest
    with pytest.raises(runner.PullError, match="u does not hold a SHA-256 digest"):
        runner.parse_sha256("<html>not found</html>", "u")


def archive(tmp_path, members):
    path = tmp_path / "a.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, kind in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = 2
                tar.addfile(info, io.BytesIO(b"ok"))
            else:
                info.type = kind
                info.linkname = "/etc/passwd"
                tar.addfile(info)
    return str(path)


@pytest.mark.parametrize("members, message", [
    ([("../outside", "file")], "'../outside' would land outside its directory"),
    ([("/etc/cron.d/x", "file")], "would land outside its directory"),
    ([("inventory/hosts", tarfile.SYMTYPE)], "'inventory/hosts' is neither a file nor a directory"),
    ([("dev", tarfile.CHRTYPE)], "is neither a file nor a directory"),
])
def test_an_archive_that_would_write_outside_is_refused_whole(tmp_path, members, message):
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(runner.PullError) as caught:
        runner.safe_extract(archive(tmp_path, [("site.yml", "file")] + members), str(dest))
    assert message in str(caught.value)
    assert os.listdir(dest) == []  # nothing unpacked


def test_the_command_runs_the_host_alone_with_a_local_connection():
    config = {"host": "edge-1", "inventory": "inventory", "bundle": "pull/edge-1.vault", "state_dir": "/var/lib/p",
              "vault_password_file": "/etc/p/vault.pass", "ansible_playbook": "/opt/p/venv/bin/ansible-playbook",
              "python": "/opt/p/venv/bin/python", "playbook": "nats_edge.fleet.pull", "extra_args": ["-v"]}
    argv = runner.playbook_command(config, "/var/lib/p/checkout", "abc123")
    assert argv[:7] == ["/opt/p/venv/bin/ansible-playbook", "-i", "/var/lib/p/checkout/inventory", "--limit", "edge-1",
                        "--vault-password-file", "/etc/p/vault.pass"]
    assert argv[-2:] == ["-v", "nats_edge.fleet.pull"]
    assert json.loads(argv[8]) == {
        "ansible_connection": "local", "ansible_python_interpreter": "/opt/p/venv/bin/python",
        "nats_pull_bundle_file": "/var/lib/p/checkout/pull/edge-1.vault", "nats_pull_revision": "abc123",
        "nats_pull_bundle_dir": "/var/lib/p/bundle"}
    env = runner.playbook_env(config, "/var/lib/p/checkout")
    assert env["ANSIBLE_COLLECTIONS_PATH"] == "/var/lib/p/checkout/collections" and "ANSIBLE_CONFIG" not in env


def test_the_recap_of_the_host():
    output = ("PLAY RECAP *****\n"
              "edge-10                    : ok=3    changed=0    unreachable=0    failed=0    skipped=1\n"
              "edge-1                     : ok=41   changed=2    unreachable=0    failed=1    skipped=9\n")
    assert runner.recap(output, "edge-1") == {"ok": 41, "changed": 2, "unreachable": 0, "failed": 1}
    assert runner.recap(output, "edge-2") is None


def test_a_configuration_without_what_a_run_needs_is_named(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"host": "edge-1", "source": {"type": "svn", "url": "x"}}))
    with pytest.raises(runner.PullError, match="playbook, inventory, bundle, vault_password_file"):
        runner.load_config(str(path))
