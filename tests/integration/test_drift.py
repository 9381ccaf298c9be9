"""The drift recorder: the nats_edge.fleet.nats_drift callback in real ansible-playbook runs, and the drift timer's
script (roles/nats_monitoring/templates/nats-fleet-drift.sh.j2) run end to end against a project of its own, with
playbooks/drift.yml shipping the files to a monitoring host (localhost, paths in tmp)."""

import grp
import json
import os
import pwd
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import COLLECTIONS, ROOT

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError as missing:
    if os.path.realpath(sys.prefix) == os.path.realpath(os.path.join(ROOT, ".venv")):
        raise
    pytest.skip("prometheus-client is not installed in this virtualenv (make venv gives it to .venv)",
                allow_module_level=True)
    raise missing

ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
TEMPLATES = os.path.join(ROOT, "roles", "nats_monitoring", "templates")
TOKEN = "drift-test-token-5f2c9e"  # a variable's value: must reach neither file


def environment(drift_file=None, **extra):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable, ANSIBLE_LOCALHOST_WARNING="0",
               ANSIBLE_RETRY_FILES_ENABLED="0", ANSIBLE_SSH_RETRIES="0")
    for name in ("ANSIBLE_CALLBACKS_ENABLED", "NATS_FLEET_DRIFT_FILE", "STATE_DIRECTORY"):
        env.pop(name, None)
    if drift_file:
        env.update(ANSIBLE_CALLBACKS_ENABLED="nats_edge.fleet.nats_drift", NATS_FLEET_DRIFT_FILE=str(drift_file))
    env.update(extra)
    return env


def playbook(inventory, path, drift_file=None, check=False, extra_args=()):
    command = [ANSIBLE_PLAYBOOK, "-i", str(inventory), str(path)] + (["--check"] if check else []) + list(extra_args)
    return subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=environment(drift_file), timeout=120, check=False)


def samples(path):
    """{(name, ((label, value), ...)): value} of a Prometheus text file, every sample of it."""
    with open(path) as handle:
        text = handle.read()
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            assert key not in found, key
            found[key] = sample.value
    return found


def drift(stage, site, host):
    return ("nats_fleet_drift_changes", (("host", host), ("site", site), ("stage", stage)))


def hosts(stage):
    return ("nats_fleet_drift_hosts", (("stage", stage),))


def failures(stage, host):
    return ("nats_fleet_drift_failures", (("host", host), ("stage", stage)))


def without_timestamp(found, started):
    stamp = found.pop(("nats_fleet_drift_last_run_timestamp_seconds", ()))
    assert started <= stamp <= time.time() + 1
    return found


def run_success(value):
    return {("nats_fleet_drift_run_success", ()): value}


@pytest.fixture
def fleet(tmp_path):
    """An inventory of localhost and spoke1-1 (local connection; JetStream domain spoke-1 from its group's
    group_vars file), and the directory the plays write to."""
    inventory = tmp_path / "inventory"
    (inventory / "group_vars").mkdir(parents=True)
    (inventory / "hosts.yml").write_text(textwrap.dedent("""\
        all:
          vars:
            ansible_connection: local
            ansible_become: false
          hosts:
            localhost:
          children:
            spoke1:
              hosts:
                spoke1-1:
        """))
    (inventory / "group_vars" / "spoke1.yml").write_text("nats_server_jetstream_domain: spoke-1\n")
    out = tmp_path / "out"
    out.mkdir()
    return inventory, out


STAGES_PLAY = """\
- name: Accounts of the test fleet
  hosts: localhost
  gather_facts: false
  tags: [accounts]
  tasks:
    - name: Write the account file
      ansible.builtin.copy: {content: "accounts\\n", dest: "%(out)s/accounts.txt", mode: "0644"}
    - name: Say hello
      ansible.builtin.debug: {msg: hello}
    - name: Skipped here
      ansible.builtin.command: "false"
      when: false

- name: Servers of the test fleet
  hosts: all
  gather_facts: false
  tags: [servers]
  vars:
    drift_test_token: %(token)s
  tasks:
    - name: Write the server file of {{ inventory_hostname }}
      ansible.builtin.copy: {content: "server\\n", dest: "%(out)s/{{ inventory_hostname }}.conf", mode: "0644"}
    - name: Keep the output directory
      ansible.builtin.file: {path: "%(out)s", state: directory}
    - name: Write the controller's copy for the host
      ansible.builtin.copy: {content: "copy\\n", dest: "%(out)s/controller-{{ inventory_hostname }}", mode: "0644"}
      delegate_to: localhost
    - name: Write the token {{ drift_test_token }}
      ansible.builtin.copy:
        content: "{{ drift_test_token }}\\n"
        dest: "%(out)s/{{ inventory_hostname }}.token"
        mode: "0600"
    - name: Write two files in a loop
      ansible.builtin.copy: {content: "{{ item }}\\n", dest: "%(out)s/{{ inventory_hostname }}-{{ item }}", mode: "0644"}
      loop: [a, b]

- name: "Report: the end!"
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Nothing to change
      ansible.builtin.command: "true"
      changed_when: false
"""


