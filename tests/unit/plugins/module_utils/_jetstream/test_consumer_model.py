"""Consumer options, normalisation, the server's update rules per version, and the plan."""

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import consumer_model as jc

V2_9, V2_10, V2_12, V2_14, V2_15 = (2, 9), (2, 10), (2, 12, 8), (2, 14, 6), (2, 15, 1)
SECOND = 10 ** 9

# A pull consumer as 2.15.1 reports it, server-stamped metadata included.
PULL_2_15 = {
    "durable_name": "workers", "name": "workers", "deliver_policy": "all", "ack_policy": "explicit",
    "ack_wait": 30 * SECOND, "max_deliver": -1, "filter_subject": "orders.created", "replay_policy": "instant",
    "max_waiting": 512, "max_ack_pending": 1000, "num_replicas": 0,
    "metadata": {"_nats.level": "5", "_nats.req.level": "0", "_nats.ver": "2.15.1"},
}
# A push consumer as 2.9.10 reports it.
PUSH_2_9 = {
    "durable_name": "forwarder", "deliver_policy": "all", "ack_policy": "explicit", "ack_wait": 30 * SECOND,
    "max_deliver": -1, "replay_policy": "instant", "max_ack_pending": 1000, "deliver_subject": "deliver.here",
    "deliver_group": "grp", "idle_heartbeat": 5 * SECOND, "flow_control": True, "num_replicas": 0,
}


def desired(**params):
    return jc.desired_config(params)


# -- what users write -----------------------------------------------------------------------------


