"""Regional aggregation: nats_fleet_aggregates made into regional streams (and a total) of the aggregating domain."""

import pytest

from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _aggregates, _fleet

DOMAINS = ["hub", "eu-1", "eu-2", "us-1", "us-2", "ap-1"]
TELEMETRY = {"name": "telemetry", "account": "TELEMETRY", "origin": "telemetry-{site}",
             "regions": {"eu": ["eu-*"], "us": ["us-1", "us-2"]}}


def test_each_region_sources_its_sites_and_the_total_sources_the_regions():
    made = _aggregates.streams([dict(TELEMETRY, total=True, stream={"replicas": 3, "max_age": "7d"})], DOMAINS, "hub")
    assert made == [
        {"name": "telemetry-eu", "account": "TELEMETRY", "replicas": 3, "max_age": "7d",
         "sources": [{"name": "telemetry-eu-1", "domain": "eu-1"}, {"name": "telemetry-eu-2", "domain": "eu-2"}]},
        {"name": "telemetry-us", "account": "TELEMETRY", "replicas": 3, "max_age": "7d",
         "sources": [{"name": "telemetry-us-1", "domain": "us-1"}, {"name": "telemetry-us-2", "domain": "us-2"}]},
        {"name": "telemetry", "account": "TELEMETRY", "replicas": 3, "max_age": "7d",
         "sources": [{"name": "telemetry-eu"}, {"name": "telemetry-us"}]}]
    # without a total, only the regions; a site of no region is left out
    assert [s["name"] for s in _aggregates.streams([TELEMETRY], DOMAINS, "hub")] == ["telemetry-eu", "telemetry-us"]


def test_the_aggregating_domain_is_never_a_site_of_its_own_aggregate():
    made = _aggregates.streams([dict(TELEMETRY, regions={"all": ["*"]})], DOMAINS, "hub")
    assert [source["domain"] for source in made[0]["sources"]] == ["eu-1", "eu-2", "us-1", "us-2", "ap-1"]


@pytest.mark.parametrize("aggregate, fragment", [
    ("telemetry", "nats_fleet_aggregates[0]: expected a mapping with name, origin and regions, got 'telemetry'"),
    (dict(TELEMETRY, region={}), "nats_fleet_aggregates[0] (telemetry): unknown key region"),
    (dict(TELEMETRY, origin=None), "nats_fleet_aggregates[0] (telemetry).origin: a string is required"),
    (dict(TELEMETRY, origin="telemetry"), ".origin: 'telemetry' names each site's stream with {site}"),
    (dict(TELEMETRY, origin="t-{site}-{region}"), "and nothing else in braces"),
    (dict(TELEMETRY, regions=[]), ".regions: a mapping of each region to its sites"),
    (dict(TELEMETRY, regions={"eu": []}), ".regions.eu: a list of JetStream domains or patterns of them is required"),
    (dict(TELEMETRY, regions={"eu": ["mars-*"]}),
     ".regions.eu: 'mars-*' matches no JetStream domain of the fleet's other sites (eu-1, eu-2, us-1, us-2, ap-1)"),
    (dict(TELEMETRY, regions={"eu": ["eu-*"], "all": ["*"]}),
     ".regions.all: site 'eu-1' is in region 'eu' too; a site belongs to one region"),
    (dict(TELEMETRY, stream={"sources": []}), ".stream: sources: the aggregate sets these itself"),
    (dict(TELEMETRY, stream="R3"), ".stream: expected the options of every stream it makes"),
])
def test_an_aggregate_the_fleet_cannot_make_is_refused_naming_it_and_the_field(aggregate, fragment):
    with pytest.raises(_aggregates.AggregateError) as raised:
        _aggregates.streams([aggregate], DOMAINS, "hub")
    assert fragment in str(raised.value)


