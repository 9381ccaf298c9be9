"""The monitoring stage's planning on the controller (plugin_utils._monitoring): settings checked by the kind their
name ends in, and what the collector is told about the fleet."""

import pytest

from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _monitoring as m

SPOKE = {"nats_server_jetstream_domain": "spoke-1",
         "nats_server_leafnode_remotes": [{"hub_group": "hub", "account": "TEST"},
                                          {"hub_group": "hub", "account": "TELEMETRY"}],
         "nats_streams": [{"name": "test", "metadata": {"io.nats.monitor.msg-age": "1h30m"}}, {"name": "plain"}]}
HOSTVARS = {"hub-1": {"nats_server_jetstream_domain": "hub", "nats_server_advertise_host": "hub-1.example"},
            "spoke1-1": SPOKE, "spoke1-2": dict(SPOKE)}
SERVERS = ["hub-1", "spoke1-1", "spoke1-2"]


@pytest.mark.parametrize("name,value,message", [
    ("nats_monitoring_site_down_for", 5, "5 is not a Prometheus duration"),
    ("nats_monitoring_site_down_for", "5 minutes", "'5 minutes' is not a Prometheus duration"),
    ("nats_monitoring_stale_for", "1m5h", "is not a Prometheus duration"),  # units out of order
    ("nats_monitoring_stream_limit_ratio", 0, "0 is not a ratio"),
    ("nats_monitoring_stream_limit_ratio", 1.5, "1.5 is not a ratio"),
    ("nats_monitoring_expiry_days", 2.5, "2.5 is not a whole number"),
    ("nats_monitoring_source_lag_messages", -1, "-1 cannot be negative"),
    ("nats_monitoring_source_lag_messages", True, "True is not a number"),
    ("nats_monitoring_server_down_severity", "page", "'page' is not a severity"),
    ("nats_monitoring_prometheus_port", 70000, "70000 is not a TCP port"),
    ("nats_monitoring_absent_hold", "ten", "is not a Prometheus duration"),
])
def test_a_setting_of_the_wrong_kind_is_refused_naming_it(name, value, message):
    with pytest.raises(m.MonitoringError) as error:
        m.check_setting(name, value)
    assert str(error.value).startswith(name + ": ") and message in str(error.value)


@pytest.mark.parametrize("name,value,want", [
    ("nats_monitoring_site_down_for", "1h30m", "1h30m"), ("nats_monitoring_stream_limit_ratio", "0.9", 0.9),
    ("nats_monitoring_expiry_days", "14", 14), ("nats_monitoring_web_user", "anything", "anything"),
])
def test_good_settings_pass_numbers_given_as_text_made_numbers(name, value, want):
    assert m.check_setting(name, value) == want


def test_hosts_the_settings_name_must_be_nats_servers_of_the_inventory():
    with pytest.raises(m.MonitoringError, match=r"nats_monitoring_collect_from\[1\]: the host 'hub-9' is not in"):
        m.check({"nats_monitoring_collect_from": ["hub-1", "hub-9"]}, HOSTVARS, list(HOSTVARS) + ["ctl"], SERVERS, [])
    with pytest.raises(m.MonitoringError, match=r"\[0\]: the host 'ctl' runs no nats-server"):
        m.check({"nats_monitoring_collect_from": ["ctl"]}, HOSTVARS, list(HOSTVARS) + ["ctl"], SERVERS, [])
    with pytest.raises(m.MonitoringError, match="the monitoring host 'mon' is not in the inventory"):
        m.check({}, HOSTVARS, list(HOSTVARS), SERVERS, ["mon"])


def test_the_preflight_checks_each_monitoring_hosts_own_settings_named_with_the_host():
    hostvars = dict(HOSTVARS, mon={"nats_monitoring_stale_for": 300})
    with pytest.raises(m.MonitoringError, match=r"^mon: nats_monitoring_stale_for: 300 is not a Prometheus duration"):
        m.check({}, hostvars, list(hostvars), SERVERS, ["mon"], from_hosts=True)


