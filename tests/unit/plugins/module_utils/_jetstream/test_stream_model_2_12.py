"""Stream options of nats-server 2.12 to 2.15 and sealed: version floors, combinations and update rules."""

import copy

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import stream_model as js

V2_11 = js.ServerVersion((2, 11, 11), True)
V2_12 = js.ServerVersion((2, 12, 8), True)
V2_14 = js.ServerVersion((2, 14, 6), True)
WHERE = "in domain 'hub'"
CONFIG = {
    "name": "ORDERS", "subjects": ["orders.>"], "retention": "limits", "max_consumers": -1, "max_msgs": -1,
    "max_bytes": -1, "max_age": 3600 * 10**9, "max_msgs_per_subject": -1, "max_msg_size": -1, "discard": "old",
    "storage": "file", "num_replicas": 1, "duplicate_window": 120 * 10**9, "compression": "none",
    "allow_direct": False, "mirror_direct": False, "sealed": False, "deny_delete": False, "deny_purge": False,
    "allow_rollup_hdrs": False, "consumer_limits": {}, "allow_msg_ttl": False,
    "metadata": {"_nats.level": "5", "_nats.req.level": "0", "_nats.ver": "2.15.1"},
}


def desired(**over):
    params = dict((key, None) for key in js.STREAM_OPTIONS)
    params.update(name="ORDERS", state="present", on_immutable_change="fail", allow_data_loss=False)
    params.update(over)
    return js.desired_from_params(params)


def info(**changes):
    config = copy.deepcopy(CONFIG)
    config.update(changes)
    return {"config": config, "state": {"messages": 0, "consumer_count": 0}}


def refused(desired_, info_, version, *parts):
    with pytest.raises(js.StreamError) as err:
        js.plan(desired_, info_, version, WHERE)
    for part in parts:
        assert part in str(err.value), str(err.value)
    return str(err.value)


@pytest.mark.parametrize("option, value, since", [
    ("persist_mode", "async", "2.12"), ("allow_msg_counter", True, "2.12"), ("allow_atomic", True, "2.12"),
    ("allow_msg_schedules", True, "2.12"), ("allow_batched", True, "2.14"),
])
def test_each_option_needs_its_release_and_older_servers_are_refused_naming_it(option, value, since):
    older = V2_11 if since == "2.12" else V2_12
    message = refused(desired(subjects=["orders.>"], **{option: value}), None, older,
                      "%s needs nats-server %s or later" % (option, since), "stream 'ORDERS'")
    assert "the server is %s" % js.version_text(older) in message
    created = js.plan(desired(subjects=["orders.>"], **{option: value}), None, V2_14, WHERE)
    assert created.action == "create" and created.body[option] == value
    assert js.needs_version(created.body)


def test_the_default_values_need_no_release():
    plan = js.plan(desired(persist_mode="default", allow_atomic=False, subjects=["orders.>"]), None, V2_11, WHERE)
    assert plan.action == "create" and plan.body["persist_mode"] == "default"
    assert js.plan(desired(persist_mode="default", allow_msg_counter=False), info(), V2_11, WHERE).action == "none"


