"""The stream a key-value bucket maps to (nats clients' mapping)."""
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import buckets as kv


def test_a_bucket_remembers_duplicates_for_two_minutes():
    item = kv.kv_stream("cfg", {"replicas": 3})
    assert item["duplicate_window"] == "%dns" % (120 * 10**9)
    assert item["subjects"] == ["$KV.cfg.>"]


def test_a_short_ttl_bounds_the_duplicate_window():
    assert kv.kv_stream("cfg", {"ttl": "30s"})["duplicate_window"] == "%dns" % (30 * 10**9)


def test_a_mirror_asks_for_no_duplicate_window():
    # measured: a clustered (R3) mirror on nats-server 2.15 keeps none, so
    # asking for one failed as "the server did not apply duplicate_window"
    item = kv.kv_stream("cfg", {"replicas": 3, "mirror": {"name": "cfg", "domain": "hub"}})
    assert "duplicate_window" not in item
    assert item["mirror_direct"] is True and "subjects" not in item
    assert item["mirror"] == {"name": "KV_cfg", "domain": "hub"}


def test_a_key_is_refused_unless_every_token_of_its_subject_is_there():
    """$KV.<bucket>.<key> is a subject: a key with an empty token (a..b) is published where no stream listens."""
    import pytest
    for good in ("a", "a.b", "site/1=on", "A-b_c"):
        assert kv.check_key("cfg", good) == good
    for bad in ("a..b", ".a", "a.", "a b", "", "a*", "a>", 5):
        with pytest.raises(kv.BucketError, match="is not a valid key"):
            kv.check_key("cfg", bad)
