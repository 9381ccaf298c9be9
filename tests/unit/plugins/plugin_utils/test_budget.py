"""Outage budgets: each origin's limits at its site's declared rate, refused when shorter than the site must survive."""

import pytest

from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _budget, _fleet

ACCOUNTS = [{"name": "T", "users": [{"name": "u"}], "jetstream": {"disk_storage": "1GiB", "mem_storage": "64MiB"}}]
RATE = {"messages": 50, "bytes": "32KiB"}


def fleet(*origins, outage=None, hub_sources=None):
    """A hub sourcing stream ``tel`` from site s1, whose streams are ``origins``."""
    site = dict(nats_server_jetstream_domain="s1", nats_accounts=ACCOUNTS, nats_fleet_default_account="T",
                nats_streams=list(origins) or [{"name": "tel", "subjects": ["tel.>"]}])
    if outage is not None:
        site["nats_fleet_outage"] = outage
    hub = dict(nats_server_jetstream_domain="hub", nats_accounts=ACCOUNTS, nats_fleet_default_account="T",
               nats_streams=[{"name": "agg", "subjects": ["agg"],
                              "sources": hub_sources or [{"name": "tel", "domain": "s1"}]}])
    return {"h1": hub, "s1-1": site, "s1-2": dict(site)}


def budgets(hostvars):
    return _fleet.check_hosts(hostvars, sorted(hostvars), budgets=True)["budgets"]


def refused(hostvars):
    with pytest.raises(_fleet.FleetError) as raised:
        _fleet.check_hosts(hostvars, sorted(hostvars))
    return str(raised.value)


def test_a_fleet_without_budgets_has_none_and_check_hosts_returns_its_counts():
    hostvars = fleet()
    assert budgets(hostvars) == []
    assert _fleet.check_hosts(hostvars, sorted(hostvars)) == {"h1": 3, "s1-1": 3, "s1-2": 3}


def test_the_shortest_limit_gives_the_budget_and_what_ends_it():
    outage = {"survive": "30m", "write_rate": RATE}
    stream = {"name": "tel", "subjects": ["tel.>"], "max_bytes": "64MiB", "max_age": "2h", "max_msgs": 1000000}
    [row] = budgets(fleet(stream, {"name": "local", "subjects": ["local"]}, outage=outage))
    # 64 MiB at 32 KiB/s: 2048 s, before max_msgs (20,000 s), max_age (7,200 s) and the account (32,768 s)
    assert (row["site"], row["account"], row["stream"], row["copied_by"]) == ("s1", "T", "tel", ["hub/agg"])
    assert row["budget"] == 2048 and row["survive"] == 1800 and not row["short"]
    assert row["limit"] == "max_bytes 64MiB at 32KiB/s"
    assert row["text"] == ("s1: stream 'tel' in account 'T' (copied by hub/agg): keeps 34m8s of writes cut off "
                           "(max_bytes 64MiB at 32KiB/s, then discard: old drops the oldest messages); must survive "
                           "30m and 2m to resume: ok")


@pytest.mark.parametrize("stream, rate, budget, limit, effect", [
    ({"max_age": "10m"}, RATE, 600, "max_age 10m", "expire"),
    ({"max_msgs": 12000, "discard": "new"}, RATE, 240, "max_msgs 12,000 at 50/s", "discard: new refuses"),
    ({"max_msgs": 6000}, {"messages": 0.5, "bytes": "1KiB"}, 12000, "max_msgs 6,000 at 0.5/s", "discard: old drops"),
    # no stream limit: the account's disk storage, at the rate of its origins at the site
    ({}, {"bytes": "1MiB"}, 1024, "account T's jetstream.disk_storage 1GiB at 1MiB/s", "the account refuses"),
    # a memory stream counts against mem_storage, once per replica
    ({"storage": "memory", "replicas": 2}, {"bytes": "32KiB"}, 1024,
     "account T's jetstream.mem_storage 64MiB at 64KiB/s", "the account refuses"),
])
def test_each_limit_and_what_happens_when_it_ends(stream, rate, budget, limit, effect):
    [row] = budgets(fleet(dict(stream, name="tel", subjects=["tel.>"]), outage={"survive": "1m", "write_rate": rate}))
    assert (row["budget"], row["limit"]) == (budget, limit)
    assert effect in row["effect"]


