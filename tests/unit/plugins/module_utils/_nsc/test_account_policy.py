"""Account and user policy as claims: tiered JetStream limits and per-stream caps, subject mappings, connection
types and source networks, scoped signing keys (role templates) and the users they issue."""

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import account, user
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import common as nsc
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import Store, StoreError


def test_jetstream_caps_are_written_only_when_given():
    assert nsc.jetstream_limits({"disk_storage": "1MiB", "max_ack_pending": 10, "disk_max_stream_bytes": "64KiB",
                                 "mem_max_stream_bytes": None, "max_bytes_required": True}) == {
        "disk_storage": 1024 ** 2, "mem_storage": -1, "streams": -1, "consumer": -1, "max_ack_pending": 10,
        "disk_max_stream_bytes": 64 * 1024, "max_bytes_required": True}
    assert "max_bytes_required" not in nsc.jetstream_limits({"max_bytes_required": False})


def test_tiers_replace_the_accounts_limits():
    # as ansible-core fills in a dict option's suboptions
    given = dict((key, None) for key in nsc.JETSTREAM_OPTIONS)
    given["tiers"] = {"R1": {"disk_storage": "1GiB", "max_bytes_required": True}, "R3": {"streams": 2}, "R5": None}
    assert nsc.jetstream_limits(given) == {"tiered_limits": {
        "R1": {"disk_storage": 1024 ** 3, "mem_storage": -1, "streams": -1, "consumer": -1,
               "max_bytes_required": True},
        "R3": {"disk_storage": -1, "mem_storage": -1, "streams": 2, "consumer": -1}}}
    claims = jwt.account_claims("A", "AKEY", jetstream=nsc.jetstream_limits(given))
    assert set(claims["nats"]["limits"]["tiered_limits"]) == {"R1", "R3"}
    assert "disk_storage" not in claims["nats"]["limits"]


@pytest.mark.parametrize("given, message", [
    ({"tiers": {"R1": {}}, "disk_storage": "1GiB"}, "jetstream: tiers cannot be combined with disk_storage"),
    ({"tiers": {"R2": {}}}, "jetstream.tiers: unknown limit R2; it takes R1, R3, R5"),
    ({"tiers": {}}, "jetstream.tiers: no tier given"),
    ({"tiers": {"R1": {"disk_max_stream_bytes": "lots"}}}, "jetstream.tiers.R1.disk_max_stream_bytes"),
    ({"tiers": {"R3": {"max_ack_pending": -2}}}, "jetstream.tiers.R3.max_ack_pending: -2: use -1"),
    ({"max_bytes_required": "yes"}, "jetstream.max_bytes_required: 'yes' is not true or false"),
    ({"tiers": {"R1": {"replicas": 1}}}, "jetstream.tiers.R1: unknown limit replicas"),
])
def test_bad_jetstream_limits_name_the_field(given, message):
    with pytest.raises(StoreError) as caught:
        nsc.jetstream_limits(given)
    assert message in str(caught.value)


def test_mappings_become_the_claim():
    assert nsc.mappings(None) is None
    assert nsc.mappings([]) == {}
    assert nsc.mappings([
        {"subject": "legacy.*", "to": [{"subject": "orders.{{wildcard(1)}}", "weight": None, "cluster": None}]},
        {"subject": "split", "to": [{"subject": "a", "weight": 60}, {"subject": "b", "weight": 40},
                                    {"subject": "c", "weight": 100, "cluster": "east"}]},
    ]) == {"legacy.*": [{"subject": "orders.{{wildcard(1)}}"}],
           "split": [{"subject": "a", "weight": 60}, {"subject": "b", "weight": 40},
                     {"subject": "c", "weight": 100, "cluster": "east"}]}


@pytest.mark.parametrize("given, message", [
    ([{"subject": "a b", "to": [{"subject": "x"}]}], "mappings[0].subject: 'a b' is not a subject"),
    ([{"subject": "a", "to": []}], "mappings[0] (a).to: give a list of one or more destinations"),
    ([{"subject": "a", "to": [{"subject": "x.>.y"}]}], "mappings[0] (a).to[0].subject: 'x.>.y' is not a subject"),
    ([{"subject": "a", "to": [{"subject": "x.{{wildcard(1}}"}]}], "has a malformed mapping function"),
    ([{"subject": "a", "to": [{"subject": "x", "weight": 0}]}], "to[0].weight: 0 is not a percentage from 1 to 100"),
    ([{"subject": "a", "to": [{"subject": "x", "weight": 70}, {"subject": "y", "weight": 40}]}],
     "mappings[0] (a): the weights of the destinations add up to 110%"),
    ([{"subject": "a", "to": [{"subject": "x", "weight": 70, "cluster": "c"},
                              {"subject": "y", "weight": 40, "cluster": "c"}]}],
     "the weights of the destinations in cluster 'c' add up to 110%"),
    ([{"subject": "a", "to": [{"subject": "x"}]}, {"subject": "a", "to": [{"subject": "y"}]}],
     "mappings[1] (a): subject 'a' is mapped twice"),
])
def test_bad_mappings_name_the_field(given, message):
    with pytest.raises(StoreError) as caught:
        nsc.mappings(given)
    assert message in str(caught.value)


