#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nats_leaf_reconnect
short_description: Make a nats-server open its leaf node connections again, without a restart
description:
  - Closes the leaf node connections of one server that are bound to the given accounts (the system request
    C($SYS.REQ.SERVER.<id>.KICK)), then waits until each of them is back with a new connection id.
  - A server reads a leaf remote's credentials file each time it connects, so this is how it starts using a
    creds file that was replaced - a config reload does not reconnect leaf links, and a restart drops every
    client and stops JetStream for a while. Each link is down for about the remote's reconnect delay (1s).
  - Needs nats-server 2.12 or newer on the server that closes the links (leaf connection ids in C(LEAFZ), kicks
    that reach leaf connections) - the server itself (O(server_name)), or the servers at the other end
    (O(remote_name)) - and system account credentials.
author:
  - nats_edge.fleet contributors (@nats_edge)
extends_documentation_fragment:
  - nats_edge.fleet.connection
attributes:
  check_mode:
    support: full
    description:
      - Runs the checks of a real run (the server's version, O(accounts), O(remote_name)) and waits as it does for
        a link that is down, then reports the links it would close; closes nothing. What a real run would refuse,
        check mode refuses with the same message.
  diff_mode:
    support: none
    description: No diff; RV(links) names each link before and after.
  idempotent:
    support: none
    description: Every run closes and reopens the links it names; run it when their credentials changed.
options:
  server_name:
    description:
      - Name of the server whose leaf connections to reopen (its C(server_name)), looked up with
        C($SYS.REQ.SERVER.PING.LEAFZ), so the connection may go to any server that shares its system account.
      - The links are closed on that server, which must be 2.12 or newer.
      - One of O(server_name) and O(remote_name) is required.
    type: str
  remote_name:
    description:
      - Instead of O(server_name) - the name of the server at the other end of the links, whose leaf connections
        every server (through C($SYS.REQ.SERVER.PING.LEAFZ)) closes from its side - for a server older than 2.12
        that connects to a hub of 2.12 or newer.
      - A name that no server has a leaf connection from, and that no server answers to through the system
        account, is refused at once, with the names of the servers the leaf connections come from.
    type: str
  accounts:
    description:
      - Accounts whose leaf connections to reopen, as the server names them - in operator mode their public keys
        (V(A...), such as an M(nats_edge.fleet.nsc_account) result's C(account_id)), not their names; a server
        whose accounts are in its config names them by name.
      - A value that cannot be such an account (an account's name, or another kind of key, where the server names
        accounts by public key; a name the server does not have, where it names them by name) is refused at
        once, saying what is expected (with the public key of an account of that name, when the server knows
        one).
      - Every account listed must have at least one leaf connection on the server. A link that is down is
        waited for (up to O(wait)), as it may be reconnecting, for example after a push that replaced its
        account's signing keys.
    type: list
    elements: str
    required: true
  wait:
    description:
      - Seconds (0 or more) to wait for a link that is down to come up, and again for every closed link to come
        back.
    type: int
    default: 60
notes:
  - O(creds) must be a user of the system account.
seealso:
  - module: nats_edge.fleet.nsc_user
"""

EXAMPLES = r"""
---
- name: Reopen the edge server's links of account APP, after its creds file was replaced
  nats_edge.fleet.nats_leaf_reconnect:
    servers: ["nats://edge-1:4222"]
    creds: /home/ops/.nats-fleet/OP/creds/SYS/sys.creds
    server_name: edge-1
    accounts: [ACW4MCIOG6WULUFONE5D5Z455CT2LVUJEAOL53NNOR2ONNDOJWPZRIPX]
  delegate_to: localhost

- name: The same for an edge server older than 2.12, closed from the hub's side
  nats_edge.fleet.nats_leaf_reconnect:
    servers: ["nats://hub-1:4222"]
    creds: /home/ops/.nats-fleet/OP/creds/SYS/sys.creds
    remote_name: edge-2
    accounts: [ACW4MCIOG6WULUFONE5D5Z455CT2LVUJEAOL53NNOR2ONNDOJWPZRIPX]
  delegate_to: localhost
"""

RETURN = r"""
server_id:
  description: Id of the server whose links were reopened (empty with O(remote_name)).
  returned: success
  type: str
version:
  description: Version of that server (empty with O(remote_name)).
  returned: success
  type: str
links:
  description: Per account, the leaf connection ids before and after (after is empty in check mode).
  returned: success
  type: list
  elements: dict
  contains:
    account:
      description: The account.
      type: str
    before:
      description: Connection ids that were closed.
      type: list
      elements: int
    after:
      description: Connection ids of the links that came back.
      type: list
      elements: int
seconds:
  description: How long the links took to come back once closed (not counting the wait for a link that was down).
  returned: success
  type: float
"""

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError, fail_from
from ansible_collections.nats_edge.fleet.plugins.module_utils._leaf_links import (
    ReconnectError, check_wait, find_server, links_to_reopen, reopen)
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import NatsClient, nats_module, require_nats_py

ARGUMENT_SPEC = dict(
    server_name=dict(type="str"),
    remote_name=dict(type="str"),
    accounts=dict(type="list", elements="str", required=True),
    wait=dict(type="int", default=60),
)


def main():
    module = nats_module(ARGUMENT_SPEC, jetstream=False, supports_check_mode=True,
                         mutually_exclusive=[["server_name", "remote_name"]],
                         required_one_of=[["server_name", "remote_name"]])
    p = module.params
    try:
        require_nats_py(p)
        check_wait(p["wait"])
    except NatsEdgeError as exc:
        fail_from(module, exc)
    accounts = sorted(set(p["accounts"]))
    where = p["server_name"] or "the hub side of %s" % p["remote_name"]
    if not accounts:
        module.exit_json(changed=False, links=[], seconds=0.0, server_id="", version="")
    server_id, version = "", ""
    try:
        with NatsClient(p) as client:
            if p["server_name"]:
                server_id, version = find_server(client, p["server_name"])
            # the same checks and the same wait in check mode: it predicts what the run does
            before = links_to_reopen(client, accounts, p["wait"], server_id, p["remote_name"], version)
            if module.check_mode:
                links = [dict(account=a, before=sorted(cid for _sid, cid in before[a]), after=[]) for a in accounts]
                seconds = 0.0
            else:
                links, seconds = reopen(client, accounts, before, p["wait"], server_id, p["remote_name"])
    except NatsEdgeError as exc:
        fail_from(module, ReconnectError("leaf links of %s: %s" % (where, exc), **exc.result))
    module.exit_json(changed=True, server_id=server_id, version=version, links=links, seconds=seconds)


if __name__ == "__main__":
    main()
