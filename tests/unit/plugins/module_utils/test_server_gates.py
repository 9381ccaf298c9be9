"""The gates a server passes (module_utils._server_gates): judged from one endpoint's answer, and waited for."""

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils import _server_gates as gates


def test_healthz():
    assert gates.gate_problems("hub-1", "healthz", {"status": "ok"}) == []
    assert gates.gate_problems("hub-1", "healthz", {"status": "unavailable", "error": "JetStream is not current"}) == [
        "hub-1: not healthy (JetStream is not current)"]
    assert gates.gate_problems("hub-1", "healthz", None) == ["hub-1: not healthy (no answer)"]


def test_version():
    assert gates.gate_problems("e1", "varz", {"version": "2.15.1"}, version="2.15.1") == []
    assert gates.gate_problems("e1", "varz", {"version": "2.12.8"}, version="2.15.1") == ["e1: runs 2.12.8, not 2.15.1"]
    assert gates.gate_problems("e1", "varz", {"version": "2.12.8"}) == []


def test_routes_count_distinct_peers_not_pooled_connections():
    routez = {"routes": [{"remote_name": "hub-2"}, {"remote_name": "hub-2"}, {"remote_name": "hub-2"}]}
    assert gates.gate_problems("hub-1", "routez", routez, peers=2) == ["hub-1: routes to 1 of 2 peers (hub-2)"]
    routez["routes"].append({"remote_name": "hub-3"})
    assert gates.gate_problems("hub-1", "routez", routez, peers=2) == []


def test_leafs():
    leafz = {"leafnodes": 1, "leafs": [{"name": "site-1"}]}
    assert gates.gate_problems("hub-1", "leafz", leafz, leafnodes=1) == []
    assert gates.gate_problems("e1", "leafz", {"leafnodes": 0}, leafnodes=1) == ["e1: 0 of 1 leaf connections"]
    assert gates.gate_problems("hub-1", "leafz", leafz, leafs=["site-1", "site-2"]) == [
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
    assert gates.gate_problems("hub-1", "jsz", jsz(streams=[stream("ORDERS", "hub-1", ok)])) == []


def test_jetstream_meta_without_leader():
    assert gates.gate_problems("hub-2", "jsz", jsz(leader="")) == ["hub-2: JetStream has no meta leader"]


def test_jetstream_lagging_and_offline_replicas_are_named_by_their_leader():
    bad = [{"name": "hub-2", "current": False, "lag": 120}, {"name": "hub-3", "current": True, "lag": 3},
           {"name": "hub-4", "current": False, "offline": True}]
    problems = gates.gate_problems("hub-1", "jsz", jsz(streams=[stream("ORDERS", "hub-1", bad)]))
    assert problems == ["hub-1: stream ORDERS (account $G): replica hub-2 not current (lag 120)",
                        "hub-1: stream ORDERS (account $G): replica hub-3 lags 3",
                        "hub-1: stream ORDERS (account $G): replica hub-4 offline"]
    assert gates.gate_problems("hub-1", "jsz", jsz(streams=[stream("ORDERS", "hub-1", bad[1:2])]), max_lag=5) == []
    # a follower does not judge the others: their leader does
    assert gates.gate_problems("hub-2", "jsz", jsz(streams=[stream("ORDERS", "hub-1", bad)])) == []


def test_jetstream_stream_without_leader():
    problems = gates.gate_problems("hub-2", "jsz", jsz(streams=[stream("ORDERS", "", [{"name": "hub-1"}])]))
    assert problems == ["hub-2: stream ORDERS (account $G) has no leader"]


def test_single_server_jetstream_passes_without_a_meta_group():
    single = {"config": {"max_memory": 1}, "account_details": [{"name": "$G", "stream_detail": [
        {"name": "LOCAL", "cluster": {"leader": "e1"}}]}]}
    assert gates.gate_problems("e1", "jsz", single) == []
    assert gates.gate_problems("e1", "jsz", {}) == ["e1: no JetStream report"]


def test_unknown_endpoint():
    with pytest.raises(ValueError):
        gates.gate_problems("e1", "connz", {})


class Clock(object):
    """A clock that moves only when the wait sleeps."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def answers(monkeypatch, *replies):
    """The status page read (HostReader.json_url) answers ``replies`` in turn (the last one again once they run out)."""
    replies = list(replies)
    read = []

    def fake(url, timeout, ca_path=None, error_body=False):
        assert error_body  # a 503 with its reason is an answer
        read.append((url, timeout, ca_path))
        return replies.pop(0) if len(replies) > 1 else replies[0]
    monkeypatch.setattr(gates.HostReader, "json_url", staticmethod(fake))
    return read


def test_the_wait_ends_at_the_first_answer_that_passes(monkeypatch):
    clock = Clock()
    read = answers(monkeypatch, (None, "connection refused"), ({"status": "unavailable", "error": "JetStream not current"}, ""),
                   ({"status": "ok"}, ""))
    found = gates.wait_for_gate(lambda data: gates.gate_problems("e1", "healthz", data), "https://127.0.0.1:8222/healthz",
                                timeout=30, interval=1, ca_path="/ca.pem", clock=clock, sleep=clock.sleep)
    assert found == {"json": {"status": "ok"}, "problems": [], "attempts": 3, "waited": 2.0}
    assert read[0] == ("https://127.0.0.1:8222/healthz", 10.0, "/ca.pem")


def test_a_wait_that_runs_out_reports_the_last_answer_and_why_nothing_answered(monkeypatch):
    clock = Clock()
    answers(monkeypatch, (None, "connection refused"))
    found = gates.wait_for_gate(lambda data: gates.gate_problems("e1", "healthz", data), "http://127.0.0.1:8222/healthz",
                                timeout=5, interval=1, clock=clock, sleep=clock.sleep)
    assert found["problems"] == ["e1: not healthy (no answer) (connection refused)"]
    assert found["attempts"] == 6 and found["waited"] == 5.0 and found["json"] is None


def test_a_timeout_of_zero_reads_once(monkeypatch):
    clock = Clock()
    answers(monkeypatch, ({"version": "2.12.8"}, ""))
    found = gates.wait_for_gate(lambda data: gates.gate_problems("e1", "varz", data, version="2.15.1"),
                                "http://127.0.0.1:8222/varz", timeout=0, clock=clock, sleep=clock.sleep)
    assert found["attempts"] == 1 and found["problems"] == ["e1: runs 2.12.8, not 2.15.1"]


def test_a_config_counts_as_loaded_only_after_the_time_given():
    varz = {"config_load_time": "2026-11-28T06:00:05.5Z"}
    loaded = gates.loaded_problems("e1", varz, after=1795845605.0)  # 06:00:05 UTC
    assert loaded == []
    assert gates.loaded_problems("e1", varz, after=1795845606.0) == [
        "e1: still runs the config it loaded at 2026-11-28T06:00:05.5Z"]
    assert gates.loaded_problems("e1", None, after=0) == ["e1: no config load time (no answer)"]
