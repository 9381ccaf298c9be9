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
  - Needs nats-server 2.12 or newer on the server whose links are reconnected (leaf connection ids in
    C(LEAFZ), kicks that reach leaf connections), and system account credentials.
author:
  - nats_edge.fleet contributors (@nats_edge)
extends_documentation_fragment:
  - nats_edge.fleet.connection
attributes:
  check_mode:
    support: full
    description: Reads the server's leaf connections and reports those it would close; closes nothing.
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
    type: str
    required: true
  accounts:
    description:
      - Accounts (public keys, as the server names them) whose leaf connections to reopen.
      - Every account listed must have at least one leaf connection on the server.
    type: list
    elements: str
    required: true
  wait:
    description: Seconds to wait for every closed link to come back.
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
"""

RETURN = r"""
server_id:
  description: Id of the server whose links were reopened.
  returned: success
  type: str
version:
  description: Version of that server.
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
  description: How long the links took to come back.
  returned: success
  type: float
"""

import json
import time

from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import (
    NatsClient, NatsClientError, nats_module, require_nats_py)

ARGUMENT_SPEC = dict(
    server_name=dict(type="str", required=True),
    accounts=dict(type="list", elements="str", required=True),
    wait=dict(type="int", default=60),
)


class ReconnectError(Exception):
    pass


def find_server(client, name):
    """(server id, version) of the server called ``name``."""
    body = json.dumps({"server_name": name, "exact_match": True}).encode()
    for raw in client.gather("$SYS.REQ.SERVER.PING.LEAFZ", body, idle=0.5):
        try:
            reply = json.loads(raw.decode() or "{}")
        except ValueError:
            continue
        server = reply.get("server") or {}
        if server.get("name") == name and not reply.get("error"):
            return server["id"], server.get("ver", "")
    raise ReconnectError("no server called %r answered on $SYS.REQ.SERVER.PING.LEAFZ (are the creds those of a "
                         "system account user, and does that server share its system account?)" % name)


def leaf_links(client, server_id, accounts):
    """{account: [connection id, ...]} of the server's leaf connections bound to ``accounts``."""
    reply = client.request_json("$SYS.REQ.SERVER.%s.LEAFZ" % server_id, {})
    if reply.get("error"):
        raise ReconnectError("LEAFZ: %s" % reply["error"].get("description", reply["error"]))
    links = dict((account, []) for account in accounts)
    for leaf in (reply.get("data") or {}).get("leafs") or []:
        if leaf.get("account") in links:
            if leaf.get("id") is None:
                raise ReconnectError("the server does not name its leaf connections (nats-server 2.12 or newer "
                                     "can reopen them one by one; restart older ones)")
            links[leaf["account"]].append(leaf["id"])
    return links


def reconnect(client, server_id, accounts, wait):
    """Close the links of ``accounts`` and wait until each is back; (links, seconds)."""
    before = leaf_links(client, server_id, accounts)
    missing = sorted(account for account, ids in before.items() if not ids)
    if missing:
        raise ReconnectError("no leaf connection bound to %s: a link that is down cannot be reopened, find why "
                             "it is down first" % ", ".join(missing))
    started = time.monotonic()
    for ids in before.values():
        for cid in ids:
            reply = client.request_json("$SYS.REQ.SERVER.%s.KICK" % server_id, {"cid": cid})
            if reply.get("error"):
                raise ReconnectError("KICK of leaf connection %s: %s" % (
                    cid, reply["error"].get("description", reply["error"])))
    while True:
        now = leaf_links(client, server_id, accounts)
        back = all(len(now[a]) >= len(before[a]) and not set(now[a]) & set(before[a]) for a in accounts)
        if back:
            break
        if time.monotonic() - started > wait:
            down = sorted(a for a in accounts if len(now[a]) < len(before[a]) or set(now[a]) & set(before[a]))
            raise ReconnectError("the leaf links of %s did not come back within %ss (wrong or unreadable creds "
                                 "file? the server's log names the reason)" % (", ".join(down), wait))
        time.sleep(0.2)
    links = [dict(account=a, before=sorted(before[a]), after=sorted(now[a])) for a in accounts]
    return links, round(time.monotonic() - started, 2)


def main():
    module = nats_module(ARGUMENT_SPEC, jetstream=False, supports_check_mode=True)
    require_nats_py(module)
    p = module.params
    accounts = sorted(set(p["accounts"]))
    if not accounts:
        module.exit_json(changed=False, links=[], seconds=0.0, server_id="", version="")
    try:
        with NatsClient(p) as client:
            server_id, version = find_server(client, p["server_name"])
            if module.check_mode:
                before = leaf_links(client, server_id, accounts)
                module.exit_json(changed=True, server_id=server_id, version=version, seconds=0.0,
                                 links=[dict(account=a, before=sorted(before[a]), after=[]) for a in accounts])
            links, seconds = reconnect(client, server_id, accounts, p["wait"])
    except (NatsClientError, ReconnectError) as exc:
        module.fail_json(msg="leaf links of %s: %s" % (p["server_name"], exc))
    module.exit_json(changed=True, server_id=server_id, version=version, links=links, seconds=seconds)


if __name__ == "__main__":
    main()