def site(domain, **extra):
    return dict(nats_server_jetstream_domain=domain, nats_fleet_default_account="T",
                nats_accounts=[{"name": "T", "users": [{"name": "u"}]}],
                nats_streams=[{"name": "tel-" + domain, "subjects": ["tel.%s.>" % domain]}], **extra)


def test_the_preflight_checks_the_streams_an_aggregate_makes_and_their_origins_budgets():
    aggregate = {"name": "tel", "origin": "tel-{site}", "regions": {"a": ["s1"], "b": ["s2"]}, "total": True}
    hub = dict(site("hub"), nats_fleet_aggregates=[aggregate])
    outage = {"survive": "1h", "write_rate": {"messages": 1, "bytes": "1KiB"}}
    hostvars = {"h1": hub, "s1-1": site("s1", nats_fleet_outage=outage), "s2-1": site("s2")}
    checked = _fleet.check_hosts(hostvars, sorted(hostvars), budgets=True)
    # its account and user, the hub's own stream and the three the aggregate makes
    assert checked["hosts"]["h1"] == 6
    assert [(row["site"], row["stream"], row["copied_by"]) for row in checked["budgets"]] == [
        ("s1", "tel-s1", ["hub/tel-a"])]
    # what the aggregate makes is checked as any stream: here a name the hub already has
    hub["nats_streams"] = [{"name": "tel-a", "subjects": ["a"]}]
    with pytest.raises(_fleet.FleetError, match=r"hub: nats_fleet_aggregates\[0\] \(tel\): stream 'tel-a' in account "
                                                r"'T' is declared more than once"):
        _fleet.check_hosts(hostvars, sorted(hostvars))
    hub["nats_fleet_aggregates"] = aggregate  # one, not a list of them
    with pytest.raises(_fleet.FleetError, match=r"hub: nats_fleet_aggregates: expected a list of aggregates"):
        _fleet.check_hosts(hostvars, sorted(hostvars))
    hub["nats_fleet_aggregates"] = [dict(aggregate, regions={"a": ["s9"]})]
    with pytest.raises(_fleet.FleetError, match=r"hub: nats_fleet_aggregates\[0\] \(tel\).regions.a: 's9' matches no"):
        _fleet.check_hosts(hostvars, sorted(hostvars))


def test_a_durable_aggregate_reads_each_site_through_a_consumer_the_site_makes():
    durable = dict(TELEMETRY, durable=True, total=True)
    made = _aggregates.streams([durable], DOMAINS, "hub")
    assert made[0]["sources"][0] == {"name": "telemetry-eu-1", "domain": "eu-1", "consumer": {
        "name": "telemetry-eu-hub", "deliver_subject": "_nats_edge.src.hub.telemetry-eu.eu-1"}}
    # the total reads the regions in its own domain, with the server's own consumers
    assert made[-1]["sources"] == [{"name": "telemetry-eu"}, {"name": "telemetry-us"}]
    aggregating = {"hub": ([durable, dict(TELEMETRY, name="logs", origin="logs-{site}")], "TEST"),
                   "us-1": ([], "TEST")}
    # the site eu-2 makes the consumer the region eu reads it through, in the stream's account; logs is not durable
    assert _aggregates.consumers(aggregating, "eu-2", DOMAINS) == [
        {"name": "telemetry-eu-hub", "deliver_subject": "_nats_edge.src.hub.telemetry-eu.eu-2",
         "stream": "telemetry-eu-2", "ack_policy": "flow_control", "account": "TELEMETRY"}]
    # without an account of its own, the aggregating domain's default account; none for the hub itself or ap-1
    aggregating["hub"] = ([dict(durable, account=None)], "TEST")
    assert [c["account"] for c in _aggregates.consumers(aggregating, "us-1", DOMAINS)] == ["TEST"]
    assert _aggregates.consumers(aggregating, "hub", DOMAINS) == _aggregates.consumers(aggregating, "ap-1", DOMAINS) == []
    # an aggregate its domain refuses makes no consumer anywhere (the domain's preflight names it)
    aggregating["hub"] = ([dict(durable, durable="yes")], "TEST")
    assert _aggregates.consumers(aggregating, "eu-1", DOMAINS) == []


