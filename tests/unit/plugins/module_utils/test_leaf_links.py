"""The leaf links of accounts found through LEAFZ, and reopened with KICK until each is back."""

import json

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils import _leaf_links as ll
from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError


class FakeClient(object):
    """LEAFZ replies from a dict {server id: [leaf, ...]}; a KICK gives the kicked link a new connection id."""

    def __init__(self, servers, names=None):
        self.servers = servers
        self.names = names or {}
        self.kicked = []

    def _reply(self, sid):
        return {"server": {"id": sid, "name": self.names.get(sid, sid), "ver": "2.12.1"},
                "data": {"leafs": [dict(leaf) for leaf in self.servers[sid]]}}

    def gather(self, subject, body, idle=0.5):
        asked = json.loads(body.decode() or "{}").get("server_name")
        return [json.dumps(self._reply(sid)).encode() for sid in self.servers
                if asked is None or self.names.get(sid, sid) == asked] + [b"not json"]

    def request_json(self, subject, body=None):
        sid = subject.split(".")[3]
        if subject.endswith(".KICK"):
            self.kicked.append((sid, body["cid"]))
            for leaf in self.servers[sid]:
                if leaf["id"] == body["cid"]:
                    leaf["id"] += 100
            return {}
        return self._reply(sid)


def test_leaf_find_server_by_name():
    client = FakeClient({"N1": [], "N2": []}, names={"N1": "hub-1", "N2": "hub-2"})
    assert ll.find_server(client, "hub-2") == ("N2", "2.12.1")
    with pytest.raises(ll.ReconnectError, match="no server called 'hub-3' answered"):
        ll.find_server(client, "hub-3")
    assert issubclass(ll.ReconnectError, NatsEdgeError)


def test_leaf_links_of_accounts_on_one_server_or_from_a_remote():
    client = FakeClient({"N1": [{"account": "APP", "id": 5, "name": "edge-1"}, {"account": "SYS", "id": 6},
                                {"account": "APP", "id": 7, "name": "edge-2"}]})
    assert ll.leaf_links(client, ["APP", "OPS"], server_id="N1") == {"APP": [("N1", 5), ("N1", 7)], "OPS": []}
    assert ll.leaf_links(client, ["APP"], remote_name="edge-2") == {"APP": [("N1", 7)]}


def test_leaf_links_without_ids_or_with_an_error_raise():
    with pytest.raises(ll.ReconnectError, match="does not name its leaf connections"):
        ll.leaf_links(FakeClient({"N1": [{"account": "APP"}]}), ["APP"], server_id="N1")
    with pytest.raises(ll.ReconnectError, match="LEAFZ of N1: denied"):
        ll._leafs({"error": {"description": "denied"}}, "N1")


def test_leaf_reconnect_kicks_each_link_and_waits_for_new_ones():
    client = FakeClient({"N1": [{"account": "APP", "id": 5}, {"account": "OPS", "id": 6}]})
    links, seconds = ll.reconnect(client, ["APP", "OPS"], 5, server_id="N1")
    assert client.kicked == [("N1", 5), ("N1", 6)]
    assert links == [dict(account="APP", before=[5], after=[105]), dict(account="OPS", before=[6], after=[106])]
    assert seconds >= 0


def test_leaf_reconnect_fails_on_a_link_that_stays_down():
    with pytest.raises(ll.ReconnectError, match="no leaf connection bound to OPS came up within 0s"):
        ll.reconnect(FakeClient({"N1": [{"account": "APP", "id": 5}]}), ["APP", "OPS"], 0, server_id="N1")
