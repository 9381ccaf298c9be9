"""Server versions inferred from what the JetStream API shows."""

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils import _versions as versions


def test_versions_stamp_is_read_from_the_metadata():
    assert versions.stamped_version({"metadata": {"_nats.ver": "2.15.1"}}) == (2, 15, 1)
    assert versions.stamped_version({"metadata": {"team": "ops"}}) is None
    assert versions.stamped_version(None) is None


@pytest.mark.parametrize("account, expected", [
    (None, None), ({}, None), ({"api": {"level": 0}}, None), ({"api": {"level": 1}}, (2, 11, 0)),
    ({"api": {"level": 5}}, (2, 15, 0)), ({"api": {"level": "3"}}, None),
])
def test_versions_from_the_account_api_level(account, expected):
    assert versions.account_level_version(account) == expected


@pytest.mark.parametrize("config, keys, kept, expected", [
    ({"compression": "none"}, ("compression",), False, True),
    ({"consumer_limits": {}}, ("compression",), False, False),
    ({"metadata": {"team": "ops"}}, (), False, False),
    ({"metadata": {"team": "ops"}}, (), True, True),
    ({"metadata": {"_nats.ver": "2.11.0"}}, (), True, False),
    ({"filter_subjects": ["a", "b"]}, (), True, True),
    ({"filter_subjects": []}, (), True, False),
    (None, ("compression",), True, False),
])
def test_versions_2_10_keys_in_a_config(config, keys, kept, expected):
    assert versions.shows_2_10(config, keys, kept) is expected


def test_versions_inferred_without_evidence_are_2_9():
    assert versions.infer_version() == ((2, 9, 0), False)
    assert versions.infer_version({}, [{}, None]) == ((2, 9, 0), False)


def test_versions_inferred_take_the_newest_evidence():
    assert versions.infer_version({"api": {"level": 3}}, [{"metadata": {"_nats.ver": "2.11.4"}}]) == ((2, 12, 0), False)
    assert versions.infer_version({"api": {"level": 1}}, [{"metadata": {"_nats.ver": "2.11.4"}}]) == ((2, 11, 4), True)
    assert versions.infer_version({"reserved_memory": 0}, account_keys=("reserved_memory",)) == ((2, 10, 0), False)
    assert versions.infer_version({"reserved_memory": 0}) == ((2, 9, 0), False)
    assert versions.infer_version(configs=[{"compression": "s2"}], config_keys=("compression",)) == ((2, 10, 0), False)


def test_versions_an_exact_stamp_wins_over_the_same_inexact_number():
    assert versions.infer_version({"api": {"level": 1}}, [{"metadata": {"_nats.ver": "2.11.0"}}]) == ((2, 11, 0), True)
