"""The nats_server role reads its server's monitoring port over https, verified against the CA, when
nats_server_http_tls asks for https, and over plain http on loopback otherwise."""

import glob
import json
import os
import subprocess
import sys

import pytest
import yaml

from role_files import load, walk_tasks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLE = os.path.join(ROOT, "roles", "nats_server")


def _load(path):
    return load("nats_server", path)


WAIT = "nats_edge.fleet.nats_server_wait"


def reading(task):
    """The arguments of a task that reads a monitoring endpoint (ansible.builtin.uri, or nats_server_wait, which
    waits on the host until a gate passes), else None."""
    return isinstance(task, dict) and (task.get("ansible.builtin.uri") or task.get("uri") or task.get(WAIT)) or None


def endpoint(args):
    return args.get("endpoint") or str(args["url"]).rsplit("/", 1)[-1]


def monitor_reads():
    """(file, task name, arguments) of every task of the role that reads the monitoring port."""
    found = []
    for path in sorted(glob.glob(os.path.join(ROLE, "tasks", "**", "*.yml"), recursive=True)):
        for task in walk_tasks(_load(path)):
            args = reading(task)
            if args and "_nats_server_monitor_url" in str(args.get("url")):
                found.append((os.path.relpath(path, ROLE), task.get("name"), args))
    return found


def test_the_role_reads_healthz_and_varz():
    reads = monitor_reads()
    assert sorted(endpoint(args) for _path, _name, args in reads) == ["healthz", "varz", "varz"]
    # the waits (for health after a start, for the config after a reload) wait on the host, in one module run
    assert sorted(name for _path, name, args in reads if "endpoint" in args) == [
        "Wait for /healthz", "Wait for a newer config load time"]


@pytest.mark.parametrize("path,name,uri", monitor_reads(), ids=lambda value: value if isinstance(value, str) else "")
def test_every_read_of_the_monitoring_port_verifies_the_server_against_the_ca(path, name, uri):
    # (nats_server_wait always verifies an https server, against ca_path when it is given)
    assert uri.get("validate_certs", "endpoint" in uri) is True, (path, name)
    assert uri.get("ca_path") == "{{ _nats_server_monitor_ca or omit }}", (path, name)


