"""The nats_server role reads its server's monitoring port over https, verified against the CA, when
nats_server_http_tls asks for https, and over plain http on loopback otherwise."""

import glob
import os

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLE = os.path.join(ROOT, "roles", "nats_server")


def _load(path):
    with open(os.path.join(ROLE, path)) as handle:
        return yaml.safe_load(handle)


def _tasks(tasks):
    for task in tasks or []:
        yield task
        for nested in ("block", "rescue", "always"):
            yield from _tasks(task.get(nested))


def monitor_reads():
    """(file, task name, uri arguments) of every task of the role that reads the monitoring port."""
    found = []
    for path in sorted(glob.glob(os.path.join(ROLE, "tasks", "**", "*.yml"), recursive=True)):
        for task in _tasks(_load(path)):
            uri = task.get("ansible.builtin.uri") or task.get("uri")
            if uri and "_nats_server_monitor_url" in str(uri.get("url")):
                found.append((os.path.relpath(path, ROLE), task.get("name"), uri))
    return found


def test_the_role_reads_healthz_and_varz():
    reads = monitor_reads()
    assert sorted(uri["url"].rsplit("/", 1)[-1] for _path, _name, uri in reads) == ["healthz", "varz", "varz"]


@pytest.mark.parametrize("path,name,uri", monitor_reads(), ids=lambda value: value if isinstance(value, str) else "")
def test_every_read_of_the_monitoring_port_verifies_the_server_against_the_ca(path, name, uri):
    assert uri.get("validate_certs") is True, (path, name)
    assert uri.get("ca_path") == "{{ _nats_server_monitor_ca or omit }}", (path, name)


def _trusted(value):
    """``value`` with its strings as templates the templar renders (ansible-core 2.19 renders only templates from
    trusted sources, as the role's own files are)."""
    try:
        from ansible.template import trust_as_template
    except ImportError:
        return value
    if isinstance(value, dict):
        return dict((key, _trusted(item)) for key, item in value.items())
    if isinstance(value, list):
        return [_trusted(item) for item in value]
    return trust_as_template(value) if isinstance(value, str) else value


def resolve(names, **over):
    """The role's internal variables ``names``, templated from its defaults and vars with ``over`` set."""
    variables = dict(_trusted(_load("defaults/main.yml")))
    variables.update(_trusted(_load("vars/main.yml")))
    variables.update(over)
    templar = Templar(loader=DataLoader(), variables=variables)
    return [str(templar.template(_trusted("{{ %s }}" % name))).strip() for name in names]


@pytest.mark.parametrize("over,url,ca", [
    ({}, "http://127.0.0.1:8222", ""),
    ({"nats_server_tls_ca_file": "/etc/ssl/fleet.pem"}, "http://127.0.0.1:8222", ""),
    ({"nats_server_http_tls": True, "nats_server_tls_ca_file": "/etc/ssl/fleet.pem"}, "https://127.0.0.1:8222",
     "/etc/ssl/fleet.pem"),
    ({"nats_server_http_tls": True, "nats_server_tls_ca_src": "files/ca.pem", "nats_server_http_host": "0.0.0.0",
      "nats_server_http_port": 8443}, "https://127.0.0.1:8443", "/etc/nats-server/tls/ca.pem"),
    ({"nats_server_http_tls": True, "nats_server_http_host": "10.0.0.5"}, "https://10.0.0.5:8222", ""),
])
def test_the_monitoring_url_and_the_ca_it_is_verified_with(over, url, ca):
    assert resolve(["_nats_server_monitor_url", "_nats_server_monitor_ca"], **over) == [url, ca]


def fleet_sans(**over):
    """The names the fleet CA issues a host's certificate for (the nats_fleet role's _nats_fleet_sans)."""
    fleet = os.path.join(ROOT, "roles", "nats_fleet")
    with open(os.path.join(fleet, "defaults", "main.yml")) as handle:
        variables = dict(_trusted(yaml.safe_load(handle)))
    with open(os.path.join(fleet, "vars", "main.yml")) as handle:
        variables.update(_trusted(yaml.safe_load(handle)))
    variables.update(inventory_hostname="edge-1", nats_server_advertise_host="10.0.0.7", **over)
    return list(Templar(loader=DataLoader(), variables=variables).template(_trusted("{{ _nats_fleet_sans }}")))


def test_the_fleet_certifies_the_monitoring_address_of_a_host_that_serves_https():
    assert sorted(fleet_sans()) == ["DNS:edge-1", "IP:10.0.0.7"]
    assert sorted(fleet_sans(nats_server_http_tls=True)) == ["DNS:edge-1", "IP:10.0.0.7", "IP:127.0.0.1"]
    assert sorted(fleet_sans(nats_server_http_tls=True, nats_server_http_host="::")) == [
        "DNS:edge-1", "IP:10.0.0.7", "IP:127.0.0.1"]
    assert sorted(fleet_sans(nats_server_http_tls=True, nats_server_http_host="10.0.0.7")) == [
        "DNS:edge-1", "IP:10.0.0.7"]
