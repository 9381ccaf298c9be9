"""The spark stage's roles refuse a run without the cluster's master before
they install anything on the other hosts (the master failed in an earlier stage,
is unreachable, or --limit left it out)."""

import json
import os
import subprocess
import sys

import pytest

from conftest import COLLECTIONS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("host, check", [
    ("worker", "Check that the master takes part in this run"),
    ("driver", "Check that the cluster's master was set up in this run"),
])
def test_a_run_without_the_master_is_refused_before_anything_is_installed(tmp_path, host, check):
    # check mode, and the wheelhouse in tmp_path: should the refusal go, the roles
    # still change nothing on this machine
    local = dict(ansible_connection="local", ansible_python_interpreter=sys.executable,
                 spark_runtime_wheelhouse_dir=str(tmp_path / "wheelhouse"))
    inventory = {"all": {"children": {
        "spark_master": {"hosts": {"master": local}},
        "spark_workers": {"hosts": {"worker": local}},
        "spark_driver": {"hosts": {"driver": dict(local, spark_job_master="cluster",
                                                  spark_job_servers=["nats://127.0.0.1:4222"])}},
    }}}
    (tmp_path / "inventory.json").write_text(json.dumps(inventory))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_STDOUT_CALLBACK="json",
               ANSIBLE_NOCOLOR="1", ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i",
                           str(tmp_path / "inventory.json"), "--limit", host, "--check", "nats_edge.fleet.spark"],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout[proc.stdout.index("{"):])
    ran = {}
    for play in report["plays"]:
        for task in play["tasks"]:
            for host, result in task["hosts"].items():
                ran.setdefault(host, []).append((task["task"]["name"].split(" : ")[-1], result))
    names = [name for name, _result in ran[host]]
    assert check in names, names
    failed = [(name, result.get("msg", "")) for name, result in ran[host] if result.get("failed")]
    assert failed and failed[0][0] == check, failed
    assert "the Spark master master" in failed[0][1] and "--limit" in failed[0][1], failed
    # nothing ran on the host before the refusal but facts and the other input checks
    before = names[:names.index(check)]
    assert all(name.startswith(("Gathering Facts", "Gather facts", "Check ", "Validating arguments"))
               for name in before), before
    assert not any(result.get("changed") for _name, result in ran[host]), ran[host]
