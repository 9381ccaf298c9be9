"""nats_server_state against a real nats-server (its version, its live /varz, the files beside it), and host_state on this machine."""

import hashlib
import os
import shutil
import sys
import time

import pytest

from conftest import free_port


def test_reads_a_running_server_its_binary_and_files(nats_binary, start_server, module, tmp_path):
    binary, version = nats_binary
    port, http = free_port(), free_port()
    server = start_server(binary, 'listen: "127.0.0.1:%d"\nhttp: "127.0.0.1:%d"\n' % (port, http), "n1", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    conf = str(tmp_path / "n1.conf")

    result = module("nats_server_state", {
        "binary": binary, "paths": [conf, str(tmp_path), str(tmp_path / "missing")],
        "monitor_url": "http://127.0.0.1:%d" % http, "service": "nats-edge-no-such-unit"})

    assert not result.get("failed") and not result["changed"], result
    assert result["binary"]["rc"] == 0 and result["binary"]["stdout"].endswith("v" + version)
    assert result["varz"]["version"] == version and result["varz"]["port"] == port and result["varz_error"] == ""
    with open(conf, "rb") as handle:
        assert result["files"][conf]["checksum"] == hashlib.sha1(handle.read()).hexdigest()
    assert result["files"][str(tmp_path)]["type"] == "directory"
    assert result["files"][str(tmp_path / "missing")] == {"exists": False}
    assert set(result["mtimes"]) == {conf, str(tmp_path), binary}
    assert result["mtimes"][conf] == os.stat(conf).st_mtime_ns / 1e9


def test_a_server_that_does_not_answer_and_a_missing_binary_are_reported_not_failed(module, tmp_path):
    result = module("nats_server_state", {"binary": str(tmp_path / "nats-server"),
                                          "monitor_url": "http://127.0.0.1:%d" % free_port(), "timeout": 1})
    assert not result.get("failed"), result
    assert result["binary"]["rc"] == 127 and result["binary"]["mtime"] is None
    assert result["varz"] is None and result["varz_error"]
    assert result["files"] == {} and result["mtimes"] == {}


def test_the_read_gathers_the_facts_setup_gathers_and_ansible_keeps_them(tmp_path):
    """gather_subset: the role's one round trip gathers what setup would, and Ansible keeps them as the host's facts."""
    import json as _json
    from conftest import run_playbook
    out = run_playbook(tmp_path, """
        - name: Read, gathering facts
          nats_edge.fleet.nats_server_state:
            binary: %s
            gather_subset: [min, hardware, network]
          register: read
        - name: What the play now knows, before setup runs
          ansible.builtin.set_fact:
            known: "{{ {'arch': ansible_facts.architecture, 'mem': ansible_memtotal_mb, 'mgr': ansible_service_mgr,
                        'ipv4': ansible_default_ipv4 | default({}), 'mounts': ansible_mounts | map(attribute='mount') | list,
                        'keys': read.ansible_facts.keys() | list,
                        'interfaces': read.ansible_facts.ansible_interfaces | default([])} }}"
        - name: Setup with the same subset
          ansible.builtin.setup:
            gather_subset: [min, hardware, network]
          register: setup
        - name: Compare
          ansible.builtin.copy:
            content: "{{ {'known': known, 'setup_keys': setup.ansible_facts.keys() | list,
                          'setup_interfaces': setup.ansible_facts.ansible_interfaces | default([]),
                          'setup': {'arch': ansible_facts.architecture, 'mem': ansible_memtotal_mb,
                                    'mgr': ansible_service_mgr, 'ipv4': ansible_default_ipv4 | default({}),
                                    'mounts': ansible_mounts | map(attribute='mount') | list}} | to_json }}"
            dest: %s
            mode: "0600"
        - name: An unknown subset is refused by name
          nats_edge.fleet.nats_server_state:
            gather_subset: [min, hardwear]
          register: bad
          failed_when: bad is not failed or 'hardwear' not in bad.msg
    """ % (tmp_path / "nats-server", tmp_path / "out.json"))
    assert out.returncode == 0, out.stdout[-3000:]
    found = _json.loads((tmp_path / "out.json").read_text())
    known, setup = found["known"], found["setup"]
    # the same facts, but for the interfaces that came or went between the two reads (other labs on this machine
    # add and remove veth devices at any time)
    moving = set("ansible_" + name.replace("-", "_") for name in
                 set(known.pop("interfaces")) ^ set(found["setup_interfaces"]))
    assert set(known.pop("keys")) - moving == set(found["setup_keys"]) - moving, found
    # setup reads the mounts in threads and lists each as its thread ends: the same mounts, in any order
    assert known["arch"] == setup["arch"] and known["mgr"] == setup["mgr"]
    assert sorted(known["mounts"]) == sorted(setup["mounts"]), found
    assert known["ipv4"].get("address") == setup["ipv4"].get("address")
    assert abs(known["mem"] - setup["mem"]) <= 1, found


def test_the_checksum_lookup_reads_bytes_and_reports_missing_files_directories_and_links_with_details(tmp_path):
    """What the role compares a pushed binary with, the fleet play its nats contexts, its directories and its creds
    link."""
    import hashlib
    import json as _json
    from conftest import run_playbook
    binary = tmp_path / "nats-server"
    binary.write_bytes(b"\x7fELF\xff\xfe not text")
    binary.chmod(0o755)
    missing = tmp_path / "none"
    folder = tmp_path / "fleet"
    folder.mkdir()
    folder.chmod(0o700)
    (tmp_path / "to-binary").symlink_to("nats-server")
    (tmp_path / "to-folder").symlink_to("fleet")
    (tmp_path / "dangling").symlink_to("none")
    out = run_playbook(tmp_path, """
        - name: Read
          ansible.builtin.copy:
            content: "{{ {'plain': lookup('nats_edge.fleet.nats_checksum', '%s'),
                          'details': query('nats_edge.fleet.nats_checksum', '%s', '%s', '%s', '%s/to-binary',
                                           '%s/to-folder', '%s/dangling', details=true)} | to_json }}"
            dest: "%s"
            mode: "0600"
        - name: Refuse a missing file without details
          ansible.builtin.debug:
            msg: "{{ lookup('nats_edge.fleet.nats_checksum', '%s') }}"
    """ % (binary, binary, missing, folder, tmp_path, tmp_path, tmp_path, tmp_path / "out.json", missing))
    text = out.stdout
    assert out.returncode != 0 and "nats_checksum: cannot read %s" % missing in text, text[-2000:]
    digest = hashlib.sha1(binary.read_bytes()).hexdigest()
    found = _json.loads((tmp_path / "out.json").read_text())
    assert found == {"plain": digest, "details": [
        {"exists": True, "type": "file", "checksum": digest, "mode": "0755"},
        {"exists": False},
        {"exists": True, "type": "directory", "mode": "0700"},
        {"exists": True, "type": "link", "target": "nats-server", "checksum": digest, "mode": "0755"},
        {"exists": True, "type": "link", "target": "fleet", "mode": "0700"},
        {"exists": True, "type": "link", "target": "none"}]}, found


def test_the_wheelhouse_lookup_answers_from_a_current_stamp_only(tmp_path):
    """What spares the Spark runtime role the wheelhouse build's run: the stamp's answer, or {} when the build
    has to run."""
    import json as _json
    from conftest import run_playbook, ROOT
    sys.path.insert(0, os.path.join(ROOT, "roles", "spark_runtime", "files"))
    import build_wheelhouse as build
    source, house = tmp_path / "src", tmp_path / "x86_64-py311"
    (source / "pkg").mkdir(parents=True)
    (source / "pkg" / "job.py").write_text("print(1)\n")
    house.mkdir()
    (house / "a-1.0-py3-none-any.whl").write_bytes(b"a" * 10)
    args = dict(source=str(source), pyspark="4.0.1", arch="x86_64", python="3.11", extra=[])
    with open(build.stamp_path(str(house)), "w") as handle:
        _json.dump({"inputs": build._wheelhouse.inputs(**args), "listing": build.listing(str(house)),
                    "answer": build.answer(str(house), True, "a-1.0-py3-none-any.whl")}, handle)

    def ask():
        out = run_playbook(tmp_path, """
            - name: Read
              ansible.builtin.copy:
                content: "{{ lookup('nats_edge.fleet.spark_wheelhouse', '%s', source='%s', pyspark='4.0.1',
                                    arch='x86_64', python='3.11') | to_json }}"
                dest: "%s"
                mode: "0600"
        """ % (house, source, tmp_path / "out.json"))
        assert out.returncode == 0, out.stdout[-2000:]
        return _json.loads((tmp_path / "out.json").read_text())

    assert ask() == {"changed": False, "wheels": ["a-1.0-py3-none-any.whl"], "package": "a-1.0-py3-none-any.whl",
                     "listing": ["a-1.0-py3-none-any.whl 10"]}
    (source / "pkg" / "job.py").write_text("print(2)\n")
    assert ask() == {}


def test_host_state_reads_files_listings_accounts_packages_and_a_pythons_distributions(module, tmp_path):
    """What the Spark roles compare a host with, read from this machine in one module run."""
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / "a-1.0-py3-none-any.whl").write_bytes(b"wheel")
    conf = tmp_path / "spark.env"
    conf.write_text("SPARK_HOME=/x\n")
    result = module("host_state", {
        "paths": [str(conf), str(tmp_path / "missing")], "listings": [str(tmp_path / "wheels"), str(tmp_path / "none")],
        "python": sys.executable, "distributions": ["pytest", "nats-edge-no-such-dist"],
        "users": ["root", "nats-edge-nobody"], "groups": ["root"], "packages": ["dpkg", "nats-edge-no-such-package"],
        "services": ["nats-edge-no-such-unit"]})
    assert not result.get("failed") and not result["changed"], result
    assert result["files"][str(conf)]["checksum"] == hashlib.sha1(b"SPARK_HOME=/x\n").hexdigest()
    assert result["files"][str(tmp_path / "missing")] == {"exists": False}
    assert result["listings"] == {str(tmp_path / "wheels"): {"a-1.0-py3-none-any.whl": 5}, str(tmp_path / "none"): None}
    assert result["python"]["exists"] and result["python"]["error"] == ""
    assert result["python"]["distributions"]["pytest"]["version"] == pytest.__version__
    assert os.path.isdir(os.path.join(result["python"]["distributions"]["pytest"]["location"], "_pytest"))
    assert result["python"]["distributions"]["nats-edge-no-such-dist"] is None
    assert result["users"]["root"]["uid"] == 0 and result["users"]["nats-edge-nobody"] == {"exists": False}
    assert result["groups"]["root"] == {"exists": True, "gid": 0}
    assert result["packages"]["dpkg"]["installed"] and result["packages"]["dpkg"]["manager"] == "dpkg"
    assert result["packages"]["nats-edge-no-such-package"]["installed"] is False
    assert result["services"]["nats-edge-no-such-unit"].get("LoadState", "not-found") == "not-found"


