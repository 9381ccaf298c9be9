"""The order a rollout takes and the gates each node must pass (plugin_utils._rollout)."""

import pytest

from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _rollout as ro


def test_hub_goes_one_by_one_with_the_meta_leader_last():
    hub = {"hub-1": "hub", "hub-2": "hub", "hub-3": "hub"}
    assert ro.rollout_order(["hub-1", "hub-2", "hub-3"], hub, ["hub-1"]) == ["hub-2", "hub-3", "hub-1"]
    assert ro.rollout_order(["hub-1", "hub-2", "hub-3"], hub, []) == ["hub-1", "hub-2", "hub-3"]


def test_unhealthy_nodes_go_first():
    # a node that is down cannot get worse; the others' turn would fail their pre-gate while it is down
    hub = {"hub-1": "hub", "hub-2": "hub", "hub-3": "hub"}
    order = ro.rollout_order(["hub-1", "hub-2", "hub-3"], hub, ["hub-2"], first=["hub-3"])
    assert order == ["hub-3", "hub-1", "hub-2"]


def test_edges_are_grouped_by_site_in_inventory_order():
    sites = {"a1": "a", "b1": "b", "a2": "a", "c1": "c"}
    assert ro.rollout_order(["a1", "b1", "a2", "c1"], sites) == ["a1", "a2", "b1", "c1"]


def test_rounds_put_the_nodes_of_a_site_one_after_another():
    sites = {"a1": "a", "a2": "a", "a3": "a", "b1": "b", "c1": "c", "c2": "c"}
    assert ro.rollout_rounds(["a1", "a2", "a3", "b1", "c1", "c2"], sites) == {
        "a1": 0, "a2": 1, "a3": 2, "b1": 0, "c1": 0, "c2": 1}


def test_healthz():
    assert ro.gate_problems("hub-1", "healthz", {"status": "ok"}) == []
    assert ro.gate_problems("hub-1", "healthz", {"status": "unavailable", "error": "JetStream is not current"}) == [
        "hub-1: not healthy (JetStream is not current)"]
    assert ro.gate_problems("hub-1", "healthz", None) == ["hub-1: not healthy (no answer)"]


def test_version():
    assert ro.gate_problems("e1", "varz", {"version": "2.15.1"}, version="2.15.1") == []
    assert ro.gate_problems("e1", "varz", {"version": "2.12.8"}, version="2.15.1") == ["e1: runs 2.12.8, not 2.15.1"]
    assert ro.gate_problems("e1", "varz", {"version": "2.12.8"}) == []


def test_routes_count_distinct_peers_not_pooled_connections():
    routez = {"routes": [{"remote_name": "hub-2"}, {"remote_name": "hub-2"}, {"remote_name": "hub-2"}]}
    assert ro.gate_problems("hub-1", "routez", routez, peers=2) == ["hub-1: routes to 1 of 2 peers (hub-2)"]
    routez["routes"].append({"remote_name": "hub-3"})
    assert ro.gate_problems("hub-1", "routez", routez, peers=2) == []


def test_leafs():
    leafz = {"leafnodes": 1, "leafs": [{"name": "site-1"}]}
    assert ro.gate_problems("hub-1", "leafz", leafz, leafnodes=1) == []
    assert ro.gate_problems("e1", "leafz", {"leafnodes": 0}, leafnodes=1) == ["e1: 0 of 1 leaf connections"]
    assert ro.gate_problems("hub-1", "leafz", leafz, leafs=["site-1", "site-2"]) == [
        "hub-1: leaf nodes not back: site-2"]


def jsz(leader="hub-1", replicas=None, streams=()):
    return {"meta_cluster": {"leader": leader, "cluster_size": 3,
                             "replicas": replicas if replicas is not None else [
                                 {"name": "hub-2", "current": True}, {"name": "hub-3", "current": True}]},
            "account_details": [{"name": "$G", "stream_detail": list(streams)}]}


def stream(name, leader, replicas):
    return {"name": name, "cluster": {"leader": leader, "replicas": replicas}}


def test_jetstream_current():
    ok = [{"name": "hub-2", "current": True, "lag": 0}, {"name": "hub-3", "current": True}]
    assert ro.gate_problems("hub-1", "jsz", jsz(streams=[stream("ORDERS", "hub-1", ok)])) == []


def test_jetstream_meta_without_leader():
    assert ro.gate_problems("hub-2", "jsz", jsz(leader="")) == ["hub-2: JetStream has no meta leader"]


def test_jetstream_lagging_and_offline_replicas_are_named_by_their_leader():
    bad = [{"name": "hub-2", "current": False, "lag": 120}, {"name": "hub-3", "current": True, "lag": 3},
           {"name": "hub-4", "current": False, "offline": True}]
    problems = ro.gate_problems("hub-1", "jsz", jsz(streams=[stream("ORDERS", "hub-1", bad)]))
    assert problems == ["hub-1: stream ORDERS (account $G): replica hub-2 not current (lag 120)",
                        "hub-1: stream ORDERS (account $G): replica hub-3 lags 3",
                        "hub-1: stream ORDERS (account $G): replica hub-4 offline"]
    assert ro.gate_problems("hub-1", "jsz", jsz(streams=[stream("ORDERS", "hub-1", bad[1:2])]), max_lag=5) == []
    # a follower does not judge the others: their leader does
    assert ro.gate_problems("hub-2", "jsz", jsz(streams=[stream("ORDERS", "hub-1", bad)])) == []


def test_jetstream_stream_without_leader():
    problems = ro.gate_problems("hub-2", "jsz", jsz(streams=[stream("ORDERS", "", [{"name": "hub-1"}])]))
    assert problems == ["hub-2: stream ORDERS (account $G) has no leader"]


def test_single_server_jetstream_passes_without_a_meta_group():
    single = {"config": {"max_memory": 1}, "account_details": [{"name": "$G", "stream_detail": [
        {"name": "LOCAL", "cluster": {"leader": "e1"}}]}]}
    assert ro.gate_problems("e1", "jsz", single) == []
    assert ro.gate_problems("e1", "jsz", {}) == ["e1: no JetStream report"]


def test_unknown_endpoint():
    with pytest.raises(ValueError):
        ro.gate_problems("e1", "connz", {})


@pytest.mark.parametrize("canaries, expected", [
    (["c"], ["c1", "a1", "a2", "b1"]),
    (["b1", "c"], ["b1", "c1", "a1", "a2"]),  # a host stands for its site
    (["a2", "a"], ["a1", "a2", "b1", "c1"]),  # a site named twice goes once
    (["zz"], ["a1", "a2", "b1", "c1"]),  # a site not in this rollout (offline, or left out) is no matter
])
def test_canary_sites_go_first_in_the_order_named(canaries, expected):
    sites = {"a1": "a", "a2": "a", "b1": "b", "c1": "c"}
    assert ro.rollout_order(["a1", "b1", "a2", "c1"], sites, canaries=canaries) == expected
