"""The fleet exporter's pure logic: a collection (snapshot) turned into series, Go durations, threshold
precedence, the drift file, the config's checks."""

import pytest

pytest.importorskip("prometheus_client", reason="the monitoring package's tests run in .venv (make venv)")

from nats_edge_monitor._config import ConfigError, check_config  # noqa: E402
from nats_edge_monitor.collect import Snapshot  # noqa: E402
from nats_edge_monitor.metrics import MSG_AGE_METADATA, families, parse_go_duration  # noqa: E402

NOW = 1800000000.0
KEY = "ACCOUNTKEYOFTEST"


def _config(**over):
    config = {
        "listen": {"port": 7777, "plaintext": True},
        "nats": {"servers": ["tls://127.0.0.1:4222"], "creds": "/x.creds", "ca": "/ca.pem"},
        "servers": [{"server": "hub-1", "site": "hub"}, {"server": "spoke1-1", "site": "spoke-1"}],
        "collector_site": "hub",
        "leaf_links": [{"server": "spoke1-1", "site": "spoke-1", "account": "TEST"}],
        "accounts": {KEY: "TEST"},
        "thresholds": {"hub/TEST/orders": {"max_age_seconds": 600}},
    }
    config.update(over)
    return check_config(config)


def _answer(name, domain, data):
    return {"server": {"name": name, "domain": domain, "ver": "2.15.1"}, "data": data}


def _stream(name, metadata=None, leader="hub-1", **extra):
    config = {"name": name, "max_msgs": 100, "max_bytes": -1}
    if metadata is not None:
        config["metadata"] = metadata
    stream = {"name": name, "cluster": {"leader": leader}, "config": config,
              "state": {"messages": 25, "bytes": 1000, "last_ts": "2027-01-15T08:00:00.5Z"}}
    stream.update(extra)
    return stream


def _jsz(streams, account_name=KEY):
    return {"config": {"max_storage": 1000}, "storage": 250, "memory": 0, "reserved_storage": 0,
            "account_details": [{"name": account_name, "id": KEY, "stream_detail": streams}]}


def _snapshot(hub_streams=(), edge=True, hub_leafs=None):
    answers = {"varz": {}, "jsz": {}, "leafz": {}, "healthz": {}}
    servers = [("hub-1", "hub")] + ([("spoke1-1", "spoke-1")] if edge else [])
    for name, domain in servers:
        answers["varz"][name] = _answer(name, domain, {"version": "2.15.1", "mem": 1e7, "cpu": 1.5,
                                                       "connections": 3, "slow_consumers": 2,
                                                       "cluster": {"name": "c-" + name}})
        answers["healthz"][name] = _answer(name, domain, {"status": "ok"})
        answers["jsz"][name] = _answer(name, domain, _jsz(list(hub_streams) if name == "hub-1" else []))
    default = [{"name": "spoke1-1", "account": KEY, "rtt": "1.5ms"}] if edge else []
    leafs = hub_leafs if hub_leafs is not None else default
    answers["leafz"]["hub-1"] = _answer("hub-1", "hub", {"leafs": leafs})
    return Snapshot(True, answers=answers, duration=0.25)


def _samples(result):
    return dict(((sample.name, tuple(sorted(sample.labels.items()))), sample.value)
                for family in result for sample in family.samples)


def _value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))))


@pytest.mark.parametrize("text, seconds", [
    ("90s", 90), ("5m", 300), ("1h30m", 5400), ("1.5h", 5400), ("250ms", 0.25), ("2d", 172800), ("1w", 604800),
    ("0", 0), ("+10s", 10), ("1m0.5s", 60.5), ("407\u00b5s", 407e-6), ("3us", 3e-6), ("10ns", 1e-8),
])
def test_go_durations(text, seconds):
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "5", "-5m", "5 m", "m5", "1h30", "1.2.3s", "5M", None, 300])
def test_what_is_no_go_duration(text):
    with pytest.raises(ValueError):
        parse_go_duration(text)


