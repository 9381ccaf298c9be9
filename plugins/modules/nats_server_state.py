#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nats_server_state
short_description: Read a nats-server host's state in one call
description:
  - Reads, in one round trip, what the C(nats_edge.fleet.nats_server) role needs
    to know about a host before it changes anything; the role then skips every task whose
    target is already as wanted.
  - The installed binary (C(nats-server --version) and its modification time), the package
    that provides it (dpkg or rpm), the service account, the service's state (systemd or OpenRC), the
    owner, group, mode, modification time and SHA-1 checksum of files and directories, and
    the running server's C(/varz) from its monitoring port.
  - Reads only; nothing on the host changes. A part that cannot be read (no such file, no
    package manager, a server that does not answer) is reported as absent, not as a failure; so is a
    binary that cannot be run (a directory, a file without execute permission, not a program), with
    the reason in RV(binary).
  - Every command it runs (C(<binary> --version), C(dpkg-query) or C(rpm), C(systemctl show) or C(rc-service
    status)) is bounded by O(timeout); see there for what a command that does not finish in time gives. A
    C(dpkg-query), C(rpm), C(systemctl) or C(rc-service) that is found but cannot be started fails the task,
    naming the command and why.
  - With O(gather_subset), the same call also gathers the host's facts, as C(ansible.builtin.setup)
    does with that subset, so a play that needs both pays one round trip instead of two.
author:
  - nats_edge.fleet contributors (@nats_edge)
extends_documentation_fragment:
  - nats_edge.fleet.read_only
