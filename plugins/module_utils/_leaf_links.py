# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Leaf links read and reopened through the system account (LEAFZ and KICK), for nats_leaf_reconnect. Private to
the collection."""

from __future__ import annotations

import json
import time

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError


class ReconnectError(NatsEdgeError):
    """A leaf link that cannot be found, read or reopened."""


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


def _leafs(reply, where):
    if reply.get("error"):
        raise ReconnectError("LEAFZ of %s: %s" % (where, reply["error"].get("description", reply["error"])))
    return (reply.get("data") or {}).get("leafs") or []


def leaf_links(client, accounts, server_id=None, remote_name=None):
    """{account: [(server id, connection id), ...]}: the leaf connections bound to ``accounts`` on the
    server ``server_id``, or on every server those that come from the server called ``remote_name``."""
    if server_id:
        replies = [(server_id, client.request_json("$SYS.REQ.SERVER.%s.LEAFZ" % server_id, {}))]
    else:
        replies = []
        for raw in client.gather("$SYS.REQ.SERVER.PING.LEAFZ", b"{}", idle=0.5):
            try:
                reply = json.loads(raw.decode() or "{}")
            except ValueError:
                continue
            replies.append(((reply.get("server") or {}).get("id"), reply))
    links = dict((account, []) for account in accounts)
    for sid, reply in replies:
        for leaf in _leafs(reply, sid):
            if leaf.get("account") in links and (remote_name is None or leaf.get("name") == remote_name):
                if leaf.get("id") is None:
                    raise ReconnectError("the server holding the link does not name its leaf connections (nats-server "
                                         "2.12 or newer can reopen them one by one; restart older ones)")
                links[leaf["account"]].append((sid, leaf["id"]))
    return links


def reconnect(client, accounts, wait, server_id=None, remote_name=None):
    """Close the links of ``accounts`` and wait until each is back; (links, seconds)."""
    waiting = time.monotonic()
    while True:
        # a link that is down may be on its way back (its account was just pushed with new signing keys,
        # or its hub restarted): it connects again with the creds file as it is now, and is waited for
        before = leaf_links(client, accounts, server_id, remote_name)
        missing = sorted(account for account, ids in before.items() if not ids)
        if not missing:
            break
        if time.monotonic() - waiting > wait:
            raise ReconnectError("no leaf connection bound to %s came up within %ss: a link that stays down cannot "
                                 "be reopened, find why it is down first" % (", ".join(missing), wait))
        time.sleep(0.5)
    started = time.monotonic()
    for ids in before.values():
        for sid, cid in ids:
            reply = client.request_json("$SYS.REQ.SERVER.%s.KICK" % sid, {"cid": cid})
            if reply.get("error"):
                raise ReconnectError("KICK of leaf connection %s: %s" % (
                    cid, reply["error"].get("description", reply["error"])))
    while True:
        now = leaf_links(client, accounts, server_id, remote_name)
        down = sorted(a for a in accounts if len(now[a]) < len(before[a]) or set(now[a]) & set(before[a]))
        if not down:
            break
        if time.monotonic() - started > wait:
            raise ReconnectError("the leaf links of %s did not come back within %ss (wrong or unreadable creds "
                                 "file? the server's log names the reason)" % (", ".join(down), wait))
        time.sleep(0.2)
    links = [dict(account=a, before=sorted(cid for _sid, cid in before[a]), after=sorted(cid for _sid, cid in now[a]))
             for a in accounts]
    return links, round(time.monotonic() - started, 2)
