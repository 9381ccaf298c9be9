"""The placement check: nats-server's peer selection reduced to what tags decide, on the
cross-region layout (three regions, region 3 with two zones) and on replies as servers send them."""

import re

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import placement as jp

LAYOUT = {
    "n1a": ["rg:1", "az:1a", "xr:123"], "n1b": ["rg:1", "az:1b"], "n1c": ["rg:1", "az:1c"],
    "n2a": ["rg:2", "az:2a"], "n2b": ["rg:2", "az:2b", "xr:123"], "n2c": ["rg:2", "az:2c"],
    "n3a": ["rg:3", "az:3a", "xr:123"], "n3b": ["rg:3", "az:3b"], "n3c": ["rg:3", "az:3b"],
}
SERVERS = jp.from_inventory([dict(name=n, cluster="xr", tags=t) for n, t in sorted(LAYOUT.items())])
WHERE = "in domain 'xr'"


def check(replicas, tags=None, cluster=None, unique="az:", servers=None):
    servers = SERVERS if servers is None else servers
    placement = dict((k, v) for k, v in (("tags", tags), ("cluster", cluster)) if v)
    return jp.check("S", WHERE, {"num_replicas": replicas, "placement": placement or None}, servers, unique, "test")


@pytest.mark.parametrize("replicas, tags", [(3, ["xr:123"]), (3, ["rg:2"]), (2, ["rg:3"]), (1, ["rg:3", "az:3b"]),
                                            (5, None), (3, ["rg:1"])])
def test_placements_the_zones_can_hold_pass(replicas, tags):
    assert check(replicas, tags) is None


def test_more_replicas_than_zones_fails_naming_stream_tags_and_zones():
    message = check(3, ["rg:3"])
    assert message.startswith("stream 'S' in domain 'xr': placement tags rg:3 cannot hold 3 replicas: ")
    assert "2 distinct 'az:' zones (az:3a: n3a; az:3b: n3b, n3c)" in message
    assert check(3, ["rg:3"], unique="") is None  # without the unique tag three servers do


def test_a_placement_naming_a_zone_turns_uniqueness_off_as_the_server_does():
    assert check(2, ["az:3b"]) is None
    assert "1 server in cluster 'xr' matches (n3a)" in check(2, ["az:3a"])


def test_no_server_with_the_tags():
    assert "no JetStream server in cluster 'xr' has them" in check(1, ["rg:9"])
    assert "placement tags xr:123, rg:1 cannot hold 2 replicas" in check(2, ["xr:123", "rg:1"])


def test_exclusions_and_servers_never_chosen():
    # an excluded zone tag turns uniqueness off too: the server strips the "!" before it looks
    assert "2 servers in cluster 'xr' match (n1b, n1c)" in check(3, ["rg:1", "!az:1a"])
    servers = jp.from_inventory([dict(name="a", cluster="c", tags=["az:1", "!jetstream"]),
                                 dict(name="b", cluster="c", tags=["az:2"]),
                                 dict(name="d", cluster="c", tags=["az:3"], jetstream=False),
                                 dict(name="e", cluster="c", tags=["rack:9"])])
    message = check(2, servers=servers)
    assert "1 distinct 'az:' zone (az:2: b)" in message and "without a 'az:' tag: e" in message


def test_tags_compare_without_case():
    assert check(3, ["XR:123"]) is None


def test_cluster_named_or_any():
    other = jp.from_inventory([dict(name="o%d" % i, cluster="other", tags=["az:o%d" % i]) for i in range(5)])
    assert check(5, servers=SERVERS + other) is None  # any cluster may take it
    assert "9 distinct" not in (check(5, cluster="other", servers=SERVERS + other) or "")
    assert "no JetStream server is in cluster 'nope' (clusters: other, xr; test)" in check(
        1, cluster="nope", servers=SERVERS + other)
    assert "in any cluster (best: 'xr')" in check(9, ["rg:1"], servers=SERVERS + other)


def test_standalone_servers_ignore_placement():
    alone = jp.from_inventory([dict(name="solo", tags=[])])
    assert check(3, ["rg:1"], servers=alone) is None


def test_what_needs_a_check():
    assert not jp.needs_check({"num_replicas": 1, "placement": None})
    assert jp.needs_check({"num_replicas": 3})
    assert jp.needs_check({"placement": {"tags": ["rg:1"]}})