def test_host_state_reads_status_pages_and_says_why_one_did_not_answer(module, tmp_path, nats_binary, start_server):
    """What the Spark master's read takes its registered workers from: a status page's JSON, here a real
    nats-server's monitoring port; a port nobody listens on is reported, not an error."""
    from conftest import free_port
    binary, _version = nats_binary
    port, http = free_port(), free_port()
    server = start_server(binary, 'listen: "127.0.0.1:%d"\nhttp: "127.0.0.1:%d"\nserver_name: "page"\n' % (port, http),
                          "page", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    page, dead = "http://127.0.0.1:%d/varz" % http, "http://127.0.0.1:%d/json/" % free_port()
    result = module("host_state", {"urls": [page, dead], "timeout": 2})
    assert not result.get("failed") and not result["changed"], result
    assert result["urls"][page]["json"]["server_name"] == "page" and result["urls"][page]["error"] == ""
    assert result["urls"][dead]["json"] is None and result["urls"][dead]["error"], result["urls"][dead]
    assert "urls" not in module("host_state", {"paths": [str(tmp_path)]})


def test_host_state_reports_a_missing_python_and_refuses_distributions_without_one(module, tmp_path):
    result = module("host_state", {"python": str(tmp_path / "venv" / "bin" / "python"), "distributions": ["pyspark"]})
    assert not result.get("failed"), result
    assert result["python"] == {"exists": False, "error": "", "distributions": {"pyspark": None}}
    refused = module("host_state", {"distributions": ["pyspark"]})
    assert refused.get("failed") and "distributions pyspark need python" in refused["msg"], refused


# -- what cannot be read is reported as absent; every command is bounded by timeout; only http and https are read --

def _hanging(tmp_path, name):
    """A program that never answers, and starts two more that never end, each writing its pid to <name>.pids."""
    script = tmp_path / name
    pids = tmp_path / (name + ".pids")
    script.write_text("#!/bin/sh\nsleep 60 &\necho $! >> %s\nsleep 60 &\necho $! >> %s\necho $$ >> %s\nwait\n"
                      % (pids, pids, pids))
    script.chmod(0o755)
    return str(script), pids


def _gone(pids):
    """Whether every process whose pid is in the file ``pids`` has ended (a zombie nobody reaped counts)."""
    for pid in pids.read_text().split():
        try:
            with open("/proc/%s/stat" % pid) as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] != "Z":
                    return False
        except OSError:
            continue
    return True


