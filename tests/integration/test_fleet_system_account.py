"""The fleet's accounts stage (nats_fleet, tasks_from: accounts) on localhost against an nsc store of its own: another
nats_fleet_system_account than the operator's is refused before the store changes, unless
nats_fleet_replace_system_account is true, and then the run says that every server must be reconfigured."""

import json

from conftest import run_playbook
from test_nsc_modules import tree_hash

ACCOUNTS = [{"name": "APP", "users": [{"name": "app"}]}]
STAGE = """
- name: The fleet's accounts stage
  ansible.builtin.include_role:
    name: nats_edge.fleet.nats_fleet
    tasks_from: accounts
  vars:
    nats_fleet_dir: {fleet_dir}
    nats_fleet_operator: fleet
    nats_accounts: {accounts}
    nats_exports: []
"""


def stage(tmp_path, *extra):
    """(return code, the first failure's message, the warnings) of one run of the stage."""
    tasks = STAGE.format(fleet_dir=json.dumps(str(tmp_path / "fleet")), accounts=json.dumps(ACCOUNTS))
    proc = run_playbook(tmp_path, tasks, extra_args=list(extra), env={"ANSIBLE_STDOUT_CALLBACK": "json"})
    report = json.loads(proc.stdout[proc.stdout.index("{"):])
    failure, warnings = None, []
    for task in report["plays"][0]["tasks"]:
        result = task["hosts"].get("localhost", {})
        warnings += result.get("warnings") or []
        if result.get("failed") and failure is None:
            failure = " ".join(str(result.get("msg")).split())
    return proc.returncode, failure, warnings


def test_another_system_account_is_refused_unless_replacing_it_is_asked_for(tmp_path):
    code, failure, _warnings = stage(tmp_path)
    assert code == 0, failure
    store = tmp_path / "fleet" / "nsc"
    before = tree_hash(str(store))
    # a typo, or an ordinary account: refused, the store as it was
    code, failure, _warnings = stage(tmp_path, "-e", "nats_fleet_system_account=APP")
    assert code != 0 and "system_account" in failure and "SYS" in failure and "replace_system_account" in failure, \
        failure
    assert tree_hash(str(store)) == before
    # asked for: done, and the run says what the servers need
    code, failure, warnings = stage(tmp_path, "-e", "nats_fleet_system_account=APP",
                                    "-e", "nats_fleet_replace_system_account=true")
    assert code == 0, failure
    assert any("reconfigured" in warning for warning in warnings), warnings
    assert tree_hash(str(store)) != before