options:
  binary:
    description:
      - Path of the nats-server binary to run with C(--version); RV(binary) holds what it said.
    type: path
  package:
    description: Name of the package that provides the binary, looked up with C(dpkg-query) or C(rpm).
    type: str
  user:
    description: Name of the account the server runs as.
    type: str
  group:
    description: Name of the server's group.
    type: str
  service:
    description: Name of the service (the systemd unit without C(.service), or the OpenRC script in C(/etc/init.d)).
    type: str
  service_manager:
    description:
      - The init that runs O(service). V(auto) reads the host (systemd when it booted the host, OpenRC when
        C(rc-service) is there).
    type: str
    choices: [auto, systemd, openrc]
    default: auto
  paths:
    description:
      - Files and directories to describe in RV(files). Regular files get a SHA-1 checksum.
    type: list
    elements: path
    default: []
  listings:
    description:
      - Directories whose regular files to list in RV(listings) (names and sizes; nothing is read from them).
    type: list
    elements: path
    default: []
  monitor_url:
    description:
      - Base URL of the server's monitoring port, such as V(http://127.0.0.1:8222); its C(/varz) is read.
      - An V(http) or V(https) URL with a host; any other (such as V(file:///...)) is refused and nothing is read.
      - Left out, RV(varz) is not read.
    type: str
  monitor_ca:
    description:
      - The CA file an V(https) O(monitor_url) is verified against; without it, the system's CAs.
    type: path
  tls_probe:
    description:
      - A TLS listener of the server to read the certificate it serves from, in a TLS handshake, and the
        certificate file it should serve; both are reported in RV(tls) as SHA-256 fingerprints.
    type: dict
    suboptions:
      host:
        description: Address the listener is reached at on the host.
        type: str
        default: 127.0.0.1
      port:
        description: The listener's port (a client or leafnode port; NATS sends C(INFO) before TLS starts).
        type: int
        required: true
      cert_file:
        description: The certificate file the listener should serve (its first certificate is compared).
        type: path
  tls_check:
    description:
      - A certificate, its key and its CA to check as the server's peers check them, in a TLS handshake in
        memory (the Python standard library's C(ssl), nothing else is needed on the host); the result is
        RV(tls_check). Nothing is served and no file changes.
      - Each of the three is a file on the host (C(*_file)) or its content (C(*_content), such as a file on the
        controller that is still to be pushed).
    type: dict
    suboptions:
      cert_file:
        description: The certificate file on the host (with its chain, leaf first).
        type: path
      cert_content:
        description: The certificate, as PEM text.
        type: str
      key_file:
        description: The private key file on the host.
        type: path
      key_content:
        description: The private key, as PEM text (kept out of logs).
        type: str
      ca_file:
        description: The CA bundle file on the host; without a CA, the system's CAs.
        type: path
      ca_content:
        description: The CA bundle, as PEM text.
        type: str
      mutual:
        description:
          - Also check that a peer trusting the CA accepts the certificate as a client's, as routes and leaf
            remotes present it.
        type: bool
        default: false
  timeout:
    description:
      - Seconds to wait for the monitoring port, for the listener of O(tls_probe), and for each command the module
        runs (above 0).
      - A command still running then is killed, with every process it started. C(<binary> --version) is
        reported in RV(binary) (C(rc) V(124), C(stderr) naming the command); C(dpkg-query), C(rpm) or
        C(systemctl show) fails the task, the message naming the command, as the package or the unit cannot be
        told.
      - The facts of O(gather_subset) are gathered with the time limits of C(ansible.builtin.setup) (its
        C(gather_timeout), 10 seconds), not with this one.
    type: float
    default: 5
  gather_subset:
    description:
      - Gather these subsets of the host's facts too, with the collectors and the subset names of
        C(ansible.builtin.setup) (such as V(min), V(hardware), V(network), V(!virtual)), and return them
        as C(ansible_facts), which Ansible keeps as the host's facts.
      - Custom facts (C(facts.d)) are not read, so C(ansible_local) is empty.
      - Left out, no facts are gathered.
    type: list
    elements: str
notes:
  - The role calls it with every path it manages, and with O(gather_subset) when the play has not
    gathered facts; it is also useful alone, to see a host's state.
"""

EXAMPLES = r"""
---
- name: Read the host's nats-server state
  nats_edge.fleet.nats_server_state:
    binary: /usr/sbin/nats-server
    package: nats-server
    user: nats
    group: nats
    service: nats-server
    paths:
      - /etc/nats-server
      - /etc/nats-server/nats-server.conf
    monitor_url: http://127.0.0.1:8222
  register: nats_state

- name: The same, gathering the facts a config is derived from in the same round trip
  nats_edge.fleet.nats_server_state:
    binary: /usr/local/bin/nats-server
    service: nats-server
    gather_subset: [min, hardware, network]

- name: Show the version the server runs
  ansible.builtin.debug:
    msg: "{{ nats_state.varz.version | default('not running') }}"
"""

RETURN = r"""
binary:
  description:
    - The result of C(<binary> --version) (C(rc), C(stdout), C(stderr)) and the binary's modification time
      (C(mtime), seconds).
    - A binary that is not there or cannot be run is reported as absent, with C(mtime) V(null) and C(stderr)
      saying why - C(rc) V(127) when nothing is at the path, V(126) when what is there cannot be run (a
      directory, a file without execute permission, not a program).
    - One that does not finish within O(timeout) is killed and reported with C(rc) V(124), C(stderr) naming the
      command.
  returned: when O(binary) is given
  type: dict
  sample: {"rc": 0, "stdout": "nats-server: v2.9.10", "stderr": "", "mtime": 1700000000.5}
package:
  description:
    - C(installed) (V(true), V(false), or V(null) when the host has neither dpkg nor rpm), C(version) of the
      installed package (empty when it is not installed) and C(manager) (V(dpkg), V(rpm) or V(null)).
  returned: when O(package) is given
  type: dict
  sample: {"installed": true, "version": "2.9.10-1+b5", "manager": "dpkg"}
user:
  description: C(exists), and for an existing account its C(uid), C(gid), primary C(group), C(home) and C(shell).
  returned: when O(user) is given
  type: dict
  sample: {"exists": true, "uid": 999, "gid": 999, "group": "nats", "home": "/var/lib/nats", "shell": "/usr/sbin/nologin"}
group:
  description: C(exists), and for an existing group its C(gid).
  returned: when O(group) is given
  type: dict
  sample: {"exists": true, "gid": 999}
service:
  description:
    - The unit's C(LoadState), C(ActiveState), C(SubState), C(UnitFileState), C(MainPID) and C(NeedDaemonReload)
      as C(systemctl show) reports them, with C(Manager) (V(systemd) or V(openrc)) and C(Available) (the init's
      tools are on the host; without them nothing else is given).
    - Under OpenRC the same keys are read from C(rc-service <name> status) (V(active), V(inactive), V(failed) for a
      crashed service, V(activating), V(deactivating)), the script in C(/etc/init.d) (C(LoadState) V(loaded) or
      V(not-found)), the default runlevel (C(UnitFileState) V(enabled) or V(disabled)) and the child
      C(supervise-daemon) runs (C(MainPID)).
  returned: when O(service) is given
  type: dict
  sample: {"LoadState": "loaded", "ActiveState": "active", "SubState": "running", "UnitFileState": "enabled",
           "MainPID": "812", "Manager": "systemd", "Available": true}
files:
  description:
    - Each path of O(paths) with C(exists), and for an existing one C(type) (V(file), V(directory), V(link) or
      V(other)), C(owner), C(group) (names, or the numeric id when the name is unknown), C(mode) (octal, four
      digits), C(mtime) (seconds) and, for a regular file, its SHA-1 C(checksum).
  returned: always
  type: dict
  sample: {"/etc/nats-server/nats-server.conf": {"exists": true, "type": "file", "owner": "root", "group": "nats",
           "mode": "0640", "mtime": 1700000000.25, "checksum": "3f786850e387550fdab836ed7e6dc881de23001b"}}
listings:
  description:
    - Each directory of O(listings) with the regular files directly in it, by name, with their sizes in bytes;
      V(null) for a directory that is not there or cannot be read.
  returned: always
  type: dict
  sample: {"/etc/nats-server/creds": {"LEAF.creds": 1021}}
mtimes:
  description:
    - The modification time (seconds) of each existing path of O(paths) and of O(binary) (when it is not
      absent), by path; the role compares them with the time the running server started and last loaded its
      config.
  returned: always
  type: dict
  sample: {"/etc/nats-server/nats-server.conf": 1700000000.25, "/usr/sbin/nats-server": 1681032798.0}
varz:
  description: The server's C(/varz), or V(null) when it did not answer.
  returned: when O(monitor_url) is given
  type: dict
varz_error:
  description: Why C(/varz) could not be read, empty when it was.
  returned: when O(monitor_url) is given
  type: str
tls:
  description:
    - The SHA-256 of the certificate the listener of O(tls_probe) serves (C(served)) and of the first certificate
      in its C(cert_file) (C(file)), V(null) where it could not be read, and why not (C(error)).
    - The role reloads a server whose two differ, such as after a certificate renewed in place.
  returned: when O(tls_probe) is given
  type: dict
  sample: {"served": "5f1c...", "file": "5f1c...", "error": ""}
tls_check:
  description:
    - What O(tls_check) found. C(problems), a list of C(file) (V(cert), V(key) or V(ca)) and C(error) (such as a
      key that does not match the certificate, a chain that does not verify against the CA, a certificate a
      peer does not accept as a client's); the certificate's C(not_before) and C(not_after) (seconds since the
      epoch, V(null) when it could not be read), and its subject alternative names (C(sans), C(dns) and C(ip)).
    - The certificate's own dates are returned, not judged, so the caller compares them with its clock and its
      renewal margin.
  returned: when O(tls_check) is given
  type: dict
  sample: {"problems": [], "not_before": 1795727828, "not_after": 1827263828,
           "sans": {"dns": ["hub-1", "localhost"], "ip": ["10.0.0.11", "127.0.0.1"]}}
ansible_facts:
  description: The host's facts of O(gather_subset), named as C(ansible.builtin.setup) names them.
  returned: when O(gather_subset) is given
  type: dict
  sample: {"ansible_architecture": "x86_64", "ansible_memtotal_mb": 3916, "ansible_service_mgr": "systemd"}
"""

import os
import shutil
import tempfile

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError, fail_from
from ansible_collections.nats_edge.fleet.plugins.module_utils._host_state import (
    HostReader, check_certificate, check_status_url, check_timeout, describe_path, gather_facts, list_directory,
    read_group, read_user, tls_state)
from ansible_collections.nats_edge.fleet.plugins.module_utils._module import FleetModule

ARGUMENT_SPEC = dict(
    binary=dict(type="path"),
    package=dict(type="str"),
    user=dict(type="str"),
    group=dict(type="str"),
    service=dict(type="str"),
    service_manager=dict(type="str", choices=["auto", "systemd", "openrc"], default="auto"),
    paths=dict(type="list", elements="path", default=[]),
    listings=dict(type="list", elements="path", default=[]),
    monitor_url=dict(type="str"),
    monitor_ca=dict(type="path"),
    tls_probe=dict(type="dict", options=dict(
        host=dict(type="str", default="127.0.0.1"),
        port=dict(type="int", required=True),
        cert_file=dict(type="path"),
    )),
    tls_check=dict(type="dict", options=dict(
        cert_file=dict(type="path"),
        cert_content=dict(type="str"),
        key_file=dict(type="path", no_log=False),
        key_content=dict(type="str", no_log=True),
        ca_file=dict(type="path"),
        ca_content=dict(type="str"),
        mutual=dict(type="bool", default=False),
    ), mutually_exclusive=[("cert_file", "cert_content"), ("key_file", "key_content"), ("ca_file", "ca_content")],
        required_one_of=[("cert_file", "cert_content"), ("key_file", "key_content")]),
    timeout=dict(type="float", default=5),
    gather_subset=dict(type="list", elements="str"),
)


def tls_check(given):
    """check_certificate on the files named, the contents given written to a directory of the module's own first."""
    folder = tempfile.mkdtemp(prefix="nats-tls-check-")
    try:
        paths = {}
        for part in ("cert", "key", "ca"):
            paths[part] = given[part + "_file"]
            if given[part + "_content"] is not None:
                paths[part] = os.path.join(folder, part + ".pem")
                with os.fdopen(os.open(paths[part], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
                    handle.write(given[part + "_content"])
        found = check_certificate(paths["cert"], paths["key"], paths["ca"], mutual=given["mutual"])
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    # a content is named as what it is, not as the module's temporary file
    for problem in found["problems"]:
        for part in ("cert", "key", "ca"):
            if given[part + "_content"] is not None:
                problem["error"] = problem["error"].replace(paths[part], "the %s given" % part)
    return found


def read(module, params):
    """Every reading asked for, the options checked first."""
    check_timeout("timeout", params["timeout"])
    if params["monitor_url"]:
        check_status_url("monitor_url", params["monitor_url"])
    host = HostReader(module, timeout=params["timeout"])
    result = {"changed": False, "files": dict((path, describe_path(path)) for path in params["paths"])}
    result["listings"] = dict((path, list_directory(path)) for path in params["listings"])
    result["mtimes"] = dict((path, found["mtime"]) for path, found in result["files"].items() if found["exists"])
    if params["binary"]:
        result["binary"] = host.binary(params["binary"])
        if result["binary"]["mtime"] is not None:
            result["mtimes"][params["binary"]] = result["binary"]["mtime"]
    if params["package"]:
        result["package"] = host.package(params["package"])
    if params["user"]:
        result["user"] = read_user(params["user"])
    if params["group"]:
        result["group"] = read_group(params["group"])
    if params["service"]:
        result["service"] = host.init_service(params["service"], params["service_manager"])
    if params["monitor_url"]:
        result["varz"], result["varz_error"] = host.json_url(
            params["monitor_url"].rstrip("/") + "/varz", params["timeout"], ca_path=params["monitor_ca"])
    if params["tls_probe"]:
        probe = params["tls_probe"]
        result["tls"] = tls_state(probe["host"], probe["port"], probe["cert_file"], params["timeout"])
    if params["tls_check"]:
        result["tls_check"] = tls_check(params["tls_check"])
    if params["gather_subset"] is not None:
        result["ansible_facts"] = gather_facts(module, params["gather_subset"])
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
