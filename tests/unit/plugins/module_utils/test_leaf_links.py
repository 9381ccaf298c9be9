"""The leaf links of accounts found through LEAFZ, checked against ACCOUNTZ, and reopened with KICK until each is
back."""

import json

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils import _leaf_links as ll
from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError

APP_KEY = "A" + "B" * 55
SYS_KEY = "A" + "C" * 55
OPS_KEY = "A" + "D" * 55
USER_KEY = "U" + "B" * 55


class FakeClient(object):
    """LEAFZ replies from a dict {server id: [leaf, ...]}, ACCOUNTZ from {server id: {account: name}} (the system
    account first); a KICK gives the kicked link a new connection id."""

    def __init__(self, servers, names=None, accounts=None, versions=None):
        self.servers = servers
        self.names = names or {}
        self.versions = versions or {}
        self.accounts = accounts or dict((sid, dict([("$SYS", None)] + [(leaf["account"], None) for leaf in leafs]))
                                         for sid, leafs in servers.items())
        self.kicked = []

    def _server(self, sid):
        return {"id": sid, "name": self.names.get(sid, sid), "ver": self.versions.get(sid, "2.12.1")}

    def _reply(self, sid, kind="LEAFZ", body=None):
        if kind == "ACCOUNTZ":
            accounts = self.accounts[sid]
            if body and body.get("account"):
                return {"server": self._server(sid), "data": {"account_detail": {
                    "account_name": body["account"], "name_tag": accounts.get(body["account"])}}}
            return {"server": self._server(sid), "data": {"system_account": list(accounts)[0],
                                                          "accounts": list(accounts)}}
        return {"server": self._server(sid), "data": {"leafs": [dict(leaf) for leaf in self.servers[sid]]}}

    def gather(self, subject, body, idle=0.5):
        asked = json.loads(body.decode() or "{}").get("server_name")
        return [json.dumps(self._reply(sid, subject.split(".")[-1])).encode() for sid in self.servers
                if asked is None or self.names.get(sid, sid) == asked] + [b"not json"]

    def request_json(self, subject, body=None):
        sid = subject.split(".")[3]
        if subject.endswith(".KICK"):
            self.kicked.append((sid, body["cid"]))
            for leaf in self.servers[sid]:
                if leaf["id"] == body["cid"]:
                    leaf["id"] += 100
            return {}
        return self._reply(sid, subject.split(".")[-1], body)


OPERATOR_MODE = {"N1": {SYS_KEY: "SYS", APP_KEY: "APP", "$G": None}}


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
    client = FakeClient({"N1": [{"account": "APP", "id": 5}]},
                        accounts={"N1": {"$SYS": None, "APP": None, "OPS": None}})
    with pytest.raises(ll.ReconnectError, match="no leaf connection bound to OPS came up within 0s"):
        ll.reconnect(client, ["APP", "OPS"], 0, server_id="N1")
    assert client.kicked == []


def test_accounts_are_public_keys_as_the_server_names_them_in_operator_mode():
    """accounts: 'Accounts ... as the server names them - in operator mode their public keys, not their names'."""
    client = FakeClient({"N1": [{"account": APP_KEY, "id": 5}]}, accounts=OPERATOR_MODE)
    ll.check_accounts(client, [APP_KEY], server_id="N1")
    # a key the server does not hold yet may be an account whose link is on its way back
    ll.check_accounts(client, [OPS_KEY], server_id="N1")
    with pytest.raises(ll.ReconnectError) as caught:
        ll.check_accounts(client, ["APP"], server_id="N1")
    assert str(caught.value) == ("accounts: APP is an account name; accounts takes account public keys (A...): APP "
                                 "is %s" % APP_KEY)
    with pytest.raises(ll.ReconnectError, match="accounts: %s is a user public key; accounts takes account public "
                                                "keys" % USER_KEY):
        ll.check_accounts(client, [USER_KEY], server_id="N1")
    with pytest.raises(ll.ReconnectError) as caught:
        ll.check_accounts(client, ["NOPE"], server_id="N1")
    assert str(caught.value).startswith("accounts: NOPE is not an account public key (A...), and no account the "
                                        "server knows is named so")
    assert str(caught.value).endswith("; accounts takes account public keys (A...); the accounts it knows: APP is %s, "
                                      "SYS is %s" % (APP_KEY, SYS_KEY))