def test_connection_types_and_networks():
    assert nsc.user_policy({"allowed_connection_types": ["leafnode", "STANDARD"], "src": ["10.0.0.0/8"]}, "") == {
        "allowed_connection_types": ["LEAFNODE", "STANDARD"], "src": ["10.0.0.0/8"]}
    assert nsc.user_policy({"allowed_connection_types": [], "src": None}, "") == {}
    with pytest.raises(StoreError, match="allowed_connection_types: 'CLIENT' is not a connection type; use STANDARD"):
        nsc.user_policy({"allowed_connection_types": ["CLIENT"]}, "")
    with pytest.raises(StoreError, match="src: '10.0.0.1' is not a network in CIDR notation"):
        nsc.user_policy({"src": ["10.0.0.1"]}, "")
    with pytest.raises(StoreError, match="src: '10.0.0.0/33' is not a network"):
        nsc.user_policy({"src": ["10.0.0.0/33"]}, "")


def test_a_scoped_user_has_no_permissions_of_its_own():
    claims = jwt.user_claims("u", "UKEY", issuer_account="AKEY", scoped=True)
    assert claims["nats"] == {"type": "user", "version": 2, "issuer_account": "AKEY"}
    with pytest.raises(StoreError, match="signing_role: a user issued with the scoped signing key of role 'r' gets "
                                         "its permissions and limits from the key's template; permissions, src"):
        user.check_item({"name": "u", "signing_role": "r", "permissions": {"pub": {"allow": ["x"]}},
                         "src": ["10.0.0.0/8"]})


@pytest.mark.parametrize("given, message", [
    ([{"role": "r"}, {"role": "r"}], "scoped_signing_keys[1] (r): role 'r' is listed twice"),
    ([{"role": " r"}], "scoped_signing_keys[0].role: ' r' is not a role name"),
    ([{"role": "r", "template": {"pub": {"allow": ["a b"]}}}], "scoped_signing_keys[0] (r).template.pub.allow"),
    ([{"role": "r", "template": {"src": ["nowhere"]}}], "scoped_signing_keys[0] (r).template.src: 'nowhere'"),
    ([{"role": "r", "template": {"subs": -5}}], "scoped_signing_keys[0] (r).template.subs: -5: use -1"),
    ([{"role": "r", "template": {"publish": []}}], "scoped_signing_keys[0] (r).template: unknown option publish"),
])
def test_bad_scoped_signing_keys_name_the_field(given, message):
    with pytest.raises(StoreError) as caught:
        account.check_item({"name": "A", "scoped_signing_keys": given})
    assert message in str(caught.value)


def test_a_role_keeps_its_key_while_its_seed_is_in_the_key_store(tmp_path):
    store = Store(str(tmp_path / "stores"), str(tmp_path / "keys"), "fleet")
    seeds = []
    template = nsc.user_template({"pub": {"allow": ["orders.>"]}}, "t")
    assert template == {"pub": {"allow": ["orders.>"]}, "sub": {}, "subs": -1, "data": -1, "payload": -1}
    first = account.scoped_keys(store, None, [("reader", "", template)], seeds)
    assert len(seeds) == 1 and first[0]["key"] == jwt.public_key(seeds[0]) and first[0]["kind"] == "user_scope"
    store.write_seed(seeds[0])
    claims = jwt.account_claims("A", "AKEY", signing_keys=["APLAIN"] + first)
    assert jwt.plain_signing_keys(claims) == ["APLAIN"] and jwt.scoped_signing_keys(claims) == first
    again = account.scoped_keys(store, claims, [("reader", "new text", template), ("writer", "", template)], seeds)
    assert again[0]["key"] == first[0]["key"] and again[0]["description"] == "new text"
    assert len(seeds) == 2 and again[1]["key"] == jwt.public_key(seeds[1])
    # a user a scoped key issued belongs to the account
    assert store.check_user("A", "u", claims, {"name": "u", "iss": first[0]["key"],
                                               "nats": {"type": "user", "issuer_account": "AKEY"}})
