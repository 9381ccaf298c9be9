"""Claims built from module options, the re-sign decision, and the docs of the nsc modules."""

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
from ansible_collections.nats_edge.fleet.plugins.module_utils import _nsc as nsc
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc_store import StoreError


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