def _timed(module, name, args, env=None):
    started = time.monotonic()
    result = module(name, args, env=env)
    return result, time.monotonic() - started


def test_a_binary_that_cannot_be_run_is_reported_as_absent(nats_binary, module, tmp_path):
    """nats_server_state: 'a binary that cannot be run (a directory, a file without execute permission, not a
    program)' is reported as absent, the reason in binary.stderr; the real one beside it still runs."""
    binary, version = nats_binary
    folder = tmp_path / "a-directory"
    folder.mkdir()
    plain = tmp_path / "nats-server-0644"
    shutil.copy(binary, plain)
    plain.chmod(0o644)
    junk = tmp_path / "nats-server-junk"
    junk.write_bytes(b"\x00\x01 not a program")
    junk.chmod(0o755)
    for path, reason in ((folder, "%s is a directory, not a program" % folder),
                         (plain, "%s is not executable (mode 0644)" % plain),
                         (junk, "%s is not a program this host can run" % junk)):
        result = module("nats_server_state", {"binary": str(path), "paths": [str(path)]})
        assert not result.get("failed") and not result["changed"], result
        assert result["binary"]["rc"] == 126 and result["binary"]["mtime"] is None, result["binary"]
        assert result["binary"]["stderr"].startswith(reason) and result["binary"]["stdout"] == "", result["binary"]
        assert result["files"][str(path)]["exists"] and str(path) in result["mtimes"]  # described as any path is
    result = module("nats_server_state", {"binary": binary})
    assert result["binary"]["rc"] == 0 and result["binary"]["stdout"].endswith("v" + version), result


