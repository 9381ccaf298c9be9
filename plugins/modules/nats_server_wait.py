#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nats_server_wait
short_description: Wait on the host until its nats-server passes a gate
description:
  - Reads one monitoring endpoint of the nats-server on the host (C(/healthz), C(/varz), C(/routez), C(/leafz)
    or C(/jsz)) until what it answers passes a gate, or O(timeout) seconds have passed; then fails, naming the
    server and what kept it from passing.
  - The wait happens on the host in one module run. A task with C(until) and C(retries) runs the module again
    for every try, each run a round trip and a process on the controller; this module costs one, however long
    the server takes.
  - The gates are those of the C(nats_edge.fleet.nats_server_gate) filter, which the rollout also uses; and
    O(loaded_after), which waits for a reload.
  - An answer of 503 is read like a 200 (C(/healthz) answers 503 with its reason while JetStream is not current).
    A server that does not answer yet is tried again; only the last try's reason is reported.
author:
  - nats_edge.fleet contributors (@nats_edge)
extends_documentation_fragment:
  - nats_edge.fleet.read_only
attributes:
  # the read-only modules' attributes, but for check mode
  check_mode:
    support: partial
    description: Can run in check_mode and return changed status prediction without modifying target.
    details:
      - In check mode the options are checked and the task is skipped without a read. What it waits for (a start,
        a reload, a step of a rollout) follows a change that check mode does not make.
