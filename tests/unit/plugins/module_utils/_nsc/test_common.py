"""Claims built from module options, the re-sign decision, and the docs of the nsc modules."""

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import common as nsc
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import StoreError


def test_jetstream_limits_take_sizes_and_default_to_unlimited():
    assert nsc.jetstream_limits({"disk_storage": "1GiB", "mem_storage": None, "streams": 3, "consumers": None}) == {
        "disk_storage": 1024 ** 3, "mem_storage": -1, "streams": 3, "consumer": -1}
    assert nsc.jetstream_limits(None) is None


def test_bad_limits_name_the_option():
    with pytest.raises(StoreError, match="jetstream.disk_storage"):
        nsc.jetstream_limits({"disk_storage": "lots"})
    with pytest.raises(StoreError, match="limits.conn"):
        nsc.account_limits({"conn": -5})


def test_account_limits_only_set_what_is_given():
    assert nsc.account_limits({"conn": 10, "payload": "1MB", "subs": None}) == {"conn": 10, "payload": 1024 ** 2}


def test_permissions_sorted_checked_and_empty_parts_left_out():
    built = nsc.permissions({"pub": {"allow": ["b", "a", "a"]}, "sub": {"deny": []},
                             "resp": {"max": 2, "ttl": "5s"}}, "permissions")
    assert built == {"pub": {"allow": ["a", "b"]}, "sub": {}, "resp": {"max": 2, "ttl": 5 * 10 ** 9}}
    with pytest.raises(StoreError, match="permissions.sub.allow"):
        nsc.permissions({"sub": {"allow": ["a.*b"]}}, "permissions")


def test_expiry_from_rfc3339_or_epoch():
    assert nsc.expiry("2030-01-01T00:00:00Z") == 1893456000
    assert nsc.expiry("2030-01-01T01:00:00+01:00") == 1893456000
    assert nsc.expiry(1893456000) == nsc.expiry("1893456000") == 1893456000
    assert nsc.expiry(None) is None
    with pytest.raises(StoreError, match="expires"):
        nsc.expiry("next week")


def test_unmanaged_claims_of_the_store_are_kept():
    existing = jwt.account_claims("APP", "AXX", exports=[{"name": "e", "subject": "x", "type": "stream"}])
    desired = jwt.account_claims("APP", "AXX", jetstream={"streams": 1})
    result = nsc.merged(existing, desired, nsc.ACCOUNT_MANAGED)
    assert result["nats"]["exports"] == existing["nats"]["exports"]
    assert result["nats"]["limits"]["streams"] == 1


def test_signing_again_only_when_the_claims_say_something_else():
    seed = jwt.new_seed("operator")
    desired = jwt.account_claims("APP", jwt.public_key(jwt.new_seed("account")), signing_keys=["AB", "AA"])
    stored = jwt.decode(jwt.encode(desired, seed, issued_at=1))
    assert not nsc.needs_signing(stored, desired)
    reordered = jwt.account_claims("APP", desired["sub"], signing_keys=["AA", "AB"])
    assert not nsc.needs_signing(stored, reordered)
    assert nsc.needs_signing(stored, jwt.account_claims("APP", desired["sub"], limits={"conn": 1}))
    assert nsc.needs_signing(None, desired)


def test_system_exports_are_the_account_monitoring_pair():
    assert [(e["subject"], e["type"]) for e in nsc.SYSTEM_EXPORTS] == [
        ("$SYS.REQ.ACCOUNT.*.*", "service"), ("$SYS.ACCOUNT.*.>", "stream")]


def test_push_replies_are_read_per_server():
    replies = [b'{"server":{"name":"n1","id":"X"},"data":{"account":"A","code":200,"message":"jwt updated"}}',
               b'{"server":{"name":"n2"},"error":{"account":"A","code":500,"description":"bad jwt"}}',
               b"garbage"]
    assert nsc.read_replies(replies) == [
        {"server": "n1", "ok": True, "message": "jwt updated"},
        {"server": "n2", "ok": False, "message": "bad jwt"},
        {"server": "?", "ok": False, "message": "garbage"}]


def test_the_confirmation_wait_grows_with_the_servers_expected():
    assert nsc.confirm_wait(5.0, None) == nsc.confirm_wait(5.0, 1) == 5.0
    assert nsc.confirm_wait(5.0, 31) == 5.0 + 30 * nsc.CONFIRM_PER_SERVER
    assert nsc.confirm_wait(5.0, 101) > nsc.confirm_wait(5.0, 31) > nsc.confirm_wait(5.0, 11)
    # capped for a very large fleet, never below the connection's own timeout
    assert nsc.confirm_wait(5.0, 10000) == nsc.CONFIRM_MAX_WAIT
    assert nsc.confirm_wait(300.0, 10000) == 300.0


