"""The rollout's knobs checked before any host is touched: ansible-playbook nats_edge.fleet.rollout on an
inventory of a hub and edge sites, each bad knob refused by the check at the start of the plan, with a
message naming the variable and the value, and the knobs that are right today passing it.

The runs that pass the check go no further than it (``--tags`` naming no task: only the checks, tagged
``always``, run), so no host is touched; the run that shows the order (the check before the hosts are
pinged) runs the whole playbook on hosts that cannot be reached."""

import json
import os
import subprocess
import sys

import yaml

from conftest import COLLECTIONS, ROOT, free_port

ONLY_THE_CHECKS = ["--tags", "only-the-checks"]  # no task has this tag: the checks (always) alone run


def inventory(**host_overrides):
    """A hub of two nodes, site1 of two nodes (JetStream domain site1) and site2 of one, on this machine."""
    local = dict(ansible_connection="local", ansible_python_interpreter=sys.executable)
    hosts = {"hub-1": dict(nats_server_jetstream_domain="hub"), "hub-2": dict(nats_server_jetstream_domain="hub"),
             "site1-a": dict(nats_server_jetstream_domain="site1"), "site1-b": dict(nats_server_jetstream_domain="site1"),
             "site2-a": dict(nats_server_jetstream_domain="site2")}
    for name, variables in hosts.items():
        variables.update(host_overrides.get(name, local))
    return {"all": {"children": {"nats_servers": {"children": {
        "hub": {"hosts": {h: hosts[h] for h in ("hub-1", "hub-2")}},
        "edges": {"hosts": {h: hosts[h] for h in ("site1-a", "site1-b", "site2-a")}}}}}}}


def rollout(tmp_path, extra_vars=None, args=None, inv=None):
    """(return code, [(task name, {host: result})] of every play, {host: message of its first failure})."""
    args = ONLY_THE_CHECKS if args is None else args
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inv or inventory()))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=COLLECTIONS,
               ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="0")
    command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(tmp_path / "inventory.yml"),
               "nats_edge.fleet.rollout"] + list(args)
    if extra_vars is not None:
        command += ["-e", json.dumps(extra_vars)]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False, cwd=str(tmp_path))
    assert "{" in proc.stdout, proc.stdout + proc.stderr
    report = json.loads(proc.stdout[proc.stdout.index("{"):])
    tasks, failures = [], {}
    for play in report["plays"]:
        for task in play["tasks"]:
            tasks.append((task["task"]["name"], task["hosts"]))
            for host, result in task["hosts"].items():
                if result.get("failed") and host not in failures:
                    failures[host] = " ".join(str(result.get("msg", "")).split())
    return proc.returncode, tasks, failures


def the_failure(failures):
    """The one message of the check (run once, for every host)."""
    assert failures, "the rollout's check passed"
    messages = set(failures.values())
    assert len(messages) == 1, messages
    return messages.pop()


BAD = [
    # (extra vars, what the message says)
    ({"nats_rollout_canaries": ["site7"]},
     "nats_rollout_canaries[0]: 'site7' is not an edge site or host of the inventory (did you mean site1 or site2?); "
     "the edge sites (and their hosts) are: site1 (site1-a, site1-b), site2 (site2-a)"),
    ({"nats_rollout_canaries": ["hub-2"]}, "nats_rollout_canaries[0]: 'hub-2' is in the hub (group hub)"),
    ({"nats_rollout_edge_batches": [0]}, "nats_rollout_edge_batches[0]: 0: a wave size is a whole number of edge hosts "
                                         "from 1 (such as 2) or a percentage of them from 1% to 100% (such as '25%')"),
    ({"nats_rollout_edge_batches": ["abc"]}, "nats_rollout_edge_batches[0]: 'abc': a wave size is"),
    ({"nats_rollout_edge_batches": [1, "0%"]}, "nats_rollout_edge_batches[1]: '0%': a wave size is"),
    ({"nats_rollout_edge_batches": []}, "nats_rollout_edge_batches: []: give at least one wave size"),
    ({"nats_rollout_max_fail_percentage": "lots"}, "nats_rollout_max_fail_percentage: 'lots': a percentage"),
    ({"nats_rollout_gate_timeout": "2m"}, "nats_rollout_gate_timeout: '2m': the seconds a node has to pass each gate"),
    ({"nats_rollout_max_lag": -1}, "nats_rollout_max_lag: -1: the operations a replica may lag"),
    ({"nats_rollout_lame_duck": "sometimes"}, "nats_rollout_lame_duck: 'sometimes': true or false"),
    ({"nats_rollout_only_outdated": "maybe"}, "nats_rollout_only_outdated: 'maybe': true or false"),
    ({"nats_rollout_report_file": "/nonexistent-dir/rollout.json"},
     "nats_rollout_report_file: '/nonexistent-dir/rollout.json': the directory /nonexistent-dir does not exist"),
    ({"nats_fleet_hub_group": "hubs"}, "nats_fleet_hub_group: 'hubs' is not a group of the inventory (did you mean hub?)"),
    ({"nats_rollout_canarys": ["site2"]},
     "nats_rollout_canarys is set, but the rollout has no such setting: did you mean nats_rollout_canaries?"),
]