def test_check_run_records_what_would_change_and_a_real_run_leaves_none(tmp_path, fleet):
    inventory, out = fleet
    play = tmp_path / "stages.yml"
    play.write_text(STAGES_PLAY % {"out": out, "token": TOKEN})
    drift_file = tmp_path / "drift" / "drift.prom"  # the directory is made by the callback

    started = time.time()
    result = playbook(inventory, play, drift_file, check=True)
    assert result.returncode == 0, result.stdout
    assert sorted(os.listdir(out)) == []  # a check run
    assert without_timestamp(samples(drift_file), started) == {
        drift("accounts", "fleet", "localhost"): 1,
        # localhost is outside every domain; its delegated task is the controller's too
        drift("servers", "fleet", "localhost"): 4,
        drift("servers", "spoke-1", "spoke1-1"): 3,
        # spoke1-1's copy on the controller: counted for spoke1-1, made at the fleet's controller
        drift("servers", "fleet", "spoke1-1"): 1,
        drift("report-the-end", "fleet", "localhost"): 0,
        hosts("accounts"): 1,
        hosts("servers"): 2,
        hosts("report-the-end"): 0,
        **run_success(1),
    }
    assert oct(os.stat(drift_file).st_mode & 0o777) == "0o644"
    assert [name for name in os.listdir(drift_file.parent) if name.startswith(".")] == []

    with open(str(drift_file) + ".json") as handle:
        report = json.load(handle)
    assert report["check_mode"] is True and report["complete"] is True and report["success"] is True
    assert report["failures"] == []
    # names as the playbook writes them: the same for every host, no variable's value in them
    servers = ["Write the server file of {{ inventory_hostname }}", "Write the token {{ drift_test_token }}",
               "Write two files in a loop"]
    controller = "Write the controller's copy for the host"
    assert report["changes"] == [
        {"stage": "accounts", "site": "fleet", "host": "localhost", "tasks": ["Write the account file"]},
        {"stage": "servers", "site": "fleet", "host": "localhost",
         "tasks": servers[:1] + [controller] + servers[1:]},
        {"stage": "servers", "site": "fleet", "host": "spoke1-1", "tasks": [controller]},
        {"stage": "servers", "site": "spoke-1", "host": "spoke1-1", "tasks": servers},
    ]
    for path in (drift_file, str(drift_file) + ".json"):
        with open(path) as handle:
            assert TOKEN not in handle.read()

    result = playbook(inventory, play)
    assert result.returncode == 0, result.stdout
    assert (out / "spoke1-1.token").read_text() == TOKEN + "\n"

    started = time.time()
    result = playbook(inventory, play, drift_file, check=True)
    assert result.returncode == 0, result.stdout
    assert without_timestamp(samples(drift_file), started) == {
        drift("accounts", "fleet", "localhost"): 0,
        drift("servers", "fleet", "localhost"): 0,
        drift("servers", "spoke-1", "spoke1-1"): 0,
        drift("report-the-end", "fleet", "localhost"): 0,
        hosts("accounts"): 0,
        hosts("servers"): 0,
        hosts("report-the-end"): 0,
        **run_success(1),
    }
    with open(str(drift_file) + ".json") as handle:
        assert json.load(handle)["changes"] == []


FAILING_PLAY = """\
- name: Streams of the test fleet
  hosts: all
  gather_facts: false
  tags: [streams]
  tasks:
    - name: Write the stream file
      ansible.builtin.copy: {content: "stream\\n", dest: "%(out)s/{{ inventory_hostname }}.stream", mode: "0644"}
    - name: A failure that is ignored
      ansible.builtin.fail: {msg: ignored}
      ignore_errors: true
    - name: A failure that is rescued
      block:
        - name: Fail on localhost
          ansible.builtin.fail: {msg: "rescued %(token)s"}
          when: inventory_hostname == 'localhost'
      rescue:
        - name: Rescue it
          ansible.builtin.debug: {msg: rescued}
    - name: Fail on the edge
      ansible.builtin.fail: {msg: "the secret is %(token)s"}
      when: inventory_hostname == 'spoke1-1'

- name: Spark of the test fleet
  hosts: all
  gather_facts: false
  tags: [spark]
  tasks:
    - name: Write the spark file
      ansible.builtin.copy: {content: "spark\\n", dest: "%(out)s/{{ inventory_hostname }}.spark", mode: "0644"}
"""


