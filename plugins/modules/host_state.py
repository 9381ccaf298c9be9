#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_state
short_description: Read what a role compares on a host, in one call
description:
  - Reads, in one round trip, the packages, accounts, systemd units, files, directory listings and Python
    distributions a role looks at before it changes a host; the role compares them on the controller with what
    it wants and skips every task whose target is already as wanted. The Spark roles
    (C(nats_edge.fleet.spark_runtime), C(nats_edge.fleet.spark_cluster), C(nats_edge.fleet.spark_job)) run it
    once per host; M(nats_edge.fleet.nats_server_state) reads a nats-server host the same way.
  - Reads only; nothing on the host changes. A part that cannot be read (no such file, no package manager, no
    systemctl, no such Python) is reported as absent, not as a failure; so is a O(python) that is there but
    cannot be run (a directory, a file without execute permission, not a program), with the reason in RV(python).
  - A C(dpkg-query), C(rpm) or C(systemctl) that is found but cannot be started fails the task, naming the
    command and why, as the package or the unit cannot be told.
author:
  - nats_edge.fleet contributors (@nats_edge)
extends_documentation_fragment:
  - nats_edge.fleet.read_only
options:
  packages:
    description: Packages to look up with C(dpkg-query) or C(rpm).
    type: list
    elements: str
    default: []
  users:
    description: Accounts to look up.
    type: list
    elements: str
    default: []
  groups:
    description: Groups to look up.
    type: list
    elements: str
    default: []
  services:
    description:
      - systemd units to read with C(systemctl show); a name without a unit type (V(spark-master)) is a service.
    type: list
    elements: str
    default: []
  paths:
    description:
      - Files and directories to describe in RV(files). Regular files get a SHA-1 checksum, so list small
        files here and large ones under O(listings).
    type: list
    elements: path
    default: []
  listings:
    description:
      - Directories whose regular files are listed in RV(listings) by name and size, without reading them.
    type: list
    elements: path
    default: []
  python:
    description:
      - A Python interpreter (a virtualenv's C(bin/python)); RV(python) says whether it is there and which
        O(distributions) it has.
    type: path
  distributions:
    description: Distribution names to look up with O(python) through C(importlib.metadata); needs O(python).
    type: list
    elements: str
    default: []
  urls:
    description:
      - Status pages to read from the host (HTTP GET), each answering JSON, such as a Spark master's C(/json/);
        RV(urls) holds each answer, or why there was none (a service that does not answer is not an error).
      - Each an V(http) or V(https) URL with a host; any other (such as V(file:///...)) is refused before anything
        is read.
    type: list
    elements: str
    default: []
  timeout:
    description: Seconds to wait for each of O(urls) (above 0).
    type: float
    default: 5.0
notes:
  - A service's C(ActiveState) and C(UnitFileState) tell whether it runs and starts at boot; a unit systemd does not
    know has C(LoadState) V(not-found).
seealso:
  - module: nats_edge.fleet.nats_server_state
  - plugin: nats_edge.fleet.nats_server_stale_paths
    plugin_type: filter
"""

EXAMPLES = r"""
---
- name: Read the Spark host's state
  nats_edge.fleet.host_state:
    packages: [openjdk-17-jre-headless, python3-venv]
    users: [spark]
    groups: [spark]
    services: [spark-master, spark-worker]
    paths: [/opt/spark-runtime, /etc/default/spark-cluster]
    listings: [/opt/spark-runtime/wheelhouse]
    python: /opt/spark-runtime/venv/bin/python
    distributions: [pyspark]
  register: spark_state

- name: Name the packages still to install (an apt task would take this list)
  ansible.builtin.debug:
    msg: "{{ spark_state.packages | dict2items | rejectattr('value.installed') | map(attribute='key') | list }}"
"""

RETURN = r"""
packages:
  description:
    - Each package of O(packages) with C(installed) (V(true), V(false), or V(null) when the host has neither dpkg nor
      rpm), the installed C(version) (empty when not installed) and C(manager) (V(dpkg), V(rpm) or V(null)).
  returned: always
  type: dict
  sample: {"python3-venv": {"installed": true, "version": "3.11.2-1+b1", "manager": "dpkg"}}
users:
  description: Each account of O(users) with C(exists), and for an existing one C(uid), C(gid), primary C(group), C(home), C(shell).
  returned: always
  type: dict
  sample: {"spark": {"exists": true, "uid": 998, "gid": 998, "group": "spark", "home": "/opt/spark/home",
           "shell": "/usr/sbin/nologin"}}
groups:
  description: Each group of O(groups) with C(exists), and for an existing one its C(gid).
  returned: always
  type: dict
  sample: {"spark": {"exists": true, "gid": 998}}
services:
  description:
    - Each unit of O(services), by the name given, with C(LoadState), C(ActiveState), C(SubState), C(UnitFileState),
      C(MainPID) and C(NeedDaemonReload) as C(systemctl show) reports them; empty when systemctl is not there.
  returned: always
  type: dict
  sample: {"spark-master": {"LoadState": "loaded", "ActiveState": "active", "SubState": "running",
           "UnitFileState": "enabled", "MainPID": "812", "NeedDaemonReload": "no"}}
files:
  description:
    - By path, each of O(paths) with C(exists); an existing path also has its C(type) (V(file), V(directory),
      V(link), V(other)), C(owner) and C(group) (a numeric id where no name is known), C(mode) (four octal digits)
      and C(mtime) (seconds), and a regular file the SHA-1 C(checksum) of its content, as
      M(nats_edge.fleet.nats_server_state) describes its paths.
  returned: always
  type: dict
  sample: {"/etc/default/spark-cluster": {"exists": true, "type": "file", "owner": "root", "group": "root",
           "mode": "0644", "mtime": 1700000000.25, "checksum": "3f786850e387550fdab836ed7e6dc881de23001b"}}
listings:
  description: Each directory of O(listings) as its regular files' sizes in bytes by name, V(null) when it cannot be read.
  returned: always
  type: dict
  sample: {"/opt/spark-runtime/wheelhouse": {"pyspark-3.5.3-py2.py3-none-any.whl": 317293824}}
python:
  description:
    - C(exists) (the interpreter is there and runs), C(error) and C(distributions), each name of O(distributions)
      with its C(version) and C(location) (the directory it is installed in), or V(null) when it is not installed.
    - C(error) says why it could not report - what is at the path cannot be run (a directory, a file without
      execute permission, not a program; then C(exists) is V(false)), or it ran and failed - and is empty when it
      reported or when nothing is at the path.
  returned: when O(python) is given
  type: dict
  sample: {"exists": true, "error": "",
           "distributions": {"pyspark": {"version": "3.5.3", "location": "/opt/spark-runtime/venv/lib/python3.11/site-packages"}}}
urls:
  description:
    - Each of O(urls) with C(json), what it answered (V(null) when it did not answer JSON), and C(error), why not
      (empty when it did).
  returned: when O(urls) is given
  type: dict
  sample: {"http://10.0.0.5:8080/json/": {"json": {"status": "ALIVE", "aliveworkers": 3}, "error": ""}}
"""

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError, fail_from
from ansible_collections.nats_edge.fleet.plugins.module_utils._host_state import (
    HostReader, HostStateError, check_status_url, check_timeout, describe_path, list_directory, read_group,
    read_user)
from ansible_collections.nats_edge.fleet.plugins.module_utils._module import FleetModule

ARGUMENT_SPEC = dict(
    packages=dict(type="list", elements="str", default=[]),
    users=dict(type="list", elements="str", default=[]),
    groups=dict(type="list", elements="str", default=[]),
    services=dict(type="list", elements="str", default=[]),
    paths=dict(type="list", elements="path", default=[]),
    listings=dict(type="list", elements="path", default=[]),
    python=dict(type="path"),
    distributions=dict(type="list", elements="str", default=[]),
    urls=dict(type="list", elements="str", default=[]),
    timeout=dict(type="float", default=5.0),
)


def read(module, params):
    """Every reading asked for, the options checked first."""
    if params["distributions"] and not params["python"]:
        raise HostStateError("host_state: distributions %s need python, the interpreter to ask"
                             % ", ".join(params["distributions"]))
    check_timeout("timeout", params["timeout"])
    for url in params["urls"]:
        check_status_url("urls", url)
    host = HostReader(module)
    result = {
        "changed": False,
        "packages": dict((name, host.package(name)) for name in params["packages"]),
        "users": dict((name, read_user(name)) for name in params["users"]),
        "groups": dict((name, read_group(name)) for name in params["groups"]),
        "services": dict((name, host.service(name)) for name in params["services"]),
        "files": dict((path, describe_path(path)) for path in params["paths"]),
        "listings": dict((path, list_directory(path)) for path in params["listings"]),
    }
    if params["python"]:
        result["python"] = host.python(params["python"], params["distributions"])
    if params["urls"]:
        result["urls"] = {}
        for url in params["urls"]:
            body, error = host.json_url(url, params["timeout"])
            result["urls"][url] = {"json": body, "error": error}
    return result


def main():
    module = FleetModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    try:
        result = read(module, module.params)
    except NatsEdgeError as exc:
        fail_from(module, exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
