"""The streams stage of the fleet play with object stores, on a hub and a leaf with their own
JetStream domains: nats_object_stores converged from inventory data (origin at the hub, copy in
the leaf), nats_object_fetch writing the object on the leaf's host, a second run that changes
nothing in one module run per domain, check mode that predicts and writes nothing, a new release of an
object in the same run, and the fetch again from the leaf's own copy while the hub is down."""

import hashlib
import os
import re
import shutil
import subprocess
import sys

import nkeys
import pytest
import yaml

from conftest import COLLECTIONS, ROOT

FIRMWARE = os.urandom(300 * 1024)  # three chunks


def fake_creds(path):
    """Creds for servers without auth: they take any user JWT; the stage only needs a file."""
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER).decode()
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as handle:
        handle.write("-----BEGIN NATS USER JWT-----\neyJhbGciOiJlZDI1NTE5LW5rZXkiLCJ0eXAiOiJKV1QifQ.e30.AAAA\n"
                     "------END NATS USER JWT------\n\n-----BEGIN USER NKEY SEED-----\n%s\n"
                     "------END USER NKEY SEED------\n" % seed)


def stage_vars(tmp_path):
    """The inventory's variables for the preflight and streams stages on the fixture's servers, run on the controller
    with the account TEST (its creds a file the servers without auth take)."""
    fleet_dir = tmp_path / "fleet"
    fake_creds(str(fleet_dir / "creds/TEST/u.creds"))
    return {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "ansible_become": False,
        "nats_fleet_dir": str(fleet_dir), "nats_fleet_default_account": "TEST",
        "nats_accounts": [{"name": "TEST", "users": [{"name": "u"}]}], "nats_fleet_wait_seconds": 30,
        # the fixture's servers take plaintext clients: no CA to verify them with
        "nats_fleet_ca_file": ""}


