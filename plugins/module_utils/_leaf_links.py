# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Leaf links read and reopened through the system account (LEAFZ, ACCOUNTZ and KICK), for nats_leaf_reconnect.
Private to the collection.

The run has two halves: ``links_to_reopen`` checks what it was given against what the servers say (their version,
the accounts, the remote) and waits for a link that is down, then returns the links to close; ``reopen`` closes
them and waits until each is back. Check mode runs the first half only, so it predicts what the real run does."""

from __future__ import annotations

import json
import re
import time

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError

# nats-server closes leaf connections one by one (leaf connection ids in LEAFZ, KICK reaching them) from 2.12
NEEDED = (2, 12)

_ACCOUNT_KEY = re.compile(r"^A[A-Z2-7]{55}$")
_OTHER_KEYS = {"O": "an operator", "U": "a user", "N": "a server", "C": "a cluster", "X": "a curve"}
_NKEY = re.compile(r"^[OUNCX][A-Z2-7]{55}$")


class ReconnectError(NatsEdgeError):
    """A leaf link that cannot be found, read or reopened."""


def check_wait(wait):
    """``wait`` as seconds, or ReconnectError naming the option."""
    if wait < 0:
        raise ReconnectError("wait: %s: use 0 or more seconds" % wait)
    return wait


def _version(text):
    """(major, minor) of a nats-server version such as '2.12.1', None when it cannot be told."""
    match = re.match(r"v?(\d+)\.(\d+)", text or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def check_version(version, where="it"):
    """ReconnectError when ``version`` is older than 2.12, the oldest that closes leaf connections one by one."""
    found = _version(version)
    if found is not None and found < NEEDED:
        raise ReconnectError("%s runs nats-server %s: closing leaf connections one by one needs 2.12 or newer "
                             "(restart an older server; an edge server's links can be closed from a hub of 2.12 or "
                             "newer with remote_name)" % (where, version))


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


def _replies(client, subject, server_id):
    """[(server id, server, reply)] of a monitoring request to the server ``server_id``, or to every server."""
    if server_id:
        reply = client.request_json("$SYS.REQ.SERVER.%s.%s" % (server_id, subject), {})
        return [(server_id, reply.get("server") or {}, reply)]
    found = []
    for raw in client.gather("$SYS.REQ.SERVER.PING.%s" % subject, b"{}", idle=0.5):
        try:
            reply = json.loads(raw.decode() or "{}")
        except ValueError:
            continue
        server = reply.get("server") or {}
        found.append((server.get("id"), server, reply))
    return found


def _data(reply, what, where):
    if reply.get("error"):
        raise ReconnectError("%s of %s: %s" % (what, where, reply["error"].get("description", reply["error"])))
    return reply.get("data") or {}


def _leafs(reply, where):
    return _data(reply, "LEAFZ", where).get("leafs") or []


def _named(client, holders):
    """{account name: public key} of the accounts of ``holders`` ({public key: id of a server that has it}), from
    the names in their JWTs."""
    names = {}
    for key in sorted(holders):
        detail = _data(client.request_json("$SYS.REQ.SERVER.%s.ACCOUNTZ" % holders[key], {"account": key}),
                       "ACCOUNTZ", holders[key]).get("account_detail") or {}
        name = detail.get("name_tag") or (detail.get("decoded_jwt") or {}).get("name")
        if name and name != key:
            names.setdefault(name, key)
    return names


def check_accounts(client, accounts, server_id=None):
    """Refuse, before anything waits, a value of ``accounts`` no leaf link can be bound to: where the servers name
    accounts by public key (operator mode), an account's name or another kind of key; where they name them by
    name, a name none of them has. An account public key is taken as it is: its link may be down, on its way back."""
    known, holder, by_key = set(), {}, False
    for sid, _server, reply in _replies(client, "ACCOUNTZ", server_id):
        data = _data(reply, "ACCOUNTZ", sid)
        names = list(data.get("accounts") or [])
        known.update(names)
        for name in names:
            holder.setdefault(name, sid)
        by_key = by_key or any(_ACCOUNT_KEY.match(name or "") for name in names + [data.get("system_account")])
    for account in accounts:
        if account in known or (by_key and _ACCOUNT_KEY.match(account)):
            continue
        if not by_key:
            raise ReconnectError("accounts: %s is not an account of the server, which names its accounts by name "
                                 "(not in operator mode): %s" % (account, ", ".join(sorted(known)) or "none"))
        if _NKEY.match(account):
            raise ReconnectError("accounts: %s is %s public key; accounts takes account public keys (A...)" % (
                account, _OTHER_KEYS[account[0]]))
        names = _named(client, dict((key, sid) for key, sid in holder.items() if _ACCOUNT_KEY.match(key)))
        if account in names:
            raise ReconnectError("accounts: %s is an account name; accounts takes account public keys (A...): %s is "
                                 "%s" % (account, account, names[account]))
        raise ReconnectError("accounts: %s is not an account public key (A...), and no account the server knows is "
                             "named so; accounts takes account public keys (A...)%s" % (account, (
                                 "; the accounts it knows: %s" % ", ".join(
                                     "%s is %s" % (name, names[name]) for name in sorted(names))) if names else ""))


def _read(client, accounts, server_id=None, remote_name=None):
    """({account: [(server id, connection id), ...]}, [(server id, server, leafs)]): the leaf connections bound to
    ``accounts`` on the server ``server_id``, or on every server those that come from the server called
    ``remote_name``, and what each server answered."""
    servers = [(sid, server, _leafs(reply, sid)) for sid, server, reply in _replies(client, "LEAFZ", server_id)]
    links = dict((account, []) for account in accounts)
    for sid, server, leafs in servers:
        for leaf in leafs:
            if leaf.get("account") in links and (remote_name is None or leaf.get("name") == remote_name):
                if not server_id:
                    check_version(server.get("ver"), "server %r" % server.get("name", sid))
                if leaf.get("id") is None:
                    raise ReconnectError("the server holding the link does not name its leaf connections (nats-server "
                                         "2.12 or newer can reopen them one by one; restart older ones)")
                links[leaf["account"]].append((sid, leaf["id"]))
    return links, servers


def leaf_links(client, accounts, server_id=None, remote_name=None):
    """{account: [(server id, connection id), ...]}: the leaf connections bound to ``accounts`` on the
    server ``server_id``, or on every server those that come from the server called ``remote_name``."""
    return _read(client, accounts, server_id, remote_name)[0]


def check_remote(client, remote_name, servers):
    """Refuse a ``remote_name`` no server has a leaf connection from and no server of that name answers through
    the system account (a remote whose every link is down, on its way back, still answers there when it shares
    the system account); say which remotes the servers have."""
    seen, unnamed = set(), set()
    for sid, server, leafs in servers:
        for leaf in leafs:
            if leaf.get("name") == remote_name:
                return
            if leaf.get("name"):
                seen.add(leaf["name"])
            else:
                unnamed.add("%s (%s)" % (server.get("name", sid), server.get("ver", "?")))
    if unnamed:
        raise ReconnectError("remote_name: %s do not name the servers their leaf connections come from: closing "
                             "leaf connections from the hub's side needs 2.12 or newer" % ", ".join(sorted(unnamed)))
    try:
        find_server(client, remote_name)
        return
    except ReconnectError:
        pass
    raise ReconnectError("remote_name: no server named %r has a leaf connection to these servers; %s" % (
        remote_name, "their leaf connections come from: %s" % ", ".join(sorted(seen)) if seen
        else "they have no leaf connections"))


def links_to_reopen(client, accounts, wait, server_id=None, remote_name=None, version=""):
    """The checks of a run and the wait for a link that is down: the links to close, {account: [(server id,
    connection id), ...]}. Closes nothing (check mode stops here)."""
    check_accounts(client, accounts, server_id)
    if server_id:
        check_version(version)
    waiting = time.monotonic()
    first = True
    while True:
        # a link that is down may be on its way back (its account was just pushed with new signing keys,
        # or its hub restarted): it connects again with the creds file as it is now, and is waited for
        before, servers = _read(client, accounts, server_id, remote_name)
        if first and remote_name:
            check_remote(client, remote_name, servers)
        first = False
        missing = sorted(account for account, ids in before.items() if not ids)
        if not missing:
            return before
        if time.monotonic() - waiting > wait:
            raise ReconnectError("no leaf connection bound to %s came up within %ss: a link that stays down cannot "
                                 "be reopened, find why it is down first" % (", ".join(missing), wait))
        time.sleep(0.5)


def reopen(client, accounts, before, wait, server_id=None, remote_name=None):
    """Close the links ``before`` and wait until each is back; (links, seconds)."""
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


def reconnect(client, accounts, wait, server_id=None, remote_name=None, version=""):
    """Close the links of ``accounts`` and wait until each is back; (links, seconds)."""
    before = links_to_reopen(client, accounts, wait, server_id, remote_name, version)
    return reopen(client, accounts, before, wait, server_id, remote_name)