options:
  url:
    description:
      - The server's monitoring address, C(http://HOST:PORT) or C(https://HOST:PORT), as read on the host.
    type: str
    required: true
  ca_path:
    description:
      - The CA bundle on the host an https O(url) is verified against (the system's trust store when not given).
        Not read for an http O(url).
    type: path
  endpoint:
    description:
      - The endpoint to read. V(healthz) passes when the server reports itself healthy (JetStream's meta group,
        streams and consumers current); V(varz) when it runs O(version) and, with O(loaded_after), has loaded
        its config after that time; V(routez) with routes to O(peers) distinct servers; V(leafz) with
        O(leafnodes) leaf connections and every server of O(leafs) connected; V(jsz) with a meta leader and,
        where it leads, every replica current within O(max_lag).
    type: str
    required: true
    choices: [healthz, varz, routez, leafz, jsz]
  query:
    description: Appended to the endpoint's path, such as V(?accounts=true&streams=true) for V(jsz).
    type: str
    default: ""
  name:
    description: The server's name in messages (the O(url) when not given).
    type: str
  version:
    description: With V(varz), the version the server must run.
    type: str
  loaded_after:
    description:
      - With V(varz), seconds since the epoch; the server passes once its C(config_load_time) is later, that is
        once it has loaded its config again after a reload signal sent at that time.
    type: float
  peers:
    description: With V(routez), the number of distinct servers the routes must reach.
    type: int
  leafnodes:
    description: With V(leafz), the number of leaf connections the server must have.
    type: int
  leafs:
    description: With V(leafz), server names that must each be connected as a leaf node.
    type: list
    elements: str
  max_lag:
    description: With V(jsz), how many operations a current replica may lag.
    type: int
    default: 0
  timeout:
    description:
      - Seconds to keep trying; V(0) reads once. The task fails when the gate has not passed by then.
    type: float
    default: 60
  interval:
    description: Seconds between tries.
    type: float
    default: 1
notes:
  - Nothing on the host changes.
seealso:
  - module: nats_edge.fleet.nats_server_state
"""

EXAMPLES = r"""
---
- name: Wait until the server reports healthy
  nats_edge.fleet.nats_server_wait:
    url: https://127.0.0.1:8222
    ca_path: /etc/nats-server/tls/ca.pem
    endpoint: healthz
    timeout: 60

- name: Wait until the server has loaded its config again after the reload signal sent at reload_sent
  nats_edge.fleet.nats_server_wait:
    url: http://127.0.0.1:8222
    endpoint: varz
    loaded_after: "{{ reload_sent }}"
    timeout: 30

- name: Wait until every stream replica the server leads is current
  nats_edge.fleet.nats_server_wait:
    url: http://127.0.0.1:8222
    endpoint: jsz
    query: "?accounts=true&streams=true"
    name: hub-1
    timeout: 120
"""

RETURN = r"""
json:
  description: What the endpoint answered last, V(null) when the server did not answer.
  returned: unless skipped in check mode
  type: dict
  sample: {"status": "ok"}
problems:
  description: What kept the server from passing at the last try; empty when it passed.
  returned: unless skipped in check mode
  type: list
  elements: str
  sample: ["hub-1: not healthy (JetStream is not current with the meta leader)"]
attempts:
  description: How many times the endpoint was read.
  returned: unless skipped in check mode
  type: int
  sample: 3
waited:
  description: Seconds from the first try to the last.
  returned: unless skipped in check mode
  type: float
  sample: 2.013
"""

import math
import os

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError, fail_from
from ansible_collections.nats_edge.fleet.plugins.module_utils._host_state import HostStateError, check_status_url
from ansible_collections.nats_edge.fleet.plugins.module_utils._module import FleetModule
from ansible_collections.nats_edge.fleet.plugins.module_utils._server_gates import (
    gate_problems, loaded_problems, wait_for_gate)

ARGUMENT_SPEC = dict(
    url=dict(type="str", required=True),
    ca_path=dict(type="path"),
    endpoint=dict(type="str", required=True, choices=["healthz", "varz", "routez", "leafz", "jsz"]),
    query=dict(type="str", default=""),
    name=dict(type="str"),
    version=dict(type="str"),
    loaded_after=dict(type="float"),
    peers=dict(type="int"),
    leafnodes=dict(type="int"),
    leafs=dict(type="list", elements="str"),
    max_lag=dict(type="int", default=0),
    timeout=dict(type="float", default=60),
    interval=dict(type="float", default=1),
)


def judge(params):
    """The gate as a function of one answer: its problems, [] when it passes."""
    name = params["name"] or params["url"]

    def problems(data):
        found = gate_problems(name, params["endpoint"], data, peers=params["peers"], leafnodes=params["leafnodes"],
                              max_lag=params["max_lag"], version=params["version"], leafs=params["leafs"])
        if params["loaded_after"] is not None:
            found += loaded_problems(name, data, params["loaded_after"])
        return found
    return problems


def check(params, https):
    check_status_url("url", params["url"])
    for option in ("timeout", "interval"):
        if not (params[option] >= 0 and math.isfinite(params[option])):
            raise HostStateError("%s: %g: use a number of seconds, 0 or more" % (option, params[option]))
    if params["ca_path"] and https and not os.path.isfile(params["ca_path"]):
        raise HostStateError("ca_path: %s: no such file on the host" % params["ca_path"])
    if params["loaded_after"] is not None and params["endpoint"] != "varz":
        raise HostStateError("loaded_after: the config load time is read from varz, not %s" % params["endpoint"])


def main():
    module = FleetModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    https = params["url"].lower().startswith("https://")
    try:
        check(params, https)
    except NatsEdgeError as exc:
        fail_from(module, exc)
    if module.check_mode:
        module.exit_json(changed=False, skipped=True,
                         msg="check mode: nothing was changed that %s would wait for" % (params["name"] or params["url"]))
    url = params["url"].rstrip("/") + "/" + params["endpoint"] + params["query"]
    result = wait_for_gate(judge(params), url, params["timeout"], interval=params["interval"] or 0.1,
                           ca_path=params["ca_path"] if https else None)
    if result["problems"]:
        module.fail_json(msg="%s did not pass within %gs (%d tries of %s): %s" % (
            params["name"] or params["url"], params["timeout"], result["attempts"], url,
            "; ".join(result["problems"])), changed=False, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