def test_an_account_shares_its_storage_among_its_origins_at_the_site():
    outage = {"survive": "1m", "write_rate": {"bytes": "512KiB"}, "streams": {"T/two": {"bytes": "512KiB"}}}
    rows = budgets(fleet({"name": "tel", "subjects": ["tel.>"]}, {"name": "two", "subjects": ["two"]}, outage=outage,
                         hub_sources=[{"name": "tel", "domain": "s1"}, {"name": "two", "domain": "s1"}]))
    assert [(row["stream"], row["budget"]) for row in rows] == [("tel", 1024), ("two", 1024)]


def test_a_tiered_account_limits_each_origin_by_the_tier_of_its_replicas():
    accounts = [{"name": "T", "users": [{"name": "u"}], "jetstream": {"tiers": {
        "R1": {"disk_storage": "1GiB", "mem_storage": "64MiB"}, "R3": {"disk_storage": "3GiB"}}}}]
    outage = {"survive": "1m", "write_rate": {"bytes": "512KiB"}}
    hostvars = fleet({"name": "tel", "subjects": ["tel.>"]}, {"name": "two", "subjects": ["two"]},
                     {"name": "three", "subjects": ["three"], "replicas": 3}, outage=outage,
                     hub_sources=[{"name": name, "domain": "s1"} for name in ("tel", "two", "three")])
    for host in ("s1-1", "s1-2"):
        hostvars[host] = dict(hostvars[host], nats_accounts=accounts)
    rows = dict((row["stream"], row) for row in budgets(hostvars))
    # R1: tel and two share 1 GiB at 512 KiB/s each; R3: three's 512 KiB/s is kept three times in its 3 GiB
    assert (rows["tel"]["budget"], rows["two"]["budget"], rows["three"]["budget"]) == (1024, 1024, 2048), rows
    assert rows["three"]["limit"] == "account T's jetstream.tiers.R3.disk_storage 3GiB at 1.5MiB/s"
    assert rows["tel"]["limit"] == "account T's jetstream.tiers.R1.disk_storage 1GiB at 1MiB/s"


def test_a_stream_rate_overrides_the_site_rate():
    outage = {"survive": "1m", "write_rate": RATE, "streams": {"tel": {"messages": 1}}}
    [row] = budgets(fleet({"name": "tel", "subjects": ["tel.>"], "max_msgs": 600}, outage=outage))
    assert row["budget"] == 600


def test_a_budget_shorter_than_the_site_must_survive_is_refused_naming_site_stream_limit_and_budget():
    message = refused(fleet({"name": "tel", "subjects": ["tel.>"], "max_bytes": "64MiB"},
                            outage={"survive": "3h", "write_rate": RATE}))
    assert message == (
        "s1: stream 'tel' in account 'T' (copied by hub/agg): max_bytes 64MiB at 32KiB/s keeps 34m8s of writes, less "
        "than the 3h the site must survive cut off (nats_fleet_outage.survive) and the up to 2m its copies take to "
        "resume once the link is back; after that discard: old drops the oldest messages, which hub/agg may not have "
        "copied. Raise max_bytes to at least 341.2MiB, or lower the rate or what the site must survive.")
    short_age = fleet({"name": "tel", "subjects": ["tel.>"], "max_age": "1h"}, outage={"survive": "3h", "write_rate": RATE})
    assert "Raise max_age to at least 3h2m." in refused(short_age)


def test_a_budget_must_also_cover_the_wait_until_the_copies_resume():
    # nats-server retries a lost origin with a backoff of up to 2 minutes: a site cut off for exactly what it must
    # survive may lose writes before its copies read again
    def stream(max_age):
        return fleet({"name": "tel", "subjects": ["tel.>"], "max_age": max_age},
                     outage={"survive": "1h", "write_rate": RATE})
    assert "Raise max_age to at least 1h2m." in refused(stream("1h1m"))
    [row] = budgets(stream("1h2m"))
    assert not row["short"] and row["text"].endswith("must survive 1h and 2m to resume: ok")