def run_stages(inventory, *args):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="0")
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", inventory,
                           os.path.join(ROOT, "playbooks/preflight.yml"), os.path.join(ROOT, "playbooks/streams.yml")]
                          + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                          timeout=300, check=False)
    recap = dict((host, dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", rest)))
                 for host, rest in re.findall(r"^(\S+)\s+: (ok=.*)$", proc.stdout, re.M))
    return proc, recap


SECOND_RUN = "Converge the copies and the consumers, wait for the copies"


def task_status(stdout, name, host):
    """What the default callback printed for ``host`` (ok, changed, skipping, ...) under the task named ``name``."""
    for section in stdout.split("\nTASK [")[1:]:
        title, body = section.split("\n", 1) if "\n" in section else (section, "")
        if name in title:
            found = re.search(r"^(\w+): \[%s[\] ]" % re.escape(host), body, re.M)
            return found.group(1) if found else None
    return None


def test_object_stores_from_the_inventory_reach_the_edge_host_also_with_the_hub_down(hub_and_leaf, tmp_path):
    if hub_and_leaf["version"].startswith("2.9."):
        pytest.skip("the stage's logic is the same on every server; the modules' own tests cover 2.9")
    fleet_dir = tmp_path / "fleet"  # stage_vars' nats_fleet_dir
    inventory = tmp_path / "edge-fleet"
    (inventory / "files").mkdir(parents=True)
    (inventory / "files/fw.bin").write_bytes(FIRMWARE)
    dest = tmp_path / "edge-host/opt/gateway/fw.bin"
    hosts = {"all": {"vars": stage_vars(tmp_path), "children": {"nats_servers": {"children": {
        "hub": {"hosts": {"hub-1": {"nats_server_jetstream_domain": "hub", "nats_client_url": hub_and_leaf["hub"]}},
                "vars": {"nats_object_stores": [{"name": "files", "objects": [
                    {"name": "fw.bin", "src": "files/fw.bin"}, {"name": "CHANNEL", "content": "stable"}]}]}},
        "spokes": {"hosts": {"leaf-1": {"nats_server_jetstream_domain": "leaf", "nats_client_url": hub_and_leaf["leaf"]}},
                   "vars": {"nats_object_stores": [{"name": "files", "mirror": {"name": "files", "domain": "hub"}}],
                            "nats_object_fetch": [{"bucket": "files", "name": "fw.bin", "dest": str(dest),
                                                   "mode": "0640"}]}}}}}}}
    (inventory / "hosts.yml").write_text(yaml.safe_dump(hosts))

    proc, recap = run_stages(str(inventory / "hosts.yml"))
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert recap["hub-1"]["changed"] >= 1 and recap["leaf-1"]["changed"] >= 1, recap
    assert dest.read_bytes() == FIRMWARE and dest.stat().st_mode & 0o777 == 0o640
    # the leaf's copy to make: its first run deferred it to the second
    assert task_status(proc.stdout, SECOND_RUN, "leaf-1") == "changed", proc.stdout[-4000:]

    proc, recap = run_stages(str(inventory / "hosts.yml"))
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert recap["hub-1"]["changed"] == 0 and recap["leaf-1"]["changed"] == 0, proc.stdout[-4000:]
    # every copy as declared, nothing changed: one module run per domain
    assert [task_status(proc.stdout, SECOND_RUN, host) for host in ("hub-1", "leaf-1")] == ["skipping"] * 2, \
        proc.stdout[-4000:]

    # the host's copy edited, another one's mode opened: the run reads the host once, rewrites the file only
    dest.write_bytes(b"edited")
    proc, recap = run_stages(str(inventory / "hosts.yml"))
    assert proc.returncode == 0 and recap["leaf-1"]["changed"] == 1, proc.stdout[-4000:]
    assert dest.read_bytes() == FIRMWARE
    dest.chmod(0o644)
    proc, recap = run_stages(str(inventory / "hosts.yml"))
    assert proc.returncode == 0 and recap["leaf-1"]["changed"] == 1, proc.stdout[-4000:]
    assert dest.stat().st_mode & 0o777 == 0o640

    # check mode predicts the file and writes nothing
    dest.unlink()
    proc, recap = run_stages(str(inventory / "hosts.yml"), "--check")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert recap["hub-1"]["changed"] == 0 and recap["leaf-1"]["changed"] == 1 and not dest.exists(), proc.stdout[-4000:]

    # the cache gone, the host's file current: check mode predicts the fetch and no copy (it reads the object for
    # the checksum the cache file would have), exactly what the run then does
    proc, recap = run_stages(str(inventory / "hosts.yml"))
    assert proc.returncode == 0 and recap["leaf-1"]["changed"] == 1 and dest.exists(), proc.stdout[-4000:]
    shutil.rmtree(fleet_dir / "objects")
    proc, recap = run_stages(str(inventory / "hosts.yml"), "--check")
    # the cache's directories (check mode makes them: the controller's own) and the fetch
    assert proc.returncode == 0 and recap["leaf-1"]["changed"] == 2, proc.stdout[-4000:]
    assert not any((fleet_dir / "objects").rglob("fw.bin"))
    proc, recap = run_stages(str(inventory / "hosts.yml"))
    assert proc.returncode == 0 and recap["leaf-1"]["changed"] == 1 and dest.read_bytes() == FIRMWARE, proc.stdout[-4000:]
    proc, recap = run_stages(str(inventory / "hosts.yml"), "--check")
    assert proc.returncode == 0 and recap["leaf-1"]["changed"] == 0, proc.stdout[-4000:]
    # the cache and the host's file gone: check mode predicts the fetch and the copy it cannot make yet
    shutil.rmtree(fleet_dir / "objects")
    dest.unlink()
    proc, recap = run_stages(str(inventory / "hosts.yml"), "--check")
    assert proc.returncode == 0 and recap["leaf-1"]["changed"] == 3 and not dest.exists(), proc.stdout[-4000:]
    assert "would be copied from" in proc.stdout
    proc, recap = run_stages(str(inventory / "hosts.yml"))
    assert proc.returncode == 0 and recap["leaf-1"]["changed"] == 2 and dest.read_bytes() == FIRMWARE, proc.stdout[-4000:]

    # a new release of the object in the hub's store reaches the edge host in the same run: the edge's first run
    # may read its copy before the hub's first run has written the release; the second run reads it again
    for release in (FIRMWARE[::-1], FIRMWARE):
        (inventory / "files/fw.bin").write_bytes(release)
        proc, recap = run_stages(str(inventory / "hosts.yml"))
        assert proc.returncode == 0 and recap["hub-1"]["changed"] >= 1, proc.stdout[-4000:]
        assert dest.read_bytes() == release, proc.stdout[-4000:]
        assert task_status(proc.stdout, SECOND_RUN, "leaf-1") in ("ok", "changed"), proc.stdout[-4000:]

    # the hub down, the cache and the file gone: the leaf's own copy serves the object
    shutil.rmtree(fleet_dir / "objects")
    hub_and_leaf["hub_server"].stop()
    proc, recap = run_stages(str(inventory / "hosts.yml"), "--limit", "leaf-1", "-e", "nats_fleet_wait_seconds=0")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert hashlib.sha256(dest.read_bytes()).digest() == hashlib.sha256(FIRMWARE).digest()
