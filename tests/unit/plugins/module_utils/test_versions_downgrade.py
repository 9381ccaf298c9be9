"""The JetStream API level a stream or consumer needs, against the release a downgrade goes to."""

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils import _versions as versions


def _asset(level, stream="ORDERS", consumer=None, account="APP"):
    metadata = {} if level is None else {"_nats.req.level": level}
    return dict(account=account, stream=stream, consumer=consumer, config={"metadata": metadata})


@pytest.mark.parametrize("version, level", [
    ((2, 10, 22), 0), ((2, 11, 0), 1), ((2, 12, 4), 2), ((2, 12, 5), 3), ((2, 12, 8), 3),
    ((2, 14, 6), 4), ((2, 15, 1), 5)])
def test_the_level_each_release_runs(version, level):
    assert versions.version_level(version) == level


@pytest.mark.parametrize("stamp, level", [(None, 0), ("", 0), ("0", 0), ("4", 4), (" 2 ", 2), ("x", 6)])
def test_the_level_a_config_needs(stamp, level):
    assert versions.required_level(_asset(stamp)["config"]) == level


def test_the_oldest_release_for_a_level():
    assert versions.level_release(0) is None
    assert versions.level_release(1) == (2, 11, 0)
    assert versions.level_release(3) == (2, 12, 5)
    assert versions.level_release(4) == (2, 14, 0)
    # a level the table does not know needs the newest: the holding server's version, else after the table
    assert versions.level_release(9, running=(2, 16, 2)) == (2, 16, 2)
    assert versions.level_release(9) == (2, 16, 0)


def test_a_downgrade_below_an_asset_level_is_refused_naming_it():
    assets = [_asset("1"), _asset("4", consumer="flow"), _asset("2", stream="COUNTS"), _asset(None, stream="OLD")]
    refused = versions.downgrade_refusals(assets, (2, 12, 8))
    assert refused == [dict(account="APP", stream="ORDERS", consumer="flow", level=4, needs="2.14.0")]
    message = versions.refusal_message(refused, (2, 12, 8))
    assert message == ("nats-server 2.12.8 runs JetStream API level 3 and would put offline: account APP stream ORDERS "
                       "consumer flow needs JetStream API level 4 (nats-server 2.14.0 or newer)")
    # below 2.11 every stamped asset that needs a level is refused
    assert [r["stream"] for r in versions.downgrade_refusals(assets, (2, 10, 29))] == ["ORDERS", "ORDERS", "COUNTS"]


def test_a_target_that_runs_every_level_refuses_nothing():
    assets = [_asset("4", consumer="flow"), _asset("5")]
    assert versions.downgrade_refusals(assets, (2, 15, 1)) == []


def test_an_unknown_level_is_not_ignored():
    assets = [_asset("7")]
    assert versions.downgrade_refusals(assets, (2, 15, 1))[0]["needs"] == "2.16.0"
    assert versions.downgrade_refusals(assets, (2, 16, 1), running=(2, 17, 0))[0]["needs"] == "2.17.0"
    assert versions.downgrade_refusals(assets, (2, 17, 0), running=(2, 17, 0)) == []


def test_versions_jsz_assets_are_every_stream_and_consumer_of_every_account():
    jsz = {"account_details": [
        {"name": "APP", "stream_detail": [{"name": "orders", "config": {"metadata": {"_nats.req.level": "4"}},
                                           "consumer_detail": [{"name": "billing", "config": {}}]}]},
        {"id": "$G"},  # an account without streams
        {"name": "OPS", "stream_detail": [{"name": "audit", "config": None}]}]}
    assert [(a["account"], a["stream"], a["consumer"], versions.required_level(a["config"]))
            for a in versions.jsz_assets(jsz)] == [("APP", "orders", None, 4), ("APP", "orders", "billing", 0),
                                                   ("OPS", "audit", None, 0)]
    assert versions.jsz_assets({}) == [] and versions.jsz_assets(None) == []