def test_a_python_that_cannot_be_run_is_reported_as_absent(module, tmp_path):
    """host_state: a python that is there but cannot be run is reported as absent, with the reason in python.error."""
    folder = tmp_path / "venv" / "bin" / "python"
    folder.mkdir(parents=True)
    plain = tmp_path / "python-0644"
    plain.write_text("#!/bin/sh\necho 3.11\n")
    plain.chmod(0o644)
    for path, reason in ((folder, "%s is a directory, not a program" % folder),
                         (plain, "%s is not executable (mode 0644)" % plain)):
        result = module("host_state", {"python": str(path), "distributions": ["pyspark"]})
        assert not result.get("failed") and not result["changed"], result
        assert result["python"] == {"exists": False, "error": reason, "distributions": {"pyspark": None}}, result


def test_the_timeout_bounds_each_command(module, tmp_path):
    """nats_server_state: timeout bounds each command it runs. A --version that never answers is killed, with what
    it started, and reported in binary (rc 124, the command named); a dpkg-query or systemctl that never answers
    fails the task, naming the command."""
    hang, pids = _hanging(tmp_path, "nats-server")
    result, seconds = _timed(module, "nats_server_state", {"binary": hang, "timeout": 2})
    assert not result.get("failed") and not result["changed"], result
    assert result["binary"]["rc"] == 124, result["binary"]
    assert result["binary"]["stderr"] == "%s --version: did not finish within 2s and was killed" % hang, result
    assert result["binary"]["mtime"] is not None and seconds < 10, seconds
    assert _gone(pids), pids.read_text()

    tools = tmp_path / "tools"
    tools.mkdir()
    env = {"PATH": "%s:%s" % (tools, os.environ["PATH"])}
    for tool, args in (("dpkg-query", {"package": "nats-server"}), ("systemctl", {"service": "nats-server"})):
        script, pids = _hanging(tools, tool)
        result, seconds = _timed(module, "nats_server_state", dict(args, timeout=2), env=env)
        assert result.get("failed") and not result["changed"], result
        assert result["msg"].startswith(script + " ") and result["msg"].endswith(
            ": did not finish within 2s and was killed"), result["msg"]
        assert result["cmd"] == result["msg"].rsplit(": ", 1)[0], result
        assert seconds < 10, seconds
        assert _gone(pids), pids.read_text()