@pytest.mark.parametrize("option, written, api", [
    ("ack_wait", "30s", 30 * SECOND), ("ack_wait", "1m30s", 90 * SECOND), ("ack_wait", 10, 10 * SECOND),
    ("max_expires", "500ms", SECOND // 2), ("inactive_threshold", "1d", 86400 * SECOND),
    ("idle_heartbeat", "1.5s", 1500 * 10 ** 6),
    ("max_bytes", 1024, 1024), ("max_bytes", "1k", 1000), ("max_bytes", "1KB", 1024),
    ("max_bytes", "2MiB", 2 * 1024 ** 2),
    ("sample_freq", "50%", 50), ("sample_freq", 50, 50), ("sample_freq", "7", 7),
    ("opt_start_time", "2024-01-01T02:00:00+02:00", "2024-01-01T00:00:00Z"),
    ("opt_start_time", "2024-01-01T00:00:00.123456789Z", "2024-01-01T00:00:00.123456789Z"),
])
def test_user_units_become_api_units(option, written, api):
    assert desired(**{option: written}) == {option: api}


@pytest.mark.parametrize("option, written", [
    ("ack_wait", "half a minute"), ("ack_wait", "0s"), ("ack_wait", -5), ("max_expires", "1x"),
    ("max_bytes", "lots"), ("max_bytes", -1), ("sample_freq", "150%"), ("sample_freq", "often"),
    ("opt_start_time", "monday"), ("backoff", ["1s", "later"]),
])
def test_bad_units_name_the_option(option, written):
    with pytest.raises(jc.ConsumerInputError) as caught:
        desired(**{option: written})
    assert caught.value.field == option and str(caught.value).startswith(option + ": ")


# -- desired and actual --------------------------------------------------------------------------


def test_desired_holds_only_what_the_user_set_in_api_units():
    assert desired(ack_wait="1m", max_bytes="1MiB", backoff=["1s", "5s"], sample_freq="50%",
                   deliver_policy="ALL") == {
        "ack_wait": 60 * SECOND, "max_bytes": 1024 ** 2, "backoff": [SECOND, 5 * SECOND], "sample_freq": 50,
        "deliver_policy": "all"}
    assert desired() == {}


@pytest.mark.parametrize("params, field", [
    (dict(max_deliver=0), "max_deliver"),
    (dict(filter_subject="orders..created"), "filter_subject"),
    (dict(filter_subjects=["ok", "not ok"]), "filter_subjects"),
    (dict(filter_subject="a.>.b"), "filter_subject"),
    (dict(max_ack_pending=0), "max_ack_pending"),
    (dict(max_waiting=0), "max_waiting"),
    (dict(filter_subject="a", filter_subjects=["b"]), "filter_subject"),
    (dict(filter_subjects=["a", "a"]), "filter_subjects"),
    (dict(deliver_policy="sometimes"), "deliver_policy"),
    (dict(rate_limit_bps=-1), "rate_limit_bps"),
])
def test_bad_input_names_the_option(params, field):
    with pytest.raises(jc.ConsumerInputError) as caught:
        jc.desired_config(params)
    assert caught.value.field == field
    assert str(caught.value).startswith(field + ":")


@pytest.mark.parametrize("name", ["a.b", "all*", "x>", "has space", "", "a/b"])
def test_names_that_would_break_api_subjects_are_refused(name):
    with pytest.raises(jc.ConsumerInputError):
        jc.check_name("name", name)
    jc.check_name("name", "DUR")


def test_actual_strips_server_metadata_and_fills_zero_values():
    actual = jc.actual_config(PULL_2_15)
    assert actual["metadata"] == {}
    assert actual["filter_subjects"] == ["orders.created"]
    assert actual["description"] == "" and actual["headers_only"] is False and actual["backoff"] == []
    assert actual["deliver_subject"] == "" and actual["ack_wait"] == 30 * SECOND


def test_single_filter_compares_the_same_whichever_field_holds_it():
    as_list = dict(PULL_2_15, filter_subjects=["orders.created"])
    del as_list["filter_subject"]
    for config in (PULL_2_15, as_list):
        assert jc.changed_fields(desired(filter_subject="orders.created"), jc.actual_config(config)) == []
        assert jc.changed_fields(desired(filter_subjects=["orders.created"]), jc.actual_config(config)) == []


def test_filters_compare_as_a_set():
    config = dict(PULL_2_15, filter_subjects=["a", "b"])
    del config["filter_subject"]
    assert jc.changed_fields(desired(filter_subjects=["b", "a"]), jc.actual_config(config)) == []
    assert jc.changed_fields(desired(filter_subjects=["b"]), jc.actual_config(config)) == ["filter_subjects"]


def test_metadata_compares_whole_without_server_keys():
    config = dict(PULL_2_15, metadata=dict(PULL_2_15["metadata"], team="ops"))
    actual = jc.actual_config(config)
    assert jc.changed_fields(desired(metadata={"team": "ops"}), actual) == []
    assert jc.changed_fields(desired(metadata={}), actual) == ["metadata"]
    assert jc.changed_fields(desired(metadata={"team": "ops", "x": "1"}), actual) == ["metadata"]


def test_start_time_compares_as_an_instant():
    config = dict(PULL_2_15, deliver_policy="by_start_time", opt_start_time="2024-01-01T02:00:00+02:00")
    assert jc.changed_fields(desired(opt_start_time="2024-01-01T00:00:00Z"), jc.actual_config(config)) == []


# -- versions ------------------------------------------------------------------------------------


def test_domain_version_from_what_the_api_shows():
    assert jc.domain_version(None, {"name": "S"}) == V2_9
    assert jc.domain_version({"api": {"total": 3}}, {"name": "S", "compression": "none"}) == V2_10
    assert jc.domain_version({"api": {"level": 3}}, {}) == (2, 12)
    assert jc.domain_version({"api": {"level": 4}}, {}) == (2, 14)
    assert jc.domain_version({"api": {"level": 5}}, PULL_2_15) == (2, 15, 1)
    assert jc.domain_version(None, {"metadata": {"_nats.ver": "2.12.8"}}) == (2, 12, 8)
    assert jc.domain_version(None, {"name": "S"}, {"metadata": {"team": "ops"}}) == V2_10
    assert jc.domain_version(None, {"name": "S"}, {"filter_subjects": ["a", "b"]}) == V2_10


def test_an_unchanged_consumer_is_not_judged_by_local_rules():
    config = dict(PULL_2_15, metadata={"team": "ops"}, backoff=[SECOND, 2 * SECOND], max_deliver=2)
    assert jc.plan("workers", "present", desired(metadata={"team": "ops"}), config, V2_9).action == "none"


def test_request_carries_the_action_from_2_10():
    assert "action" not in jc.request_body("S", {}, V2_9, "create")
    assert jc.request_body("S", {}, V2_10, "create")["action"] == "create"
    assert jc.request_body("S", {}, V2_15, "update")["action"] == "update"


# -- the plan ------------------------------------------------------------------------------------


def test_create_sends_the_user_fields_with_explicit_acks_by_default():
    decided = jc.plan("workers", "present", desired(ack_wait="1m", filter_subject="orders.*"), None, V2_15)
    assert decided.action == "create"
    assert decided.config == {"durable_name": "workers", "name": "workers", "ack_policy": "explicit",
                              "ack_wait": 60 * SECOND, "filter_subject": "orders.*"}


def test_several_filters_go_as_filter_subjects():
    decided = jc.plan("w", "present", desired(filter_subjects=["a", "b"]), None, V2_10)
    assert decided.config["filter_subjects"] == ["a", "b"] and "filter_subject" not in decided.config


def test_same_again_is_no_change():
    params = desired(ack_wait="30s", filter_subject="orders.created", ack_policy="explicit", max_deliver=-1,
                     deliver_policy="all", max_waiting=512, description="")
    assert jc.plan("workers", "present", params, PULL_2_15, V2_15).action == "none"


def test_update_keeps_what_the_user_left_out_and_drops_server_metadata():
    config = dict(PULL_2_15, description="kept", metadata=dict(PULL_2_15["metadata"], team="ops"))
    decided = jc.plan("workers", "present", desired(ack_wait="1m", max_ack_pending=50), config, V2_15)
    assert decided.action == "update" and decided.changed == ["ack_wait", "max_ack_pending"]
    assert decided.config["ack_wait"] == 60 * SECOND and decided.config["max_ack_pending"] == 50
    assert decided.config["description"] == "kept" and decided.config["filter_subject"] == "orders.created"
    assert decided.config["metadata"] == {"team": "ops"}


@pytest.mark.parametrize("version", [V2_9, V2_10, V2_15])
@pytest.mark.parametrize("params", [
    dict(ack_wait="1m"), dict(max_deliver=5), dict(filter_subject="orders.updated"), dict(filter_subject=""),
    dict(max_ack_pending=10), dict(max_batch=10), dict(max_expires="10s"), dict(max_bytes="1MiB"),
    dict(inactive_threshold="1h"), dict(headers_only=True), dict(num_replicas=1), dict(description="d"),
    dict(sample_freq=50), dict(backoff=["1s", "2s"], max_deliver=5),
])
def test_fields_every_version_updates_in_place(version, params):
    assert jc.plan("workers", "present", desired(**params), PULL_2_15, version).action == "update"


@pytest.mark.parametrize("params, field", [
    (dict(deliver_policy="new"), "deliver_policy"),
    (dict(ack_policy="all"), "ack_policy"),
    (dict(replay_policy="original"), "replay_policy"),
    (dict(max_waiting=100), "max_waiting"),
    (dict(deliver_subject="now.push"), "deliver_subject"),
])
@pytest.mark.parametrize("version", [V2_9, V2_10, V2_15])
def test_immutable_changes_fail_naming_the_field(params, field, version):
    with pytest.raises(jc.ImmutableChange) as caught:
        jc.plan("workers", "present", desired(**params), PULL_2_15, version)
    assert caught.value.fields == [field]
    assert field in str(caught.value)


def test_pull_to_push_says_so():
    with pytest.raises(jc.ImmutableChange) as caught:
        jc.plan("workers", "present", desired(deliver_subject="x"), PULL_2_15, V2_15)
    assert "pull consumer cannot become a push consumer" in str(caught.value)
    with pytest.raises(jc.ImmutableChange) as caught:
        jc.plan("forwarder", "present", desired(deliver_subject=""), PUSH_2_9, V2_9)
    assert "push consumer cannot become a pull consumer" in str(caught.value)


def test_push_consumer_rules():
    assert jc.plan("forwarder", "present", desired(deliver_subject="deliver.there"), PUSH_2_9, V2_9).action == \
        "update"
    assert jc.plan("forwarder", "present", desired(deliver_group="other", rate_limit_bps=8000), PUSH_2_9,
                   V2_9).action == "update"
    for params in (dict(idle_heartbeat="10s"), dict(flow_control=False, idle_heartbeat="5s")):
        with pytest.raises(jc.ImmutableChange):
            jc.plan("forwarder", "present", desired(**params), PUSH_2_9, V2_9)


@pytest.mark.parametrize("version, immutable", [(V2_9, False), (V2_10, False), (V2_12, False), (V2_14, True),
                                                (V2_15, True)])
def test_memory_storage_is_immutable_from_2_14(version, immutable):
    if immutable:
        with pytest.raises(jc.ImmutableChange) as caught:
            jc.plan("workers", "present", desired(mem_storage=True), PULL_2_15, version)
        assert "2.14" in str(caught.value)
    else:
        assert jc.plan("workers", "present", desired(mem_storage=True), PULL_2_15, version).action == "update"


def test_recreate_when_allowed_resets_what_the_old_consumer_pinned():
    config = dict(PULL_2_15, deliver_policy="by_start_sequence", opt_start_seq=5)
    decided = jc.plan("workers", "present", desired(deliver_policy="new"), config, V2_15, "recreate")
    assert decided.action == "recreate" and decided.immutable and decided.changed == ["deliver_policy"]
    assert decided.config["deliver_policy"] == "new" and "opt_start_seq" not in decided.config
    assert decided.config["filter_subject"] == "orders.created"


def test_push_to_pull_recreate_drops_push_settings():
    decided = jc.plan("forwarder", "present", desired(deliver_subject=""), PUSH_2_9, V2_9, "recreate")
    assert decided.action == "recreate"
    for push_only in ("deliver_subject", "deliver_group", "idle_heartbeat", "flow_control"):
        assert push_only not in decided.config


def test_absent():
    assert jc.plan("w", "absent", {}, PULL_2_15, V2_15).action == "delete"
    assert jc.plan("w", "absent", {}, None, V2_15).action == "none"


@pytest.mark.parametrize("params, version, field", [
    (dict(metadata={"a": "b"}), V2_9, "metadata"),
    (dict(filter_subjects=["a.1", "a.2"]), V2_9, "filter_subjects"),
    (dict(max_batch=5, deliver_subject="x"), V2_15, "max_batch"),
    (dict(deliver_group="g"), V2_15, "deliver_group"),
    (dict(deliver_subject="x", flow_control=True), V2_15, "flow_control"),
    (dict(deliver_policy="by_start_sequence"), V2_15, "opt_start_seq"),
    (dict(opt_start_seq=4), V2_15, "opt_start_seq"),
    (dict(deliver_policy="by_start_time"), V2_15, "opt_start_time"),
    (dict(deliver_policy="by_start_time", opt_start_time="2024-01-01T00:00:00Z", opt_start_seq=3), V2_15,
     "opt_start_seq"),
    (dict(deliver_policy="last_per_subject"), V2_15, "deliver_policy"),
    (dict(backoff=["1s", "2s"], max_deliver=1), V2_15, "backoff"),
    (dict(backoff=["1s", "2s"], max_deliver=2), V2_9, "backoff"),
    (dict(backoff=["1s", "2s"], ack_wait="10s"), V2_15, "ack_wait"),
])
def test_what_the_server_would_refuse_fails_before_anything_is_sent(params, version, field):
    with pytest.raises(jc.ConsumerInputError) as caught:
        jc.plan("w", "present", desired(**params), None, version)
    assert caught.value.field == field


def test_backoff_rules_follow_the_version():
    assert jc.plan("w", "present", desired(backoff=["1s", "2s"], max_deliver=2), None, V2_10).action == "create"
    assert jc.plan("w", "present", desired(backoff=["1s", "2s"], max_deliver=3), None, V2_9).action == "create"
    assert jc.plan("w", "present", desired(backoff=["1s", "2s"], ack_wait="1s"), None, V2_9).action == "create"


def test_options_of_the_other_kind_name_the_kind():
    with pytest.raises(jc.ConsumerInputError) as caught:
        jc.plan("forwarder", "present", desired(max_batch=10), PUSH_2_9, V2_9)
    assert "only pull consumers" in str(caught.value)


def test_diff_shows_durations_as_written():
    assert jc.display({"ack_wait": 90 * SECOND, "backoff": [SECOND], "sample_freq": 50, "max_deliver": 3}) == {
        "ack_wait": "1m30s", "backoff": ["1s"], "sample_freq": "50%", "max_deliver": 3}


def test_filter_warnings_only_for_streams_with_their_own_subjects():
    assert jc.filter_warnings(["zz.a", "orders.a", "orders.*", "*.created"], {"subjects": ["orders.>"]}) == ["zz.a"]
    assert jc.filter_warnings(["orders.*"], {"subjects": ["orders.created"]}) == []
    assert jc.filter_warnings(["zz.a"], {"subjects": [], "sources": [{"name": "x"}]}) == []


def test_the_shared_durable_pull_consumer_is_an_example():
    import yaml

    from ansible_collections.nats_edge.fleet.plugins.modules import jetstream_consumer as module

    tasks = yaml.safe_load(module.EXAMPLES)
    shared = [t["nats_edge.fleet.jetstream_consumer"] for t in tasks if "nats_edge.fleet.jetstream_consumer" in t
              and t["nats_edge.fleet.jetstream_consumer"].get("name") == "DUR"]
    assert shared and shared[0].get("api_prefix") and not shared[0].get("deliver_subject")


FC = dict(deliver_subject="src.ORDERS", ack_policy="flow_control", max_ack_pending=1000)


@pytest.mark.parametrize("params, version, field, message", [
    (FC, (2, 12, 8), "ack_policy", "flow_control needs nats-server 2.14 or newer; these servers run 2.12"),
    (dict(FC, deliver_subject=None), (2, 15, 1), "ack_policy", "only push consumers have (set deliver_subject)"),
    (dict(FC, ack_wait="30s"), (2, 15, 1), "ack_wait", "ack_policy flow_control takes none"),
    (dict(FC, backoff=["1s", "5s"]), (2, 15, 1), "backoff", "ack_policy flow_control takes none"),
    (dict(FC, idle_heartbeat="5s", flow_control=True), (2, 15, 1), "idle_heartbeat", "needs exactly 1s"),
    (dict(FC, flow_control=False), (2, 15, 1), "flow_control", "ack_policy flow_control needs it"),
    (dict(FC, max_deliver=3), (2, 15, 1), "max_deliver", "delivers each message once"),
])
def test_flow_control_acks_follow_the_servers_rules(params, version, field, message):
    with pytest.raises(jc.ConsumerInputError) as caught:
        jc.plan("hub", "present", jc.desired_config(params), None, version)
    assert caught.value.field == field and message in str(caught.value), str(caught.value)


def test_flow_control_acks_for_a_durable_sourcing_consumer():
    made = jc.plan("hub", "present", jc.desired_config(dict(FC, idle_heartbeat="1s")), None, (2, 15, 1))
    assert made.action == "create" and made.config["ack_policy"] == "flow_control"