@pytest.mark.parametrize("over, message", [
    (dict(allow_msg_counter=True, discard="new"), "allow_msg_counter and discard: new cannot be combined"),
    (dict(allow_msg_counter=True, allow_msg_ttl=True), "allow_msg_counter and allow_msg_ttl"),
    (dict(allow_msg_counter=True, subject_delete_marker_ttl="1m"), "allow_msg_counter and subject_delete_marker_ttl"),
    (dict(allow_msg_counter=True, allow_msg_schedules=True), "allow_msg_counter and allow_msg_schedules"),
    (dict(allow_msg_counter=True, retention="interest"), "allow_msg_counter needs retention: limits"),
    (dict(allow_msg_counter=True, mirror={"name": "O"}, subjects=None), "allow_msg_counter and mirror"),
    (dict(allow_msg_schedules=True, discard="new"), "allow_msg_schedules and discard: new"),
    (dict(allow_msg_schedules=True, sources=[{"name": "O"}]), "allow_msg_schedules and sources"),
    (dict(allow_msg_schedules=True, allow_rollup=False), "allow_msg_schedules needs allow_rollup"),
    (dict(allow_msg_schedules=True, deny_purge=True), "allow_msg_schedules needs allow_rollup"),
    (dict(persist_mode="async", storage="memory"), "persist_mode async needs storage: file"),
    (dict(persist_mode="async", replicas=3), "persist_mode async needs replicas: 1"),
    (dict(persist_mode="async", allow_atomic=True), "persist_mode async and allow_atomic"),
    (dict(allow_atomic=True, mirror={"name": "O"}, subjects=None), "allow_atomic and mirror"),
    (dict(allow_batched=True, mirror={"name": "O"}, subjects=None), "allow_batched and mirror"),
    (dict(sealed=True, max_age="1h"), "sealed sets max_age to 0"),
    (dict(sealed=True, discard="old"), "sealed sets discard to new"),
    (dict(sealed=True, deny_delete=False), "sealed sets deny_delete to true"),
    (dict(sealed=True, allow_rollup=True), "sealed sets allow_rollup to false"),
])
def test_combinations_the_server_refuses_or_overrides_fail_before_anything_is_sent(over, message):
    over.setdefault("subjects", ["orders.>"])
    with pytest.raises(js.StreamError) as err:
        desired(**over)
    assert message in str(err.value) and "stream 'ORDERS'" in str(err.value), str(err.value)


def test_combinations_are_checked_against_the_stream_as_the_update_leaves_it():
    refused(desired(allow_msg_counter=True), info(discard="new"), V2_14, "allow_msg_counter and discard: new")
    refused(desired(persist_mode="async"), info(storage="memory"), V2_14, "persist_mode async needs storage: file")
    refused(desired(allow_msg_schedules=True), info(deny_purge=True), V2_14, "allow_msg_schedules needs allow_rollup")


@pytest.mark.parametrize("option, old, new, message", [
    ("allow_msg_counter", None, True, "allow_msg_counter cannot change from false to true"),
    ("allow_msg_counter", True, False, "allow_msg_counter cannot change from true to false"),
    ("persist_mode", None, "async", "persist_mode cannot change from default to async"),
    ("persist_mode", "async", "default", "persist_mode cannot change from async to default"),
    ("allow_msg_schedules", True, False, "allow_msg_schedules cannot be unset once set"),
    ("sealed", True, False, "sealed cannot be unset once set"),
])
def test_what_never_changes_or_only_turns_on_is_refused_on_a_live_stream(option, old, new, message):
    live = info(**({option: old} if old is not None else {}))
    text = refused(desired(**{option: new}), live, V2_14, message, "on_immutable_change=fail")
    assert "stream 'ORDERS' in domain 'hub'" in text


@pytest.mark.parametrize("option, old, new", [
    ("allow_atomic", None, True), ("allow_atomic", True, False), ("allow_batched", None, True),
    ("allow_batched", True, False), ("allow_msg_schedules", None, True),
])
def test_what_the_server_changes_on_a_live_stream_is_an_update(option, old, new):
    live = info(**({option: old} if old is not None else {}))
    plan = js.plan(desired(**{option: new}), live, V2_14, WHERE)
    assert (plan.action, plan.fields, plan.body[option]) == ("update", [option], new)
    assert (plan.before[option], plan.after[option]) == (bool(old), new)


def test_recreate_applies_a_counter_change_and_a_second_plan_is_none():
    plan = js.plan(desired(allow_msg_counter=True, on_immutable_change="recreate"), info(), V2_14, WHERE)
    assert plan.action == "recreate" and plan.body["allow_msg_counter"] is True
    assert js.plan(desired(allow_msg_counter=True), info(allow_msg_counter=True), V2_14, WHERE).action == "none"


def test_a_new_stream_is_never_created_sealed_nor_recreated_so():
    refused(desired(sealed=True, subjects=["orders.>"]), None, V2_14, "sealed: nats-server cannot create a sealed",
            "then seal it in a later run")
    refused(desired(sealed=True, storage="memory", on_immutable_change="recreate"), info(), V2_14,
            "cannot recreate a sealed stream")