def test_only_origins_copied_from_another_domain_count():
    # the site's own copy of its stream is no origin; the hub copies nothing of it
    hostvars = fleet({"name": "tel", "subjects": ["tel.>"], "max_bytes": "1KiB"},
                     {"name": "copy", "sources": [{"name": "tel"}]}, outage={"survive": "3h", "write_rate": RATE},
                     hub_sources=[{"name": "elsewhere", "domain": "s9"}])
    assert budgets(hostvars) == []


@pytest.mark.parametrize("outage, fragment", [
    ("6h", "s1: nats_fleet_outage: expected a mapping with survive and write_rate, got '6h'"),
    ({"write_rate": RATE}, "s1: nats_fleet_outage.survive: how long the site must keep its writes while cut off"),
    ({"survive": "soon", "write_rate": RATE}, "s1: nats_fleet_outage.survive: 'soon' is not a duration"),
    ({"survive": 0, "write_rate": RATE}, "s1: nats_fleet_outage.survive: 0: use a duration above 0"),
    ({"survive": "1h", "rate": RATE}, "s1: nats_fleet_outage: unknown key rate (survive, write_rate, streams)"),
    ({"survive": "1h", "write_rate": {"msgs": 5}}, "s1: nats_fleet_outage.write_rate: unknown key msgs"),
    ({"survive": "1h", "write_rate": {"messages": "many"}},
     "s1: nats_fleet_outage.write_rate.messages: 'many' is not a number per second"),
    ({"survive": "1h", "write_rate": {"bytes": "lots"}},
     "s1: nats_fleet_outage.write_rate.bytes: 'lots' is not a size per second"),
    ({"survive": "1h", "write_rate": {"messages": 0}},
     "s1: nats_fleet_outage.write_rate.messages: 0: use a rate above 0 per second"),
    ({"survive": "1h", "streams": ["tel"]}, "s1: nats_fleet_outage.streams: expected a mapping of stream name"),
    # a limit whose rate is not declared cannot be told
    ({"survive": "1h", "write_rate": {"bytes": "1KiB"}},
     "s1: stream 'tel' in account 'T' (copied by hub/agg): max_msgs 100: write_rate.messages is not declared"),
])
def test_a_budget_that_cannot_be_read_is_refused(outage, fragment):
    assert fragment in refused(fleet({"name": "tel", "subjects": ["tel.>"], "max_msgs": 100}, outage=outage))


def test_left_counts_each_budget_down_from_the_last_time_its_copy_heard_from_it():
    rows = budgets(fleet({"name": "tel", "subjects": ["tel.>"], "max_age": "1h"},
                         outage={"survive": "10m", "write_rate": RATE}))
    replication = [{"domain": "hub", "stream": "agg", "source_domain": "s1", "source": "tel", "active": 125.4},
                   {"domain": "hub", "stream": "agg", "source_domain": "s1", "source": "tel", "active": 3700},
                   {"domain": "hub", "stream": "agg", "source_domain": "s1", "source": "tel", "active": None},
                   {"domain": "hub", "stream": "agg", "source_domain": "s2", "source": "tel", "active": 1}]
    left = _budget.left(replication, rows, "T")  # the copies read as account T
    assert [entry["left"] for entry in left] == [pytest.approx(3474.6), pytest.approx(-100), None]
    assert left[0]["text"] == "hub/agg <- s1/tel: last heard 2m5s ago, outage budget 57m55s of 1h left"
    assert left[1]["text"] == ("hub/agg <- s1/tel: last heard 1h1m40s ago, outage budget spent 1m40s ago: the oldest "
                               "messages expire, copied or not")
    assert "never heard from" in left[2]["text"]


def test_left_reads_each_copy_against_the_origin_of_its_own_account():
    rows = [{"site": "s1", "account": account, "stream": "tel", "budget": budget, "effect": "x"}
            for account, budget in (("A", 600), ("B", 60))]
    copies = [{"domain": "hub", "stream": "agg", "source_domain": "s1", "source": "tel", "active": 30, "account": "B"},
              {"domain": "hub", "stream": "agg", "source_domain": "s1", "source": "tel", "active": 30}]
    assert [entry["left"] for entry in _budget.left(copies, rows, "A")] == [30, 570]
    assert _budget.left(copies[1:], rows) == []  # an entry whose account is not known has no origin