def test_a_failed_host_and_an_unreachable_one_fail_the_run(tmp_path, fleet):
    inventory, out = fleet
    # a host nothing answers for: ssh to a closed port on loopback
    with open(inventory / "hosts.yml", "a") as handle:
        handle.write("    edge:\n      hosts:\n        gone-1: {ansible_connection: ssh, ansible_host: 127.0.0.1, "
                     "ansible_port: 1, nats_server_jetstream_domain: gone}\n")
    play = tmp_path / "failing.yml"
    play.write_text(FAILING_PLAY % {"out": out, "token": TOKEN})
    drift_file = tmp_path / "drift.prom"

    started = time.time()
    result = playbook(inventory, play, drift_file, check=True)
    assert result.returncode != 0, result.stdout
    assert without_timestamp(samples(drift_file), started) == {
        drift("streams", "fleet", "localhost"): 1,
        drift("streams", "spoke-1", "spoke1-1"): 1,
        drift("streams", "gone", "gone-1"): 0,
        drift("spark", "fleet", "localhost"): 1,
        hosts("streams"): 2,
        hosts("spark"): 1,
        failures("streams", "spoke1-1"): 1,
        failures("streams", "gone-1"): 1,
        **run_success(0),
    }
    with open(str(drift_file) + ".json") as handle:
        report = json.load(handle)
    assert report["success"] is False and report["complete"] is True
    assert report["failures"] == [
        {"stage": "streams", "host": "gone-1", "tasks": ["Write the stream file"]},
        {"stage": "streams", "host": "spoke1-1", "tasks": ["Fail on the edge"]},
    ]
    for path in (drift_file, str(drift_file) + ".json"):
        with open(path) as handle:
            assert TOKEN not in handle.read()


def test_a_run_that_stops_early_still_writes_its_files(tmp_path, fleet):
    inventory, out = fleet
    play = tmp_path / "stops.yml"
    play.write_text(textwrap.dedent("""\
        - name: Push of the test fleet
          hosts: localhost
          gather_facts: false
          tags: [push]
          tasks:
            - name: Write the push file
              ansible.builtin.copy: {content: "push\\n", dest: "%s/push.txt", mode: "0644"}
        - name: A play whose hosts cannot be known
          hosts: "{{ no_such_variable }}"
          gather_facts: false
          tasks: []
        """ % out))
    drift_file = tmp_path / "drift.prom"
    started = time.time()
    result = playbook(inventory, play, drift_file, check=True)
    assert result.returncode != 0, result.stdout
    assert without_timestamp(samples(drift_file), started) == {
        drift("push", "fleet", "localhost"): 1, hosts("push"): 1, **run_success(0)}
    with open(str(drift_file) + ".json") as handle:
        report = json.load(handle)
    assert report["complete"] is False and report["success"] is False


# --- the drift timer's script, end to end -------------------------------------------------------------------

PROJECT_SITE = """\
- name: Servers of the small fleet
  hosts: localhost
  gather_facts: false
  tags: [servers]
  tasks:
    - name: Write the server configuration
      ansible.builtin.copy: {content: "listen: 127.0.0.1:4222\\n", dest: "%(target)s", mode: "0644"}
    - name: Read the configuration
      ansible.builtin.command: cat %(target)s
      changed_when: false
      check_mode: false
      failed_when: false
"""


def render(tmp_path):
    """The drift script (and the units, for a look at them) rendered by the role's templates, as the role renders
    them: {False: directory, True: directory}, without and with enforcement."""
    variables = {
        "nats_monitoring_drift_project_dir": str(tmp_path / "project"),
        "nats_monitoring_drift_inventory": "inventory.yml",
        "nats_monitoring_drift_playbook": "site.yml",
        "nats_monitoring_drift_schedule": "*:0/15",
        "nats_monitoring_drift_ansible_playbook": ANSIBLE_PLAYBOOK,
        "_nats_monitoring_drift_user": pwd.getpwuid(os.getuid()).pw_name,
    }
    plays, rendered = [], {}
    for enforce in (False, True):
        dest = rendered[enforce] = tmp_path / ("rendered-enforce" if enforce else "rendered")
        dest.mkdir()
        plays.append({
            "name": "Render the drift timer", "hosts": "localhost", "gather_facts": False,
            "vars": dict(variables, nats_monitoring_drift_enforce=enforce,
                         _nats_monitoring_drift_script=str(dest / "nats-fleet-drift")),
            "tasks": [{"name": "Render %s" % name, "ansible.builtin.template": {
                "src": os.path.join(TEMPLATES, name + ".j2"), "dest": str(dest / target), "mode": mode}}
                for name, target, mode in (("nats-fleet-drift.sh", "nats-fleet-drift", "0755"),
                                           ("nats-fleet-drift.service", "nats-fleet-drift.service", "0644"),
                                           ("nats-fleet-drift.timer", "nats-fleet-drift.timer", "0644"))]})
    play = tmp_path / "render.yml"
    play.write_text(json.dumps(plays))
    result = playbook("localhost,", play, extra_args=["-c", "local"])
    assert result.returncode == 0, result.stdout
    return rendered