def test_monitor_url_and_urls_are_read_over_http_or_https_only(nats_binary, start_server, module, tmp_path):
    """monitor_url and urls: an http or https URL with a host; any other (a local file) is refused, naming the option
    and the value, and nothing is read - not even the status page beside it."""
    binary, _version = nats_binary
    port, http = free_port(), free_port()
    server = start_server(binary, 'listen: "127.0.0.1:%d"\nhttp: "127.0.0.1:%d"\n' % (port, http), "n1", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    local = tmp_path / "status"
    local.mkdir()
    (local / "varz").write_text('{"version": "from a file"}')
    page = "http://127.0.0.1:%d" % http
    for url, fragment in (("file://%s" % local, "only http:// and https:// URLs are read"),
                          ("127.0.0.1:%d" % http, "write it with its scheme, such as http://127.0.0.1:%d" % http),
                          ("http:///varz", "names no host")):
        refused = module("nats_server_state", {"monitor_url": url})
        assert refused.get("failed") and not refused["changed"] and "varz" not in refused, refused
        assert refused["msg"].startswith("monitor_url: %r " % url) and fragment in refused["msg"], refused
        refused = module("host_state", {"urls": [page + "/varz", url + "/varz"]})
        assert refused.get("failed") and "urls" not in refused, refused
        assert refused["msg"].startswith("urls: %r " % (url + "/varz")) and fragment in refused["msg"], refused
    read = module("nats_server_state", {"monitor_url": page.replace("http://", "HTTP://")})
    assert read["varz"]["port"] == port and read["varz_error"] == "", read


def test_a_tool_that_is_found_but_cannot_be_started_fails_the_task_naming_the_command(module, tmp_path):
    """nats_server_state and host_state: 'a dpkg-query, rpm or systemctl that is found but cannot be started fails
    the task, naming the command and why' (the package or the unit cannot be told)."""
    tools = tmp_path / "tools"
    tools.mkdir()
    for tool in ("dpkg-query", "systemctl"):
        (tools / tool).write_bytes(b"\x00\x01 not a program")
        (tools / tool).chmod(0o755)
    env = {"PATH": "%s:%s" % (tools, os.environ["PATH"])}
    for name, args, tool in (("nats_server_state", {"package": "nats-server"}, "dpkg-query"),
                             ("nats_server_state", {"service": "nats-server"}, "systemctl"),
                             ("host_state", {"packages": ["nats-server"]}, "dpkg-query"),
                             ("host_state", {"services": ["nats-server"]}, "systemctl")):
        result = module(name, args, env=env)
        assert result.get("failed") and not result["changed"], result
        assert result["msg"].startswith("%s/%s " % (tools, tool)), result["msg"]
        assert result["msg"].endswith(": %s/%s is not a program this host can run (Exec format error)" % (
            tools, tool)), result["msg"]