def test_stream_age_thresholds_come_from_each_sites_streams_metadata():
    assert m.thresholds(HOSTVARS, SERVERS, "TEST") == {"spoke-1/TEST/test": {"max_age_seconds": 5400.0}}
    bad = dict(HOSTVARS, **{"spoke1-1": dict(SPOKE, nats_streams=[{"name": "t", "metadata": {m.MSG_AGE_KEY: 5}}])})
    with pytest.raises(m.MonitoringError, match=r"^spoke1-1: nats_streams\[0\] \(t\)\.metadata\[io\.nats\.monitor\.msg-age\]"
                                                r": 5 is not a duration string"):
        m.thresholds(bad, SERVERS)


def test_each_edge_servers_links_include_the_system_accounts_monitoring_link():
    links = m.leaf_links(HOSTVARS, SERVERS, "SYS")
    assert [(link["server"], link["account"]) for link in links] == [
        ("spoke1-1", "TEST"), ("spoke1-1", "TELEMETRY"), ("spoke1-1", "SYS"),
        ("spoke1-2", "TEST"), ("spoke1-2", "TELEMETRY"), ("spoke1-2", "SYS")]
    assert {link["site"] for link in links} == {"spoke-1"}
    assert all(link["account"] != "SYS" for link in m.leaf_links(HOSTVARS, SERVERS, "SYS", monitor_links=False))


def test_the_collector_reaches_the_hub_by_the_names_its_certificates_state(tmp_path):
    plan = m.targets(HOSTVARS, SERVERS, str(tmp_path), "OP", ["hub-1"], "SYS", "TEST")
    assert plan["urls"] == ["tls://hub-1.example:4222"]
    assert plan["collector_site"] == "hub"
    assert plan["servers"] == [{"server": "hub-1", "site": "hub"}, {"server": "spoke1-1", "site": "spoke-1"},
                               {"server": "spoke1-2", "site": "spoke-1"}]
    assert plan["certificates"] == [] and plan["creds"] == [] and plan["accounts"] == {}


def test_links_resolved_to_public_keys_by_the_servers_stage_are_named_again():
    resolved = dict(HOSTVARS, **{"spoke1-1": dict(SPOKE, nats_server_leafnode_remotes=[
        {"account": "AKEYTEST", "credentials": "/etc/nats-server/creds/leaf.creds"},
        {"account": "AKEYSYS", "credentials": "/etc/nats-server/creds/leafmon.creds"}])})
    links = m.leaf_links(resolved, ["hub-1", "spoke1-1"], "SYS", names={"AKEYTEST": "TEST", "AKEYSYS": "SYS"})
    assert [link["account"] for link in links] == ["TEST", "SYS"]


def test_the_collector_is_told_each_origins_outage_budget():
    account = [{"name": "TEST", "users": [{"name": "u"}]}]
    site = dict(SPOKE, nats_accounts=account, nats_fleet_default_account="TEST",
                nats_streams=[{"name": "test", "subjects": ["test.>"], "max_age": "2h"}],
                nats_fleet_outage={"survive": "1h", "write_rate": {"messages": 1}})
    hub = dict(HOSTVARS["hub-1"], nats_accounts=account, nats_fleet_default_account="TEST",
               nats_streams=[{"name": "agg", "subjects": ["agg"], "sources": [{"name": "test", "domain": "spoke-1"}]}])
    hostvars = {"hub-1": hub, "spoke1-1": site, "spoke1-2": dict(site)}
    assert m.budgets(hostvars, SERVERS) == {"spoke-1/TEST/test": 7200.0}
    assert m.budgets(HOSTVARS, SERVERS) == {}  # no site declares one
    hostvars["spoke1-1"] = dict(site, nats_fleet_outage={"survive": "3h", "write_rate": {"messages": 1}})
    with pytest.raises(m.MonitoringError, match=r"^the fleet's data \(as the preflight of site.yml checks it\): "
                                                r"spoke-1: stream 'test' in account 'TEST' \(copied by hub/agg\): "
                                                r"max_age 2h keeps 2h of writes"):
        m.budgets(hostvars, SERVERS)