def test_a_snapshot_becomes_the_contract_series():
    orders = _stream("orders", consumer_detail=[{"name": "worker", "num_pending": 7, "num_ack_pending": 2,
                                                 "num_redelivered": 1}])
    agg = _stream("agg", sources=[{"name": "readings", "external": {"api": "$JS.spoke-1.API"}, "lag": 4,
                                   "active": 2500000000}],
                  mirror=None)
    local = _stream("copy", mirror={"name": "orders", "lag": 0, "active": -1})
    samples = _samples(families(_snapshot([orders, agg, local]), _config(), NOW))
    assert _value(samples, "nats_fleet_collector_connected") == 1
    assert _value(samples, "nats_fleet_servers_answered") == 2
    assert _value(samples, "nats_fleet_scrape_duration_seconds") == 0.25
    for server, site in (("hub-1", "hub"), ("spoke1-1", "spoke-1")):
        assert _value(samples, "nats_server_up", site=site, server=server) == 1
        assert _value(samples, "nats_server_info", site=site, server=server, version="2.15.1",
                      cluster="c-" + server) == 1
        assert _value(samples, "nats_server_slow_consumers_total", site=site, server=server) == 2
        assert _value(samples, "nats_server_healthy", site=site, server=server) == 1
        assert _value(samples, "nats_jetstream_storage_limit_bytes", site=site, server=server) == 1000
    assert _value(samples, "nats_leaf_link_up", site="spoke-1", server="spoke1-1", account="TEST") == 1
    assert _value(samples, "nats_leaf_link_rtt_seconds", site="spoke-1", server="spoke1-1",
                  account="TEST") == pytest.approx(0.0015)
    base = dict(site="hub", server="hub-1", account="TEST")
    assert _value(samples, "nats_stream_limit_ratio", limit="messages", stream="orders", **base) == 0.25
    assert _value(samples, "nats_stream_limit_ratio", limit="bytes", stream="orders", **base) is None
    assert _value(samples, "nats_consumer_pending_messages", stream="orders", consumer="worker", **base) == 7
    assert _value(samples, "nats_consumer_ack_pending_messages", stream="orders", consumer="worker", **base) == 2
    assert _value(samples, "nats_consumer_redelivered_messages", stream="orders", consumer="worker", **base) == 1
    source = dict(base, stream="agg", source="readings", source_site="spoke-1", kind="source")
    assert _value(samples, "nats_stream_source_lag_messages", **source) == 4
    assert _value(samples, "nats_stream_source_active_seconds", **source) == 2.5
    mirror = dict(base, stream="copy", source="orders", source_site="hub", kind="mirror")
    assert _value(samples, "nats_stream_source_lag_messages", **mirror) == 0
    assert _value(samples, "nats_stream_source_active_seconds", **mirror) is None  # never active


def test_a_source_the_server_set_up_again_keeps_counting_from_its_last_activity():
    # during a cut nats-server sets the source up again and answers active -1 ("never"): the copy still last heard
    # from its origin when it last did, and the outage budget keeps counting from then
    def agg(active):
        return _stream("agg", sources=[{"name": "readings", "external": {"api": "$JS.spoke-1.API"}, "lag": 0,
                                        "active": active}])
    source = dict(site="hub", server="hub-1", account="TEST", stream="agg", source="readings",
                  source_site="spoke-1", kind="source")
    memory = {}
    first = _samples(families(_snapshot([agg(2000000000)]), _config(), NOW, last_active=memory))
    assert _value(first, "nats_stream_source_active_seconds", **source) == 2.0
    later = _samples(families(_snapshot([agg(-1)]), _config(), NOW + 60, last_active=memory))
    assert _value(later, "nats_stream_source_active_seconds", **source) == 62.0
    back = _samples(families(_snapshot([agg(500000000)]), _config(), NOW + 90, last_active=memory))
    assert _value(back, "nats_stream_source_active_seconds", **source) == 0.5
    # a copy never heard from, by a collector that never saw it active, has no such series
    fresh = _samples(families(_snapshot([agg(-1)]), _config(), NOW, last_active={}))
    assert _value(fresh, "nats_stream_source_active_seconds", **source) is None


def test_the_newest_message_age_is_from_last_ts():
    samples = _samples(families(_snapshot([_stream("orders")]), _config(), 1800000000.0))
    labels = dict(site="hub", server="hub-1", account="TEST", stream="orders")
    # 2027-01-15T08:00:00.5Z is 1800000000.5: a message from the future (clock skew) counts as age 0
    assert _value(samples, "nats_stream_newest_message_age_seconds", **labels) == 0
    samples = _samples(families(_snapshot([_stream("orders")]), _config(), 1800000100.5))
    assert _value(samples, "nats_stream_newest_message_age_seconds", **labels) == pytest.approx(100)
    empty = _stream("orders")
    empty["state"] = {"messages": 0, "bytes": 0, "last_ts": "0001-01-01T00:00:00Z"}
    samples = _samples(families(_snapshot([empty]), _config(), NOW))
    assert _value(samples, "nats_stream_newest_message_age_seconds", **labels) is None