def test_a_push_is_sent_again_only_when_servers_are_expected():
    assert nsc.confirm_rounds(None) == [0.0]
    rounds = nsc.confirm_rounds(31)
    assert len(rounds) == nsc.CONFIRM_ROUNDS > 1 and rounds[0] == 0.0
    assert rounds == sorted(rounds) and len(set(rounds)) == len(rounds)


def _answer(server, ok=True, message="jwt updated"):
    return {"server": server, "ok": ok, "message": message}


def test_confirmations_add_up_over_rounds_and_name_who_never_confirmed():
    answers = nsc.Confirmations(expected=4)
    answers.add([_answer("hub1"), _answer("edge1", False, "jwt update resulted in error")])
    assert not answers.done()
    answers.add([_answer("hub1"), _answer("edge1"), _answer("edge2", False, "bad jwt")])
    assert not answers.done()
    assert answers.unconfirmed(reachable=["hub1", "edge1", "edge2", "edge3"]) == [
        "edge2 (bad jwt)", "edge3 (up, never answered)"]
    assert answers.unconfirmed() == ["edge2 (bad jwt)", "(1 of 4 servers never answered)"]
    # a later failure does not undo an earlier confirmation
    answers.add([_answer("hub1", False), _answer("edge2"), _answer("edge3")])
    assert answers.done() and answers.unconfirmed() == []
    assert [(r["server"], r["ok"]) for r in answers.results()] == [
        ("edge1", True), ("edge2", True), ("edge3", True), ("hub1", True)]


def test_confirmations_without_a_count_need_every_answer_good():
    answers = nsc.Confirmations()
    assert not answers.done() and answers.unconfirmed() == ["(no server answered)"]
    answers.add([_answer("n1"), {"server": "?", "ok": False, "message": "garbage"}])
    assert not answers.done() and answers.unconfirmed() == ["(1 answers could not be read)"]
    answers = nsc.Confirmations()
    answers.add([_answer("n1")])
    assert answers.done()


class _Servers(object):
    """Stands for the servers behind a connection: each round of the claims
    update is answered by the names listed for it."""

    def __init__(self, rounds, up=()):
        self.rounds, self.up, self.sent = list(rounds), up, []

    def gather(self, subject, data, timeout, expect=None, idle=None):
        self.sent.append((subject, timeout, expect))
        names = self.rounds.pop(0) if self.rounds else []
        return [('{"server":{"name":"%s"},"data":{"code":200}}' % name).encode() for name in names]

    def server_infos(self, system=False):
        return [{"server": {"name": name}} for name in self.up]

    def request(self, subject, data, timeout):
        return self.token.encode()


def test_push_account_sends_again_until_every_expected_server_confirmed():
    account = jwt.public_key(jwt.new_seed("account"))
    token = jwt.encode(jwt.account_claims("APP", account), jwt.new_seed("operator"))
    servers = _Servers([["hub1"], ["hub1", "edge1"], ["hub1", "edge1", "edge2"]])
    servers.token = token
    pauses = []
    pushed, unconfirmed, read_back = nsc.push_account(servers, account, token, 5.0, expected=3, sleep=pauses.append)
    assert unconfirmed == [] and read_back and [r["server"] for r in pushed] == ["edge1", "edge2", "hub1"]
    assert len(servers.sent) == 3 and pauses == nsc.confirm_rounds(3)
    assert all(wait == nsc.confirm_wait(5.0, 3) and expect == 3 for _s, wait, expect in servers.sent)

    # all confirmed at once: one send, no pause
    servers = _Servers([["hub1", "edge1", "edge2"]])
    servers.token = token
    assert nsc.push_account(servers, account, token, 5.0, expected=3, sleep=pauses.append)[1] == []
    assert len(servers.sent) == 1

    # never confirmed after every round: named when up, counted when not
    servers = _Servers([["hub1"]] * nsc.CONFIRM_ROUNDS, up=["hub1", "edge1"])
    servers.token = token
    _pushed, unconfirmed, _read = nsc.push_account(servers, account, token, 5.0, expected=3, sleep=pauses.append)
    assert len(servers.sent) == nsc.CONFIRM_ROUNDS
    assert unconfirmed == ["edge1 (up, never answered)", "(1 of 3 servers never answered)"]