def test_sealing_is_an_update_that_shows_what_the_server_sets():
    plan = js.plan(desired(sealed=True), info(), js.ServerVersion((2, 9, 10), True), WHERE)
    assert plan.action == "update" and plan.fields == ["sealed"]
    body = plan.body
    assert (body["sealed"], body["max_age"], body["discard"], body["deny_delete"], body["deny_purge"],
            body["allow_rollup_hdrs"]) == (True, 0, "new", True, True, False)
    assert (plan.before["max_age"], plan.after["max_age"], plan.after["discard"]) == (3600 * 10**9, 0, "new")
    sealed = info(sealed=True, max_age=0, discard="new", deny_delete=True, deny_purge=True)
    assert js.plan(desired(sealed=True), sealed, V2_14, WHERE).action == "none"
    assert js.plan(desired(sealed=True, description="archive"), sealed, V2_14, WHERE).action == "update"


# -- placement.preferred: where the leader is, never part of the config ------------------------------------------

V2_10 = js.ServerVersion((2, 10, 26), True)
CLUSTER = {"name": "c", "leader": "n1", "replicas": [{"name": "n2", "current": True}, {"name": "n3", "current": True}]}


def clustered(**changes):
    live = info(num_replicas=3, **changes)
    live["cluster"] = copy.deepcopy(CLUSTER)
    return live


@pytest.mark.parametrize("version, text", [(js.ServerVersion((2, 9, 0), False), "2.9"), (V2_10, "2.10.26")])
def test_preferred_needs_2_11_and_older_servers_are_refused_naming_it(version, text):
    wanted = desired(subjects=["orders.>"], placement={"preferred": "n2"})
    for live in (None, info()):
        refused(wanted, live, version, "stream 'ORDERS' in domain 'hub': placement.preferred needs nats-server 2.11 "
                                       "or later (the server is %s)" % text)
    assert js.plan(desired(subjects=["orders.>"]), None, version, WHERE).action == "create"


def test_preferred_is_kept_out_of_the_config_and_alone_leaves_the_placement_as_it_is():
    only = desired(placement={"preferred": "n2", "cluster": None, "tags": None})
    assert only.preferred == "n2" and "placement" not in only.config
    both = desired(placement={"preferred": "n2", "cluster": "c", "tags": None})
    assert both.config["placement"] == {"cluster": "c"}
    cleared = desired(placement={"preferred": None, "cluster": None, "tags": None})
    assert cleared.preferred is None and cleared.config["placement"] is None  # {} still removes the placement
    plan = js.plan(only, clustered(placement={"cluster": "c"}), V2_14, WHERE)
    assert plan.action == "none"
    created = js.plan(desired(subjects=["orders.>"], placement={"preferred": "n2", "cluster": "c"}), None, V2_14, WHERE)
    assert created.body["placement"] == {"cluster": "c"}


@pytest.mark.parametrize("bad", ["", "  ", "n 2", 5])
def test_preferred_is_a_server_name(bad):
    with pytest.raises(js.StreamError, match="placement.preferred: .* is not a server name"):
        desired(placement={"preferred": bad})


def test_the_leader_moves_only_among_the_streams_servers():
    wanted = desired(placement={"preferred": "n2"})
    assert js.leader_move(wanted, clustered(), WHERE) == "n1"
    assert js.leader_move(desired(placement={"preferred": "n1"}), clustered(), WHERE) is None
    assert js.leader_move(desired(), clustered(), WHERE) is None
    with pytest.raises(js.StreamError) as err:
        js.leader_move(desired(placement={"preferred": "n4"}), clustered(), WHERE)
    assert ("stream 'ORDERS' in domain 'hub': placement.preferred: 'n4' holds no replica of the stream (its servers: "
            "n1, n2, n3)") in str(err.value)
    with pytest.raises(js.StreamError, match="runs without a cluster"):
        js.leader_move(wanted, info(), WHERE)


def test_a_preferred_server_without_a_replica_is_refused_before_sending_unless_the_servers_change():
    wanted = desired(placement={"preferred": "n4"})
    live = clustered()
    with pytest.raises(js.StreamError, match="'n4' holds no replica"):
        js.check_leader_move(wanted, js.plan(wanted, live, V2_14, WHERE), live, WHERE)
    grow = desired(placement={"preferred": "n4"}, replicas=5)
    plan = js.plan(grow, live, V2_14, WHERE)
    assert plan.action == "update" and not js.keeps_servers(plan)
    js.check_leader_move(grow, plan, live, WHERE)  # checked once the new servers hold it
    assert js.plan(grow, live, V2_14, WHERE).body.get("placement") is None