def _render(cases):
    """Each case (role, names, variables) templated in a play of its own, with the role's defaults and vars and
    ``variables`` as play vars (on the host edge-1) and the collection's filters at hand: [the names' values] per case."""
    plays, out = [], []
    for i, (role, names, over) in enumerate(cases):
        variables = {}
        for part in ("defaults", "vars"):
            with open(os.path.join(ROOT, "roles", role, part, "main.yml")) as handle:
                variables.update(yaml.safe_load(handle) or {})
        variables.update(over)
        out.append(os.path.join(_render.tmp, "case-%d.json" % i))
        plays.append({"hosts": "edge-1", "gather_facts": False, "vars": variables, "tasks": [
            {"ansible.builtin.copy": {"content": "{{ [%s] | to_json }}" % ", ".join(names), "dest": out[-1],
                                      "mode": "0600"}}]})
    path = os.path.join(_render.tmp, "cases.yml")
    with open(path, "w") as handle:
        yaml.safe_dump(plays, handle)
    ansible_playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    proc = subprocess.run([ansible_playbook, "-i", "edge-1,", "-c", "local",
                           "-e", "ansible_python_interpreter=" + sys.executable, path],
                          capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = []
    for name in out:
        with open(name) as handle:
            results.append(json.load(handle))
    return results


URL_CASES = [
    ({}, "http://127.0.0.1:8222", ""),
    ({"nats_server_tls_ca_file": "/etc/ssl/fleet.pem"}, "http://127.0.0.1:8222", ""),
    ({"nats_server_http_tls": True, "nats_server_tls_ca_file": "/etc/ssl/fleet.pem"}, "https://127.0.0.1:8222",
     "/etc/ssl/fleet.pem"),
    ({"nats_server_http_tls": True, "nats_server_tls_ca_src": "files/ca.pem", "nats_server_http_host": "0.0.0.0",
      "nats_server_http_port": 8443}, "https://127.0.0.1:8443", "/etc/nats-server/tls/ca.pem"),
    ({"nats_server_http_tls": True, "nats_server_http_host": "10.0.0.5"}, "https://10.0.0.5:8222", ""),
]
SANS_CASES = [
    ({}, ["DNS:edge-1", "IP:10.0.0.7"]),
    ({"nats_server_http_tls": True}, ["DNS:edge-1", "IP:10.0.0.7", "IP:127.0.0.1"]),
    ({"nats_server_http_tls": True, "nats_server_http_host": "::"}, ["DNS:edge-1", "IP:10.0.0.7", "IP:127.0.0.1"]),
    ({"nats_server_http_tls": True, "nats_server_http_host": "10.0.0.7"}, ["DNS:edge-1", "IP:10.0.0.7"]),
]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """The role's monitoring URL and CA for each of URL_CASES, the fleet's SANs for each of SANS_CASES, in one
    ansible-playbook run."""
    _render.tmp = str(tmp_path_factory.mktemp("render"))
    cases = [("nats_server", ["_nats_server_monitor_url", "_nats_server_monitor_ca"], over)
             for over, _url, _ca in URL_CASES]
    cases += [("nats_fleet", ["_nats_fleet_sans"], dict(over, nats_server_advertise_host="10.0.0.7"))
              for over, _sans in SANS_CASES]
    results = _render(cases)
    return results[:len(URL_CASES)], [result[0] for result in results[len(URL_CASES):]]


@pytest.mark.parametrize("index", range(len(URL_CASES)))
def test_the_monitoring_url_and_the_ca_it_is_verified_with(rendered, index):
    _over, url, ca = URL_CASES[index]
    assert [str(value).strip() for value in rendered[0][index]] == [url, ca]


def test_the_fleet_certifies_the_monitoring_address_of_a_host_that_serves_https(rendered):
    assert [sorted(sans) for sans in rendered[1]] == [sorted(sans) for _over, sans in SANS_CASES]


# --------------------------------------------------------------------------
# every read of the monitoring port, in the roles and the playbooks, goes through nats_server_monitor


def every_monitor_read():
    """(file, task name, uri arguments) of each task of the collection that reads a monitoring endpoint."""
    found = []
    paths = glob.glob(os.path.join(ROOT, "roles", "*", "tasks", "**", "*.yml"), recursive=True)
    paths += glob.glob(os.path.join(ROOT, "playbooks", "**", "*.yml"), recursive=True)
    for path in sorted(paths):
        with open(path) as handle:
            data = yaml.safe_load(handle) or []
        plays = data if isinstance(data, list) else []
        tasks = []
        for item in plays:
            if isinstance(item, dict) and ("hosts" in item or "import_playbook" in item):
                for section in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                    tasks.extend(item.get(section) or [])
            else:
                tasks.append(item)
        for task in walk_tasks(tasks):
            uri = reading(task)
            url = str(uri.get("url")) if uri else ""
            # (the monitoring stage's own reads of Prometheus are not of a server's monitoring port)
            port_url = url.replace("nats_monitoring_", "")
            if uri and ("monitor" in port_url or "http_port" in port_url or "127.0.0.1" in port_url):
                found.append((os.path.relpath(path, ROOT), task.get("name"), uri))
    return found


def test_the_rollout_the_report_and_the_push_read_the_monitoring_port():
    files = set(path for path, _name, _uri in every_monitor_read())
    for path in ("playbooks/report.yml", "playbooks/rollout.yml", "roles/nats_fleet/tasks/rollout_gate.yml",
                 "roles/nats_fleet/tasks/rollout_leafs.yml", "roles/nats_fleet/tasks/rollout_node.yml",
                 "roles/nats_fleet/tasks/push.yml", "roles/nats_server/tasks/health.yml"):
        assert path in files


@pytest.mark.parametrize("path,name,uri", every_monitor_read(), ids=lambda value: value if isinstance(value, str) else "")
def test_each_read_takes_the_url_and_the_ca_from_the_one_filter(path, name, uri):
    """A read at a URL of its own would speak plain http to a server that serves https, or ignore
    nats_server_http_host: each takes both from nats_server_monitor (in the role: _nats_server_monitor)."""
    url, ca = str(uri.get("url")), str(uri.get("ca_path"))
    assert "http://" not in url and "https://" not in url, (path, name, url)
    assert any(source in url for source in ("nats_server_monitor", "_nats_fleet_monitor")), (path, name, url)
    assert any(source in ca for source in ("nats_server_monitor", "_nats_fleet_monitor")) and "omit" in ca, (
        path, name, ca)
    assert uri.get("validate_certs", True) is True, (path, name)


def test_the_filter_takes_the_role_defaults_for_what_a_host_does_not_set():
    from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _server_config as sc

    defaults = _load("defaults/main.yml")
    assert {key: defaults[key] for key in sc.MONITOR_DEFAULTS} == sc.MONITOR_DEFAULTS


@pytest.mark.parametrize("host,expected", [
    ({}, {"url": "http://127.0.0.1:8222", "ca": ""}),
    ({"nats_server_http_port": "8223", "nats_server_http_tls": "false", "nats_server_tls_ca_src": "ca.pem"},
     {"url": "http://127.0.0.1:8223", "ca": ""}),
    ({"nats_server_http_tls": "yes", "nats_server_tls_ca_src": "ca.pem", "nats_server_config_dir": "/opt/nats/"},
     {"url": "https://127.0.0.1:8222", "ca": "/opt/nats/tls/ca.pem"}),
    ({"nats_server_http_tls": True, "nats_server_tls_ca_file": "/etc/ssl/f.pem", "nats_server_tls_ca_src": "x"},
     {"url": "https://127.0.0.1:8222", "ca": "/etc/ssl/f.pem"}),
    ({"nats_server_http_host": "fd00::5", "nats_server_http_tls": True},
     {"url": "https://[fd00::5]:8222", "ca": ""}),
    ({"nats_server_http_host": "::"}, {"url": "http://127.0.0.1:8222", "ca": ""}),
    ({"nats_server_http_host": "10.1.2.3", "nats_server_http_port": None}, {"url": "http://10.1.2.3:8222", "ca": ""}),
])
def test_the_monitoring_endpoint_of_a_host(host, expected):
    from ansible_collections.nats_edge.fleet.plugins.filter.nats_server import nats_server_monitor

    assert nats_server_monitor(host) == expected


@pytest.mark.parametrize("host,field", [
    ({"nats_server_http_tls": "sometimes"}, "nats_server_http_tls"),
    ({"nats_server_http_port": "eighty"}, "nats_server_http_port"),
])
def test_a_wrong_monitoring_variable_is_named(host, field):
    from ansible.errors import AnsibleFilterError
    from ansible_collections.nats_edge.fleet.plugins.filter.nats_server import nats_server_monitor

    with pytest.raises(AnsibleFilterError, match=field):
        nats_server_monitor(host)