def test_inventory_entries_need_names():
    with pytest.raises(jp.PlacementError, match=r"placement_servers\[1\]: name is required"):
        jp.from_inventory([dict(name="a"), dict(name=" ")])


# replies as 2.15.1 and 2.9.10 send them (trimmed)
STATZ = {"server": {"name": "n1a", "cluster": "xr", "domain": "xr", "ver": "2.15.1", "tags": ["rg:1", "az:1a"],
                    "jetstream": True}, "data": {"accounts": []}}
VARZ_215 = {"server": {"name": "n1b", "cluster": "xr", "domain": "xr", "ver": "2.15.1", "tags": ["rg:1", "az:1b"],
                       "jetstream": True},
            "data": {"tags": ["rg:1", "az:1b"], "jetstream": {"config": {"max_memory": 1, "unique_tag": "az:"}}}}
VARZ_29 = {"server": {"name": "n1c", "cluster": "xr", "domain": "xr", "ver": "2.9.10", "tags": ["rg:1", "az:1c"],
                      "jetstream": True}, "data": {"jetstream": {"config": {"max_memory": 1}}}}
VARZ_215_NONE = {"server": {"name": "n2a", "ver": "2.15.1", "jetstream": True},
                 "data": {"jetstream": {"config": {"max_memory": 1}}}}


def test_servers_from_replies():
    servers, uniques = jp.from_replies([VARZ_215, STATZ])
    assert [s.name for s in servers] == ["n1a", "n1b"] and uniques == {"az:"}
    assert servers[0] == jp.Server("n1a", "xr", "xr", ("az:1a", "rg:1"), True)
    assert jp.from_replies([STATZ])[1] == set()  # STATZ does not say
    assert jp.from_replies([VARZ_29])[1] == {None}  # 2.9 cannot say
    assert jp.from_replies([VARZ_215_NONE])[1] == {""}  # 2.10 and later omit an empty one


class _Module(object):
    check_mode = True

    def __init__(self):
        self.params = dict(domain="xr", unique_tag="az:")
        self.warnings = []

    def warn(self, text):
        self.warnings.append(text)


class _Client(object):
    """Answers each STATZ request with the next scripted list of replying servers."""

    def __init__(self, rounds):
        self.rounds = list(rounds)
        self.calls = []

    def server_infos(self, domain=None, system=False, idle=0.5):
        self.calls.append(idle)
        names = self.rounds.pop(0) if self.rounds else []
        return [{"server": {"name": n, "cluster": "xr", "domain": "xr", "tags": LAYOUT[n], "jetstream": True}}
                for n in names]


def _check_placements(rounds, tags=("rg:2",)):
    """(the scripted client, the refusal or None) of the pre-check of one stream of 3 replicas."""
    from types import SimpleNamespace

    from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import stream_model as js_stream
    from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import stream_apply as manager
    stream = manager.StreamManager(_Module(), [])
    stream.js = SimpleNamespace(where=lambda: WHERE)
    plan = SimpleNamespace(action="create", fields=[], after={"num_replicas": 3, "placement": {"tags": list(tags)}})
    client = _Client(rounds)
    try:
        stream.check_placements(client, [(SimpleNamespace(name="ORDERS"), plan, None)])
    except js_stream.StreamError as exc:
        return client, str(exc)
    return client, None


def test_a_server_missing_from_one_reply_round_is_counted_from_the_next():
    from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.stream_apply import LATE_REPLIES
    every = sorted(LAYOUT)
    # n2a misses the first two rounds, n2c answers only in the first: together they hold rg:2
    client, refused = _check_placements([[n for n in every if n != "n2a"], ["n2b"], ["n2a"]])
    assert refused is None
    assert client.calls == [0.5, LATE_REPLIES, LATE_REPLIES]
    client, refused = _check_placements([every])
    assert refused is None and client.calls == [0.5]  # nothing asked again when the first round holds it


def test_a_placement_no_round_can_hold_is_refused_after_the_last_round():
    from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.stream_apply import LATE_ROUNDS
    client, refused = _check_placements([sorted(LAYOUT)] * 5, tags=["rg:3"])
    assert re.match(r"stream 'ORDERS' in domain 'xr': placement tags rg:3 cannot hold 3 replicas: .*"
                    r"2 distinct 'az:' zones", refused), refused
    assert len(client.calls) == 1 + LATE_ROUNDS