@pytest.fixture
def project(tmp_path):
    """A fleet project of its own (site.yml, inventory: localhost, and monitor-1 in group monitoring, both local)
    and the exporter's directory on the monitoring host."""
    project = tmp_path / "project"
    project.mkdir()
    target = tmp_path / "server.conf"
    exporter = tmp_path / "exporter"
    exporter.mkdir()
    (project / "site.yml").write_text(PROJECT_SITE % {"target": target})
    (project / "inventory.yml").write_text(json.dumps({"all": {
        "vars": {"ansible_connection": "local", "ansible_become": False,
                 "ansible_python_interpreter": sys.executable},
        "hosts": {"localhost": {}},
        "children": {"monitoring": {"hosts": {"monitor-1": {
            "nats_monitoring_drift_file": str(exporter / "drift.prom"),
            "nats_monitoring_user": pwd.getpwuid(os.getuid()).pw_name,
            "nats_monitoring_group": grp.getgrgid(os.getgid()).gr_name}}}}}}))
    return project, target, exporter


def run_script(script, state):
    env = environment(STATE_DIRECTORY=str(state))
    return subprocess.run([str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                          timeout=180, check=False, cwd="/")


def test_the_drift_script_checks_ships_and_enforces(tmp_path, project):
    project_dir, target, exporter = project
    rendered = render(tmp_path)
    checking, enforcing = rendered[False], rendered[True]

    service = (checking / "nats-fleet-drift.service").read_text()
    assert "User=%s\n" % pwd.getpwuid(os.getuid()).pw_name in service
    assert "WorkingDirectory=%s\n" % project_dir in service and "StateDirectory=nats-fleet-drift\n" in service
    assert "ExecStart=%s\n" % (checking / "nats-fleet-drift") in service
    assert "OnCalendar=*:0/15\n" in (checking / "nats-fleet-drift.timer").read_text()
    analyze = shutil.which("systemd-analyze")
    if analyze:
        units = [str(checking / "nats-fleet-drift.service"), str(checking / "nats-fleet-drift.timer")]
        verified = subprocess.run([analyze, "verify"] + units, capture_output=True, text=True, check=False)
        assert "nats-fleet-drift" not in verified.stderr.replace(str(checking), ""), verified.stderr

    # check only: the drift reaches the exporter's file, the fleet is left as it is
    state = tmp_path / "state"
    result = run_script(checking / "nats-fleet-drift", state)
    assert result.returncode == 0, result.stdout
    assert not target.exists()
    shipped = exporter / "drift.prom"
    found = samples(shipped)
    assert found[drift("servers", "fleet", "localhost")] == 1 and found[hosts("servers")] == 1
    assert found[("nats_fleet_drift_run_success", ())] == 1
    assert shipped.read_text() == (state / "drift.prom").read_text()
    assert oct(os.stat(shipped).st_mode & 0o777) == "0o644"
    with open(str(shipped) + ".json") as handle:
        assert [change["tasks"] for change in json.load(handle)["changes"]] == [["Write the server configuration"]]

    # scheduled enforcement: the drift enforced, then checked again; what is shipped is what is left (nothing)
    state = tmp_path / "state-enforce"
    result = run_script(enforcing / "nats-fleet-drift", state)
    assert result.returncode == 0, result.stdout
    assert "enforcing site.yml" in result.stdout
    assert target.read_text() == "listen: 127.0.0.1:4222\n"
    assert samples(state / "enforced.prom")[drift("servers", "fleet", "localhost")] == 1
    found = samples(shipped)
    assert found[drift("servers", "fleet", "localhost")] == 0 and found[hosts("servers")] == 0
    assert found[("nats_fleet_drift_run_success", ())] == 1
    with open(str(shipped) + ".json") as handle:
        assert json.load(handle)["changes"] == []


def test_drift_playbook_without_monitoring_hosts_does_nothing(tmp_path):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {"localhost": {"ansible_connection": "local"}}}}))
    result = playbook(inventory, "nats_edge.fleet.drift", extra_args=["-e", "nats_monitoring_drift_source=/nowhere"])
    assert result.returncode == 0, result.stdout
    assert "skipping: no hosts matched" in result.stdout
