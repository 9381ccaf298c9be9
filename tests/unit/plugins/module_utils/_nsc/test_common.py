"""Claims built from module options, the re-sign decision, and the docs of the nsc modules."""

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import account, export, operator, user
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


# -- values as given ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec, given, message", [
    (operator.ARGUMENT_SPEC, {"operator": True}, "operator: true is a boolean, not text"),
    (operator.ARGUMENT_SPEC, {"name": False}, "name: false is a boolean, not text"),
    (operator.ARGUMENT_SPEC, {"operator": "fleet", "system_account": ["SYS"]}, "system_account: ['SYS'] is a list"),
    (operator.ARGUMENT_SPEC, {"operator": "fleet", "service_urls": [True]}, "service_urls[0]: true is a boolean"),
    (account.ARGUMENT_SPEC, {"name": "APP", "jetstream": True},
     "jetstream: true is not a mapping; write jetstream: {} for JetStream without limits"),
    (account.ARGUMENT_SPEC, {"name": "APP", "jetstream": 5}, "jetstream: 5 is not a mapping"),
    (account.ARGUMENT_SPEC, {"name": "APP", "limits": {"conn": True}}, "limits.conn: true is a boolean, not a number"),
    (account.ARGUMENT_SPEC, {"name": "APP", "default_permissions": {"pub": True}},
     "default_permissions.pub: true is not a mapping; write a mapping of allow, deny"),
    (user.ARGUMENT_SPEC, {"account": "APP", "name": "u", "permissions": {"sub": {"allow": ["a", True]}}},
     "permissions.sub.allow[1]: true is a boolean, not text"),
    (export.ARGUMENT_SPEC, {"account": "APP", "subject": "a", "importers": [True]},
     "importers[0]: true is not a mapping"),
    (export.ARGUMENT_SPEC, {"share_stream": True}, "share_stream: true is not a mapping"),
])
def test_what_ansible_core_would_coerce_or_trip_over_is_refused_by_name(spec, given, message):
    with pytest.raises(StoreError) as caught:
        nsc.check_given(spec, given)
    assert str(caught.value).startswith(message), str(caught.value)


def test_fine_values_pass_as_given():
    assert nsc.check_given(account.ARGUMENT_SPEC, {"name": "2024", "jetstream": {}, "limits": {"conn": 5}}) is not None
    nsc.check_given(account.ARGUMENT_SPEC, {"name": "APP", "jetstream": '{"streams": 3}'})  # ansible-core parses it
    nsc.check_given(user.ARGUMENT_SPEC, {"account": "APP", "name": "u", "expires": True})  # raw: its own check
    nsc.check_given(export.ARGUMENT_SPEC, {"account": "APP", "subject": "a", "importers": [{"account": "B"}]})


def test_a_lenient_spec_takes_anything_and_keeps_the_rest():
    spec = nsc.lenient(account.ARGUMENT_SPEC)
    assert spec["jetstream"] == {"type": "raw"} and spec["state"] == {"type": "raw", "default": "present"}
    assert spec["operator"]["required"] and spec["store_dir"]["fallback"]
    result = ArgumentSpecValidator(spec).validate({"operator": "fleet", "name": "APP", "jetstream": True})
    assert not result.error_messages and result.validated_parameters["jetstream"] is True


# -- values the claims cannot carry -------------------------------------------------------------------------------


def test_limits_above_int64_are_refused():
    assert nsc.account_limits({"conn": 2**63 - 1, "data": "1GiB"}) == {"conn": 2**63 - 1, "data": 1024**3}
    with pytest.raises(StoreError, match=r"^limits.conn: 9223372036854775808 is larger than any server reads"):
        nsc.account_limits({"conn": 2**63})
    with pytest.raises(StoreError, match=r"^jetstream.disk_storage: '99999999T' is larger than any server reads"):
        nsc.jetstream_limits({"disk_storage": "99999999T"})
    with pytest.raises(StoreError, match=r"^limits: unknown limit connections; it takes conn, leaf"):
        nsc.account_limits({"connections": 5})


def test_jetstream_true_says_what_to_write():
    with pytest.raises(StoreError) as caught:
        nsc.jetstream_limits(True)
    assert str(caught.value) == "jetstream: true is not a mapping of limits; " + nsc.JETSTREAM_HINT
    assert nsc.jetstream_limits({}) == {"disk_storage": -1, "mem_storage": -1, "streams": -1, "consumer": -1}
    assert nsc.jetstream_limits(None) is None


@pytest.mark.parametrize("value, expected", [
    (None, None), ("", None), (0, None), ("0", None), (1893456000, 1893456000), ("1893456000", 1893456000),
    ("2030-01-01T00:00:00Z", 1893456000), (2**63 - 1, 2**63 - 1)])
def test_expiries_read_as_a_server_does(value, expected):
    assert nsc.expiry(value) == expected


@pytest.mark.parametrize("value, message", [
    (True, "expires: true is not a time; give epoch seconds or an RFC 3339 time"),
    (False, "expires: false is not a time"),
    (1.5, "expires: 1.5 is not a time"),
    (-5, "expires: -5 is before 1970"),
    ("-5", "expires: '-5' is before 1970"),
    (2**63, "expires: 9223372036854775808 is later than any server reads"),
    ("1960-01-01T00:00:00Z", "expires: '1960-01-01T00:00:00Z' is not after 1970"),
    ("tomorrow", "expires: 'tomorrow' is not a time")])
def test_expiries_no_server_reads_are_refused(value, message):
    with pytest.raises(StoreError) as caught:
        nsc.expiry(value)
    assert str(caught.value).startswith(message), str(caught.value)


@pytest.mark.parametrize("value, message", [
    (-5, "permissions.resp.max: -5: use the number of replies allowed per request (1 or more), or -1 for no limit"),
    (0, "permissions.resp.max: 0: use the number of replies"),
    (2**31, "permissions.resp.max: 2147483648 is larger than every server reads"),
    ("lots", "permissions.resp.max: invalid literal")])
def test_response_limits_no_server_uses_are_refused(value, message):
    with pytest.raises(StoreError) as caught:
        nsc.permissions({"resp": {"max": value}}, "permissions")
    assert str(caught.value).startswith(message), str(caught.value)
    assert nsc.permissions({"resp": {"max": -1, "ttl": "1s"}}, "p")["resp"] == {"max": -1, "ttl": 10**9}