@pytest.mark.parametrize("metadata, threshold, error", [
    (None, 600, False),                              # the config's threshold
    ({MSG_AGE_METADATA: "5m"}, 300, False),          # metadata wins over the config
    ({MSG_AGE_METADATA: "1h30m"}, 5400, False),
    ({"other": "x"}, 600, False),
    ({MSG_AGE_METADATA: "soon"}, None, True),        # unparsable: left out, and said so
    ({MSG_AGE_METADATA: "-5m"}, None, True),
])
def test_threshold_precedence(metadata, threshold, error):
    samples = _samples(families(_snapshot([_stream("orders", metadata)]), _config(), NOW))
    labels = dict(site="hub", server="hub-1", account="TEST", stream="orders")
    assert _value(samples, "nats_stream_newest_age_threshold_seconds", **labels) == threshold
    flagged = _value(samples, "nats_fleet_config_errors", field="metadata." + MSG_AGE_METADATA, **labels)
    assert flagged == (1 if error else None)


def test_no_threshold_without_metadata_or_config_entry():
    samples = _samples(families(_snapshot([_stream("other")]), _config(), NOW))
    assert not [key for key in samples if key[0] == "nats_stream_newest_age_threshold_seconds"]


def test_a_stream_is_reported_once_by_its_leader():
    follower = _stream("orders", leader="hub-2")
    samples = _samples(families(_snapshot([follower]), _config(), NOW))
    assert not [key for key in samples if key[0] == "nats_stream_messages"]


def test_silent_and_unreached_servers():
    # the edge does not answer: declared, so up 0; its link is down
    samples = _samples(families(_snapshot(edge=False), _config(), NOW))
    assert _value(samples, "nats_server_up", site="spoke-1", server="spoke1-1") == 0
    assert _value(samples, "nats_leaf_link_up", site="spoke-1", server="spoke1-1", account="TEST") == 0
    assert _value(samples, "nats_leaf_link_rtt_seconds", site="spoke-1", server="spoke1-1", account="TEST") is None
    # no hub server reached: the collector site's servers are 0, the others unknown (left out)
    samples = _samples(families(Snapshot(False, error="refused"), _config(), NOW))
    assert _value(samples, "nats_fleet_collector_connected") == 0
    assert _value(samples, "nats_server_up", site="hub", server="hub-1") == 0
    assert not [key for key in samples if key[0] == "nats_server_up" and ("server", "spoke1-1") in key[1]]
    assert not [key for key in samples if key[0].startswith("nats_leaf_link")]


def test_leaf_links_from_the_edge_side_when_the_hub_names_none():
    # 2.9 names no remote server in LEAFZ: the edge's own LEAFZ says its link is up
    snapshot = _snapshot(hub_leafs=[{"account": KEY, "rtt": "0s"}])
    samples = _samples(families(snapshot, _config(), NOW))
    assert _value(samples, "nats_leaf_link_up", site="spoke-1", server="spoke1-1", account="TEST") == 0
    snapshot.answers["leafz"]["spoke1-1"] = _answer("spoke1-1", "spoke-1", {"leafs": [{"account": KEY,
                                                                                       "rtt": "2ms"}]})
    samples = _samples(families(snapshot, _config(), NOW))
    assert _value(samples, "nats_leaf_link_up", site="spoke-1", server="spoke1-1", account="TEST") == 1
    assert _value(samples, "nats_leaf_link_rtt_seconds", site="spoke-1", server="spoke1-1",
                  account="TEST") == pytest.approx(0.002)


def test_site_and_account_fallbacks():
    # an undeclared server: its JetStream domain; an account not in the map: its public key
    snapshot = _snapshot([_stream("orders")])
    snapshot.answers["varz"]["edge-9"] = _answer("edge-9", "spoke-9", {"version": "2.15.1"})
    config = _config(accounts={})
    samples = _samples(families(snapshot, config, NOW))
    assert _value(samples, "nats_server_up", site="spoke-9", server="edge-9") == 1
    assert _value(samples, "nats_stream_messages", site="hub", server="hub-1", account=KEY, stream="orders") == 25


def test_expiry_series():
    config = _config(certificates=[{"server": "hub-1", "site": "hub", "not_after": NOW + 100}],
                     creds=[{"account": "TEST", "user": "leaf", "site": "fleet", "expires": NOW - 5}])
    samples = _samples(families(_snapshot(), config, NOW))
    assert _value(samples, "nats_fleet_certificate_expiry_seconds", site="hub", server="hub-1") == 100
    assert _value(samples, "nats_fleet_creds_expiry_seconds", site="fleet", account="TEST", user="leaf") == -5