def test_every_bad_knob_is_refused_naming_the_variable_and_the_value(tmp_path):
    """All of them at once (but the hub group: without it the edge sites, and so the canaries, are unknown): the
    check reports every problem in one message."""
    knobs = {}
    for extra, _fragment in BAD:
        for name, value in extra.items():
            if name != "nats_fleet_hub_group":
                knobs.setdefault(name, value)
    code, _tasks, failures = rollout(tmp_path, knobs)
    message = the_failure(failures)
    assert code != 0
    # the knobs set once in the table: each row whose knob is in this run
    wrong = [fragment for extra, fragment in BAD
             if all(knobs.get(k, object()) == v for k, v in extra.items()) and fragment not in message]
    assert not wrong, "missing %s in %s" % (wrong, message)
    assert message.startswith("rollout: ") and message.endswith("Nothing was changed."), message


def test_each_bad_knob_alone_fails_the_check(tmp_path):
    for extra, fragment in BAD:
        code, _tasks, failures = rollout(tmp_path, extra)
        assert code != 0 and fragment in the_failure(failures), (extra, failures)


def test_the_knobs_that_are_right_pass_the_check(tmp_path):
    # the defaults, and every form the play takes today
    for extra in (None, {"nats_rollout_edge_batches": [1, 2, "50%"], "nats_rollout_canaries": ["site2", "site1-b"],
                         "nats_rollout_max_fail_percentage": 0, "nats_rollout_gate_timeout": "90",
                         "nats_rollout_max_lag": 5, "nats_rollout_lame_duck": "no", "nats_rollout_only_outdated": True,
                         "nats_rollout_report_file": str(tmp_path / "rollout.json")},
                  # one size, and a canary given as a string (the list type's form: names separated by commas)
                  {"nats_rollout_edge_batches": "25%", "nats_rollout_canaries": "site2,site1",
                   "nats_rollout_max_fail_percentage": "20%", "nats_rollout_report_file": "rollout.json"},
                  {"nats_rollout_edge_batches": 3, "nats_rollout_canaries": None}):
        code, tasks, failures = rollout(tmp_path, extra)
        assert code == 0 and not failures, (extra, failures)
        assert [name for name, _hosts in tasks] == ["Read the rollout's knobs", "Check the rollout's knobs, before any "
                                                    "host is touched"]


def test_a_knob_set_for_some_hosts_only_names_them(tmp_path):
    inv = inventory()
    inv["all"]["children"]["nats_servers"]["children"]["edges"]["hosts"]["site2-a"]["nats_rollout_gate_timeout"] = 0
    code, _tasks, failures = rollout(tmp_path, inv=inv)
    assert code != 0
    assert "nats_rollout_gate_timeout: 0: the seconds a node has to pass each gate, a whole number from 1 (default 120) " \
           "(as set for site2-a)" in the_failure(failures)


def test_the_check_comes_before_any_host_is_contacted(tmp_path):
    """The whole playbook (no --tags) on hosts nobody answers for: it stops at the check, before the hosts are
    pinged. (Hosts that cannot be reached: were the check to pass, the rollout would stop at the hub, which does
    not answer, and touch nothing either.)"""
    port = free_port()  # nothing listens there
    unreachable = dict(ansible_connection="ssh", ansible_host="127.0.0.1", ansible_port=port, ansible_user="nobody",
                       ansible_ssh_common_args="-o ConnectTimeout=2 -o BatchMode=yes")
    inv = inventory(**{h: unreachable for h in ("hub-1", "hub-2", "site1-a", "site1-b", "site2-a")})
    code, tasks, failures = rollout(tmp_path, {"nats_rollout_edge_batches": [0]}, args=[], inv=inv)
    assert code != 0
    assert "nats_rollout_edge_batches[0]: 0: a wave size" in the_failure(failures)
    assert [name for name, _hosts in tasks] == ["Read the rollout's knobs", "Check the rollout's knobs, before any host "
                                                "is touched"]