@pytest.mark.parametrize("aggregate, own, fragment", [
    (dict(TELEMETRY, durable="yes"), "hub", ".durable: true or false is required, got 'yes'"),
    (dict(TELEMETRY, durable=True), "", ".durable: the aggregating servers need a JetStream domain"),
])
def test_a_durable_aggregate_the_fleet_cannot_make_is_refused(aggregate, own, fragment):
    with pytest.raises(_aggregates.AggregateError) as raised:
        _aggregates.streams([aggregate], DOMAINS, own)
    assert fragment in str(raised.value)


def test_the_preflight_checks_the_consumers_a_durable_aggregate_makes_at_the_sites():
    aggregate = {"name": "tel", "origin": "tel-{site}", "regions": {"a": ["s1", "s2"]}, "durable": True}
    hostvars = {"h1": dict(site("hub"), nats_fleet_aggregates=[aggregate]), "s1-1": site("s1"), "s2-1": site("s2")}
    checked = _fleet.check_hosts(hostvars, sorted(hostvars))
    # each site: its account and user, its stream, and the consumer the region reads it through
    assert (checked["s1-1"], checked["s2-1"]) == (4, 4), checked
    assert _fleet.host_consumers(hostvars["s1-1"], _fleet.aggregating(hostvars, sorted(hostvars)), ["hub", "s1", "s2"]) == [
        {"name": "tel-a-hub", "deliver_subject": "_nats_edge.src.hub.tel-a.s1", "stream": "tel-s1",
         "ack_policy": "flow_control", "account": "T"}]
    # a consumer the site declares under the same name is refused, naming both
    hostvars["s1-1"]["nats_consumers"] = [{"stream": "tel-s1", "name": "tel-a-hub", "durable_name": "tel-a-hub"}]
    with pytest.raises(_fleet.FleetError, match=r"s1: .*tel-a-hub"):
        _fleet.check_hosts(hostvars, sorted(hostvars))


def test_a_run_limited_to_some_hosts_plans_the_regions_of_the_whole_fleet():
    """--limit leaves hosts out of the play, not out of the fleet: a region sourcing two sites keeps both when the
    run holds one of them (a source dropped and added back is copied again from its start), and a site alone in the
    run still makes the consumer its durable region reads it through."""
    aggregate = {"name": "tel", "origin": "tel-{site}", "regions": {"a": ["s*"]}, "durable": True}
    hostvars = {"h1": dict(site("hub"), nats_fleet_aggregates=[aggregate]), "s1-1": site("s1"), "s2-1": site("s2")}
    fleet = sorted(hostvars)
    whole = _fleet.check_hosts(hostvars, fleet)
    limited = _fleet.check_hosts(hostvars, ["h1", "s1-1"], fleet=fleet)
    assert limited == dict((host, whole[host]) for host in ("h1", "s1-1")), (limited, whole)
    # the streams stage plans the region from the domains of the inventory (the fleet), not of the run
    for hosts, sites in ((fleet, ["s1", "s2"]), (["h1", "s1-1"], ["s1"])):
        streams, _labels = _fleet.host_streams(hostvars["h1"], list(_fleet.domains(hostvars, hosts)))
        assert [source["domain"] for source in streams[-1]["sources"]] == sites
    # without the fleet, a run of the hub alone is refused
    with pytest.raises(_fleet.FleetError, match=r"regions.a: 's\*' matches no JetStream domain"):
        _fleet.check_hosts(hostvars, ["h1"])
    assert _fleet.check_hosts(hostvars, ["h1"], fleet=fleet) == {"h1": whole["h1"]}
    # the site alone: its consumer for the hub's durable region is planned and checked
    assert _fleet.check_hosts(hostvars, ["s2-1"], fleet=fleet) == {"s2-1": whole["s2-1"]} == {"s2-1": 4}