def test_drift_file():
    config = _config(drift_file="/var/lib/nats-edge-monitor/drift.prom")
    absent = _samples(families(_snapshot(), config, NOW, drift_text=None))
    assert _value(absent, "nats_fleet_drift_file_error") == 0
    assert [key[0] for key in absent if key[0].startswith("nats_fleet_drift_")] == ["nats_fleet_drift_file_error"]
    text = ('# HELP nats_fleet_drift_hosts hosts\n# TYPE nats_fleet_drift_hosts gauge\n'
            'nats_fleet_drift_hosts{stage="servers"} 2\nnats_fleet_drift_run_success 1\nother_metric 5\n')
    good = _samples(families(_snapshot(), config, NOW, drift_text=text))
    assert _value(good, "nats_fleet_drift_hosts", stage="servers") == 2
    assert _value(good, "nats_fleet_drift_run_success") == 1
    assert _value(good, "other_metric") is None  # only the drift families
    assert _value(good, "nats_fleet_drift_file_error") == 0
    bad = _samples(families(_snapshot(), config, NOW, drift_text='nats_fleet_drift_hosts{stage="servers" 2\n'))
    assert _value(bad, "nats_fleet_drift_file_error") == 1
    assert _value(bad, "nats_fleet_drift_hosts", stage="servers") is None
    unreadable = _samples(families(_snapshot(), config, NOW, drift_error="permission denied"))
    assert _value(unreadable, "nats_fleet_drift_file_error") == 1


@pytest.mark.parametrize("change, message", [
    (lambda c: c.pop("listen"), "listen: missing"),
    (lambda c: c["listen"].update(plaintext="yes"), "listen.plaintext: expected a boolean"),
    (lambda c: c["listen"].update(plaintext=False), "listen.cert: missing"),
    (lambda c: c["nats"].update(servers=[]), "nats.servers: empty"),
    (lambda c: c["nats"].pop("ca"), "nats.ca: missing"),
    (lambda c: c["nats"].update(timeout=True), "nats.timeout: expected a number, got a boolean"),
    (lambda c: c["leaf_links"][0].pop("account"), "leaf_links[0].account: missing"),
    (lambda c: c.update(accounts={"A": 5}), "accounts.A: expected a string"),
    (lambda c: c.update(thresholds={"a/b/c": {"max_age_seconds": 0}}), "thresholds.a/b/c.max_age_seconds"),
    (lambda c: c.update(budgets={"a/b": 60}), "budgets.a/b: the key must be site/account/stream"),
    (lambda c: c.update(budgets={"a/b/c": 0}), "budgets.a/b/c: expected a number of seconds above 0"),
    (lambda c: c.update(budgets={"a/b/c": True}), "budgets.a/b/c: expected a number of seconds above 0"),
    (lambda c: c.update(certificates=[{"server": "x", "site": "y", "not_after": "soon"}]),
     "certificates[0].not_after: expected a number"),
])
def test_config_errors_name_the_field(change, message):
    config = {
        "listen": {"port": 7777, "plaintext": True},
        "nats": {"servers": ["tls://127.0.0.1:4222"], "creds": "/x.creds", "ca": "/ca.pem"},
        "servers": [], "collector_site": "hub",
        "leaf_links": [{"server": "spoke1-1", "site": "spoke-1", "account": "TEST"}],
    }
    change(config)
    with pytest.raises(ConfigError) as raised:
        check_config(config)
    assert message in str(raised.value)


def test_a_sources_site_comes_from_its_api_prefix_a_domains_or_an_imported_ones():
    from nats_edge_monitor import metrics

    sites = {"hub", "spoke-1"}
    assert metrics._origin({"name": "t", "external": {"api": "$JS.spoke-1.API"}}, "hub", sites) == ("t", "spoke-1")
    assert metrics._origin({"name": "t", "external": {"api": "$JS.leafacc.spoke-1.API"}}, "hub", sites) == (
        "t", "spoke-1")
    assert metrics._origin({"name": "t", "external": {"api": "JS.test@hub.API"}}, "hub", sites) == ("t", "hub")
    assert metrics._origin({"name": "t"}, "spoke-1", sites) == ("t", "spoke-1")


def test_a_source_of_an_origin_with_an_outage_budget_carries_it():
    sources = [{"name": "test", "external": {"api": "$JS.spoke-1.API"}, "lag": 0, "active": 5 * 10**9},
               {"name": "other", "external": {"api": "$JS.spoke-1.API"}, "lag": 0, "active": 10**9}]
    samples = _samples(families(_snapshot([_stream("agg", sources=sources)]),
                                _config(budgets={"spoke-1/TEST/test": 4096}), NOW))
    source = dict(site="hub", server="hub-1", account="TEST", stream="agg", source_site="spoke-1", kind="source")
    assert _value(samples, "nats_stream_source_outage_budget_seconds", source="test", **source) == 4096
    assert _value(samples, "nats_stream_source_outage_budget_seconds", source="other", **source) is None