def test_accounts_are_names_where_the_server_names_its_accounts_by_name():
    client = FakeClient({"N1": [{"account": "APP", "id": 5}]}, accounts={"N1": {"$SYS": None, "APP": None, "$G": None}})
    ll.check_accounts(client, ["APP", "$G"], server_id="N1")
    with pytest.raises(ll.ReconnectError, match=r"accounts: OPS is not an account of the server, which names its "
                                                r"accounts by name \(not in operator mode\): \$G, \$SYS, APP"):
        ll.check_accounts(client, ["OPS"], server_id="N1")


def test_the_checks_come_before_any_wait_and_any_kick():
    """Check mode runs links_to_reopen, the checks of a real run: a wrong value fails there, at once."""
    client = FakeClient({"N1": [{"account": APP_KEY, "id": 5}]}, accounts=OPERATOR_MODE)
    with pytest.raises(ll.ReconnectError, match="APP is an account name"):
        ll.links_to_reopen(client, ["APP"], 600, server_id="N1")
    with pytest.raises(ll.ReconnectError, match="2.11.3: closing leaf connections one by one needs 2.12 or newer"):
        ll.links_to_reopen(client, [APP_KEY], 600, server_id="N1", version="2.11.3")
    assert ll.links_to_reopen(client, [APP_KEY], 600, server_id="N1", version="2.12.0") == {APP_KEY: [("N1", 5)]}
    assert client.kicked == []


def test_a_remote_name_no_server_has_is_refused_at_once_naming_the_remotes_there_are():
    client = FakeClient({"N1": [{"account": APP_KEY, "id": 5, "name": "edge-1"}],
                         "N2": [{"account": APP_KEY, "id": 6, "name": "edge-2"}]}, names={"N1": "hub-1", "N2": "hub-2"},
                        accounts={"N1": OPERATOR_MODE["N1"], "N2": OPERATOR_MODE["N1"]})
    with pytest.raises(ll.ReconnectError) as caught:
        ll.links_to_reopen(client, [APP_KEY], 600, remote_name="edge-9")
    assert str(caught.value) == ("remote_name: no server named 'edge-9' has a leaf connection to these servers; their "
                                 "leaf connections come from: edge-1, edge-2")
    assert ll.links_to_reopen(client, [APP_KEY], 600, remote_name="edge-2") == {APP_KEY: [("N2", 6)]}
    # a remote whose links are all down but that answers through the system account is waited for
    client.names["N3"], client.servers["N3"], client.accounts["N3"] = "edge-3", [], OPERATOR_MODE["N1"]
    with pytest.raises(ll.ReconnectError, match="no leaf connection bound to %s came up within 0s" % APP_KEY):
        ll.links_to_reopen(client, [APP_KEY], 0, remote_name="edge-3")


def test_a_remote_name_on_servers_that_do_not_name_their_leafs_needs_2_12():
    client = FakeClient({"N1": [{"account": APP_KEY}]}, names={"N1": "hub"}, versions={"N1": "2.9.10"},
                        accounts=OPERATOR_MODE)
    with pytest.raises(ll.ReconnectError, match=r"remote_name: hub \(2.9.10\) do not name the servers their leaf "
                                                r"connections come from: .* needs 2.12 or newer"):
        ll.links_to_reopen(client, [APP_KEY], 600, remote_name="edge")
    older = FakeClient({"N1": [{"account": APP_KEY, "id": 5, "name": "edge"}]}, names={"N1": "hub"},
                       versions={"N1": "2.11.3"}, accounts=OPERATOR_MODE)
    with pytest.raises(ll.ReconnectError, match="server 'hub' runs nats-server 2.11.3: .* needs 2.12 or newer"):
        ll.links_to_reopen(older, [APP_KEY], 600, remote_name="edge")


@pytest.mark.parametrize("version, refused", [("2.9.10", True), ("2.11.3", True), ("2.12.0", False),
                                              ("2.15.1", False), ("3.0.0", False), ("", False), ("dev", False)])
def test_the_server_that_closes_the_links_runs_2_12_or_newer(version, refused):
    if refused:
        with pytest.raises(ll.ReconnectError, match="2.12 or newer"):
            ll.check_version(version)
    else:
        ll.check_version(version)


def test_wait_is_0_or_more_seconds():
    assert ll.check_wait(0) == 0 and ll.check_wait(60) == 60
    with pytest.raises(ll.ReconnectError, match="wait: -1: use 0 or more seconds"):
        ll.check_wait(-1)
