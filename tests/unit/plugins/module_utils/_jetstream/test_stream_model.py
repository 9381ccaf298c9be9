"""Stream options -> API config, normalisation, update rules and plans, without a server."""

import copy

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import stream_model as js
from ansible_collections.nats_edge.fleet.plugins.module_utils import _units as units

V2_9 = js.ServerVersion((2, 9, 10), True)
V2_10 = js.ServerVersion((2, 10, 26), True)
V2_11 = js.ServerVersion((2, 11, 11), True)
V2_12 = js.ServerVersion((2, 12, 8), True)
V2_15 = js.ServerVersion((2, 15, 1), True)
WHERE = "in domain 'hub'"

# A STREAM.INFO config as 2.15.1 returns it for {"name": "ORDERS", "subjects": ["orders.>"]}.
SERVER_CONFIG = {
    "name": "ORDERS", "subjects": ["orders.>"], "retention": "limits", "max_consumers": -1, "max_msgs": -1,
    "max_bytes": -1, "max_age": 0, "max_msgs_per_subject": -1, "max_msg_size": -1, "discard": "old",
    "storage": "file", "num_replicas": 1, "duplicate_window": 120000000000, "compression": "none",
    "allow_direct": False, "mirror_direct": False, "sealed": False, "deny_delete": False, "deny_purge": False,
    "allow_rollup_hdrs": False, "consumer_limits": {}, "allow_msg_ttl": False,
    "metadata": {"_nats.level": "5", "_nats.req.level": "0", "_nats.ver": "2.15.1"},
}
# The same from 2.9.10, which knows neither compression nor metadata.
SERVER_CONFIG_29 = {k: v for k, v in SERVER_CONFIG.items()
                    if k not in ("compression", "consumer_limits", "allow_msg_ttl", "metadata")}


def params(**over):
    base = {key: None for key in js.STREAM_OPTIONS}
    base.update(name="ORDERS", state="present", on_immutable_change="fail", allow_data_loss=False)
    base.update(over)
    return base


def desired(**over):
    return js.desired_from_params(params(**over))


def info(config=None, messages=0, consumers=0, **changes):
    config = copy.deepcopy(config or SERVER_CONFIG)
    config.update(changes)
    return {"config": config, "state": {"messages": messages, "consumer_count": consumers}}


# --------------------------------------------------------------------------
# units


@pytest.mark.parametrize("value, ns", [
    ("2m", 120 * 10**9), ("1h30m", 5400 * 10**9), ("500ms", 5 * 10**8), ("1.5h", 5400 * 10**9),
    ("7d", 7 * 86400 * 10**9), ("1w", 7 * 86400 * 10**9), ("1h 30m", 5400 * 10**9), ("250us", 250000),
    (90, 90 * 10**9), ("90", 90 * 10**9), (0.5, 5 * 10**8), (0, 0), ("0s", 0),
])
def test_durations_become_nanoseconds(value, ns):
    assert units.duration_ns(value) == ns


@pytest.mark.parametrize("value", ["5 minutes", "2 m x", "m", "", "-5s", -1, True, None, "1y", [1]])
def test_bad_durations_are_refused(value):
    with pytest.raises(ValueError):
        units.duration_ns(value)


def test_a_duration_beyond_int64_nanoseconds_is_refused():
    with pytest.raises(ValueError, match="too long"):
        units.duration_ns(86400000000000)  # nanoseconds pasted where seconds are meant


@pytest.mark.parametrize("value, size", [
    (1024, 1024), ("1K", 1000), ("1KB", 1024), ("1KiB", 1024), ("512MB", 512 * 1024**2), ("1G", 10**9),
    ("1GiB", 1024**3), ("1.5M", 1500000), (-1, -1), ("-1", -1), ("10", 10),
])
def test_sizes_read_as_nats_server_reads_them(value, size):
    assert units.size_bytes(value) == size


@pytest.mark.parametrize("value", ["1 gigabyte", "1XB", -2, True, "abc"])
def test_bad_sizes_are_refused(value):
    with pytest.raises(ValueError):
        units.size_bytes(value)


@pytest.mark.parametrize("value, canonical", [
    ("2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z"),
    ("2024-01-01T01:00:00+01:00", "2024-01-01T00:00:00Z"),
    ("2020-01-01T00:00:00+01:00", "2019-12-31T23:00:00Z"),
    ("2024-03-01T00:30:00.500000000-01:00", "2024-03-01T01:30:00.5Z"),
    ("2024-01-01 00:00:00+00:00", "2024-01-01T00:00:00Z"),
    ("2024-02-29T12:00:00", "2024-02-29T12:00:00Z"),
])
def test_times_compare_in_utc(value, canonical):
    assert units.canonical_time(value) == canonical


@pytest.mark.parametrize("subject", ["orders", "orders.*", "orders.>", "a.*.c", "$JS.EVENT.>"])
def test_valid_subjects(subject):
    assert units.check_subject(subject) == subject


@pytest.mark.parametrize("subject", ["", "a..b", "a b", "a.>.b", "a.b*", ".a", "a.", ">x"])
def test_invalid_subjects(subject):
    with pytest.raises(ValueError):
        units.check_subject(subject)


@pytest.mark.parametrize("name", ["bad.name", "a*", "x>", "a b", "a/b", "a\\b", ""])
def test_invalid_names(name):
    with pytest.raises(ValueError):
        units.check_name(name)


# --------------------------------------------------------------------------
# options -> API config


def test_only_the_options_set_reach_the_config_in_api_names_and_units():
    config = desired(subjects=["orders.>", "orders.>", "b.>"], max_age="1h", max_bytes="1GiB", replicas=3,
                     allow_rollup=True, max_msgs=0, duplicate_window="2m", max_msg_size="1MB").config
    assert config == {
        "subjects": ["b.>", "orders.>"], "max_age": 3600 * 10**9, "max_bytes": 1024**3, "num_replicas": 3,
        "allow_rollup_hdrs": True, "max_msgs": -1, "duplicate_window": 120 * 10**9, "max_msg_size": 1024**2,
    }


def test_domain_shorthand_becomes_the_external_api_of_that_domain():
    config = desired(mirror={"name": "cnc", "domain": "hub", "start_seq": None, "start_time": None,
                             "filter_subject": None, "subject_transforms": None, "external": None}).config
    assert config["mirror"] == {"name": "cnc", "external": {"api": "$JS.hub.API", "deliver": ""}}


def test_sources_keep_their_start_filter_and_external_api_and_compare_as_a_set():
    config = desired(sources=[
        {"name": "test", "external": {"api": "JS.test@hub.API", "deliver": "deliver.test"}},
        {"name": "RETURNS", "start_time": "2024-01-01T01:00:00+01:00"},
        {"name": "ORDERS", "start_seq": 5, "filter_subject": "orders.eu.>"},
    ]).config
    assert config["sources"] == [
        {"name": "ORDERS", "opt_start_seq": 5, "filter_subject": "orders.eu.>"},
        {"name": "RETURNS", "opt_start_time": "2024-01-01T00:00:00Z"},
        {"name": "test", "external": {"api": "JS.test@hub.API", "deliver": "deliver.test"}},
    ]


def test_metadata_values_become_strings_and_server_keys_are_refused():
    assert desired(metadata={"owner": "shop", "tier": 1, "pii": False}).config["metadata"] == {
        "owner": "shop", "tier": "1", "pii": "false"}
    with pytest.raises(js.StreamError, match="_nats.ver.*belong to the server"):
        desired(metadata={"_nats.ver": "2.10.0"})


def test_empty_dicts_remove_transforms_republish_and_placement():
    config = desired(subject_transform={"src": None, "dest": None}, republish={"src": None, "dest": None,
                     "headers_only": None}, placement={"cluster": None, "tags": []}).config
    assert config == {"subject_transform": None, "republish": None, "placement": None}


@pytest.mark.parametrize("over, message", [
    (dict(max_age="5 minutes"), "stream 'ORDERS': max_age: '5 minutes' is not a duration"),
    (dict(max_bytes="lots"), "stream 'ORDERS': max_bytes: 'lots' is not a size"),
    (dict(subjects=["orders..eu"]), "stream 'ORDERS': subjects: 'orders..eu' is not a subject"),
    (dict(subjects=["a"], mirror={"name": "X"}), "mirror and subjects cannot be combined"),
    (dict(sources=[{"name": "A"}], mirror={"name": "X"}), "mirror and sources cannot be combined"),
    (dict(first_seq=5, mirror={"name": "X"}), "mirror and first_seq cannot be combined"),
    (dict(deny_purge=True, allow_rollup=True), "cannot be combined with deny_purge"),
    (dict(discard_new_per_subject=True, discard="old"), "needs discard: new"),
    (dict(duplicate_window="10ms"), "duplicate_window: '10ms': use at least 100ms"),
    (dict(duplicate_window=0), "use at least 100ms"),
    (dict(max_msgs=-5), "max_msgs: -5"),
    (dict(replicas=7), "replicas: 7: use 1 to 5"),
    (dict(max_msg_size="4GiB"), "max_msg_size"),
    (dict(mirror={"name": "bad.name"}), "mirror: name: 'bad.name' is not a valid name"),
    (dict(sources=[{"name": "A"}, {"name": "A"}]), r"sources\[1\]: duplicates an earlier source"),
    (dict(sources=[{"name": "A", "filter_subject": "a", "subject_transforms": [{"src": "a", "dest": "b"}]}]),
     "filter_subject and subject_transforms cannot be combined"),
    (dict(sources=[{"name": "A", "start_time": "yesterday"}]), r"sources\[0\]: start_time: 'yesterday' is not a time"),
    (dict(sources=[{"name": "A", "start_seq": 2, "start_time": "2024-01-01T00:00:00Z"}]), "cannot be combined"),
    (dict(mirror={"name": "A", "domain": "hub.x"}), "is not a JetStream domain name"),
    (dict(mirror={"name": "A", "external": {"api": "$JS.*.API", "deliver": ""}}), "external.api"),
    (dict(sources=[{"name": "A", "start_seq": 5, "consumer": {"name": "C", "deliver_subject": "d"}}]),
     r"sources\[0\]: consumer and start_seq cannot be combined"),
    (dict(mirror={"name": "A", "filter_subject": "a.>", "consumer": {"name": "C", "deliver_subject": "d"}}),
     "mirror: consumer and filter_subject cannot be combined"),
    (dict(sources=[{"name": "A", "consumer": {"name": "C.x", "deliver_subject": "d"}}]),
     r"sources\[0\]: consumer.name: 'C.x' is not a valid name"),
    (dict(sources=[{"name": "A", "consumer": {"name": "C", "deliver_subject": "src.*"}}]),
     r"sources\[0\]: consumer.deliver_subject"),
    (dict(subject_transform={"src": "a.>", "dest": None}), "both src and dest are required"),
    (dict(republish={"src": "a.>", "dest": None, "headers_only": True}), "republish: dest is required"),
])
def test_bad_input_names_the_stream_and_the_field(over, message):
    with pytest.raises(js.StreamError, match=message):
        desired(**over)


def test_bad_stream_name_is_refused_before_anything_else():
    with pytest.raises(js.StreamError, match="stream name: 'a.b' is not a valid name"):
        js.desired_from_params(params(name="a.b"))


def test_absent_needs_no_config():
    assert desired(state="absent", subjects=["x"]).config == {}


# --------------------------------------------------------------------------
# the bulk form


def top(**over):
    base = {key: None for key in js.module_argspec()}
    base.update(state="present", on_immutable_change="fail", allow_data_loss=False)
    base.update(over)
    return base


def item(name, **over):
    value = {key: None for key in js.STREAM_OPTIONS}
    value.update(name=name, state=None, on_immutable_change=None, allow_data_loss=None)
    value.update(over)
    return value


def test_items_take_the_task_policy_unless_they_set_their_own():
    items = js.desired_items(top(on_immutable_change="recreate", state="present", streams=[
        item("A", subjects=["a"]), item("B", state="absent", on_immutable_change="fail")]))
    assert [(d.name, d.state, d.on_immutable_change) for d in items] == [
        ("A", "present", "recreate"), ("B", "absent", "fail")]


def test_a_bad_item_fails_the_whole_list_naming_the_item():
    with pytest.raises(js.StreamError, match="stream 'B': max_age"):
        js.desired_items(top(streams=[item("A"), item("B", max_age="soon"), item("C")]))


def test_a_stream_declared_twice_is_refused():
    with pytest.raises(js.StreamError, match="'A' is declared more than once"):
        js.desired_items(top(streams=[item("A"), item("A")]))


def test_items_with_their_own_creds_are_another_accounts_names_and_subjects():
    items = js.desired_items(top(creds="/c/A.creds", streams=[
        item("test", subjects=["test"]), item("test", creds="/c/B.creds", subjects=["test"])]))
    assert [(d.name, d.creds) for d in items] == [("test", None), ("test", "/c/B.creds")]
    with pytest.raises(js.StreamError, match=r"'test' \(with creds /c/B.creds\) is declared more than once"):
        js.desired_items(top(streams=[item("test", creds="/c/B.creds"), item("test", creds="/c/B.creds")]))
    with pytest.raises(js.StreamError, match="overlaps"):
        js.desired_items(top(streams=[item("A", creds="/c/B.creds", subjects=["a.>"]),
                                      item("B", creds="/c/B.creds", subjects=["a.b"])]))


def test_an_item_naming_the_tasks_own_creds_is_in_the_tasks_account():
    with pytest.raises(js.StreamError, match="'test' is declared more than once"):
        js.desired_items(top(creds="/c/A.creds", streams=[item("test"), item("test", creds="/c/A.creds")]))


def test_the_single_form_takes_the_task_creds_as_its_connection():
    assert js.desired_items(dict(params(), creds="/c/A.creds"))[0].creds is None


def test_streams_of_one_list_cannot_share_subjects():
    overlap = "stream 'B': subjects: 'orders.eu.>' overlaps 'orders.\\*.>' of stream 'A'"
    with pytest.raises(js.StreamError, match=overlap):
        js.desired_items(top(streams=[item("A", subjects=["orders.*.>"]), item("B", subjects=["orders.eu.>"])]))
    assert len(js.desired_items(top(streams=[item("A", subjects=["a.>"]), item("B", subjects=["b.>"]),
                                             item("C", state="absent", subjects=["a.>"])]))) == 3


@pytest.mark.parametrize("first, second, collide", [
    ("a.b", "a.b", True), ("a.*", "a.b", True), ("a.>", "a.b.c", True), ("a.>", "a", False), ("a.b", "a.c", False),
    ("*.b", "a.*", True), ("a.b.c", "a.b", False), (">", "x.y", True), ("a.*.c", "a.b.d", False),
])
def test_subject_collisions(first, second, collide):
    assert units.subjects_collide(first, second) is collide
    assert units.subjects_collide(second, first) is collide  # pylint: disable=arguments-out-of-order


@pytest.mark.parametrize("api, domain", [
    ("$JS.spoke-1.API", "spoke-1"), ("$JS.API", None), ("$JS.a.b.API", None), ("$JS.x.API.", None),
    ("JS.A.API", None), ("", None), (None, None),
])
def test_the_domain_of_an_api_prefix(api, domain):
    assert units.api_domain(api) == domain


def test_stream_options_next_to_streams_are_refused():
    with pytest.raises(js.StreamError, match="inside each item.*subjects"):
        js.desired_items(top(subjects=["x"], streams=[item("A")]))


# --------------------------------------------------------------------------
# normalisation and comparison


def test_server_additions_are_stripped_and_omitted_fields_take_their_defaults():
    actual = js.from_api(SERVER_CONFIG)
    assert actual["metadata"] == {}
    assert actual["description"] == "" and actual["no_ack"] is False and actual["first_seq"] == 0
    assert actual["sources"] == [] and actual["mirror"] is None
    assert actual["consumer_limits"] == {"inactive_threshold": 0, "max_ack_pending": 0}
    assert js.from_api(SERVER_CONFIG_29)["compression"] == "none"


def test_a_server_config_compares_equal_to_the_options_that_created_it():
    config = desired(subjects=["orders.>"], storage="file", max_age=0, compression="none", metadata={},
                     sources=[], description="").config
    assert js.changed_fields(config, js.from_api(SERVER_CONFIG)) == []


def test_subjects_compare_as_a_set_and_placement_only_by_keys_set():
    actual = js.from_api(dict(SERVER_CONFIG, subjects=["b", "a"], placement={"cluster": "hub", "tags": ["y", "x"]}))
    assert js.changed_fields({"subjects": ["a", "b"], "placement": {"cluster": "hub"}}, actual) == []
    assert js.changed_fields({"placement": {"tags": ["x", "y"]}}, actual) == []
    assert js.changed_fields({"placement": {"cluster": "edge"}}, actual) == ["placement.cluster"]


def test_metadata_compares_whole_so_a_removed_key_is_a_change():
    actual = js.from_api(dict(SERVER_CONFIG, metadata={"owner": "shop", "old": "1", "_nats.ver": "2.15.1"}))
    assert js.changed_fields({"metadata": {"owner": "shop"}}, actual) == ["metadata"]
    assert js.changed_fields({"metadata": {"owner": "shop", "old": "1"}}, actual) == []


def test_source_times_and_empty_deliver_prefixes_compare_normalised():
    server = dict(SERVER_CONFIG, subjects=None, sources=[
        {"name": "test", "opt_start_time": "2020-01-01T00:00:00+01:00", "external": {"api": "$JS.leaf.API"}}])
    wanted = desired(sources=[{"name": "test", "domain": "leaf", "start_time": "2019-12-31T23:00:00Z"}]).config
    assert js.changed_fields(wanted, js.from_api(server)) == []


def test_a_mirror_compares_whole():
    mirror = {"name": "cnc", "filter_subject": "cnc.a", "external": {"api": "$JS.hub.API", "deliver": ""}}
    server = dict(SERVER_CONFIG, subjects=None, mirror=mirror)
    assert js.changed_fields(desired(mirror={"name": "cnc", "domain": "hub"}).config, js.from_api(server)) == [
        "mirror"]


# --------------------------------------------------------------------------
# versions


def test_version_of_a_stream_from_the_metadata_2_11_adds_or_the_fields_it_writes():
    assert js.version_from_stream(info()) == js.ServerVersion((2, 15, 1), True)
    assert js.version_from_stream(info(SERVER_CONFIG_29)).number == (2, 9, 0)
    ten = {k: v for k, v in SERVER_CONFIG.items() if k != "metadata"}
    assert js.version_from_stream(info(ten)).number == (2, 10, 0)


@pytest.mark.parametrize("account, version", [
    ({"api": {"total": 0, "errors": 0}}, (2, 9, 0)),
    ({"reserved_memory": 0, "api": {"total": 0, "errors": 0}}, (2, 10, 0)),
    ({"api": {"level": 1}}, (2, 11, 0)),
    ({"api": {"level": 2}}, (2, 12, 0)),
    ({"api": {"level": 3}}, (2, 12, 0)),
    ({"api": {"level": 4}}, (2, 14, 0)),
    ({"api": {"level": 5}}, (2, 15, 0)),
    ({"api": {"level": 9}}, (2, 15, 0)),
])
def test_version_floor_of_a_domain_from_its_account_info(account, version):
    assert js.version_from_account(account).number == version


def test_creating_with_newer_fields_depends_on_the_version():
    assert js.needs_version(desired(compression="s2").config)
    assert not js.needs_version(desired(compression="none", subjects=["a"]).config)
    assert js.needs_version(desired(sources=[{"name": "A", "subject_transforms": [{"src": "a", "dest": "b"}]}]).config)


# --------------------------------------------------------------------------
# plans


def test_create_none_update_and_delete():
    assert js.plan(desired(subjects=["orders.>"]), None, None, WHERE).action == "create"
    assert js.plan(desired(subjects=["orders.>"]), info(), V2_15, WHERE).action == "none"
    update = js.plan(desired(subjects=["orders.>"], max_age="1h"), info(), V2_15, WHERE)
    assert (update.action, update.fields) == ("update", ["max_age"])
    assert js.plan(desired(state="absent"), info(), V2_15, WHERE).action == "delete"
    assert js.plan(desired(state="absent"), None, None, WHERE).action == "none"


def test_an_update_keeps_what_the_user_left_out_and_removes_what_they_emptied():
    server = dict(SERVER_CONFIG, max_msgs=1000, subject_transform={"src": "orders.>", "dest": "o.>"},
                  deny_delete=True)
    update = js.plan(desired(max_age="1h", subject_transform={"src": None, "dest": None}), info(server), V2_15,
                     WHERE)
    assert update.body["max_msgs"] == 1000 and update.body["deny_delete"] is True
    assert update.body["max_age"] == 3600 * 10**9
    assert "subject_transform" not in update.body
    assert update.after["max_age"] == 3600 * 10**9 and update.before["max_age"] == 0


def test_create_body_holds_the_name_and_only_what_was_set():
    plan = js.plan(desired(subjects=["orders.>"], max_age="1d"), None, None, WHERE)
    assert plan.body == {"name": "ORDERS", "subjects": ["orders.>"], "max_age": 86400 * 10**9}


def test_storage_never_changes_and_the_failure_names_stream_domain_and_field():
    with pytest.raises(js.StreamError) as caught:
        js.plan(desired(storage="memory"), info(), V2_15, WHERE)
    assert str(caught.value) == ("stream 'ORDERS' in domain 'hub': storage cannot change from file to memory "
                                 "(on_immutable_change=fail)")


@pytest.mark.parametrize("old, new, version, allowed", [
    ("limits", "interest", V2_9, False),
    ("limits", "interest", V2_10, True),
    ("interest", "limits", V2_15, True),
    ("limits", "workqueue", V2_15, False),
    ("workqueue", "limits", V2_15, False),
    ("workqueue", "interest", V2_10, False),
])
def test_retention_rules_by_version(old, new, version, allowed):
    plan_args = (desired(retention=new), info(retention=old), version, WHERE)
    if allowed:
        assert js.plan(*plan_args).action == "update"
    else:
        with pytest.raises(js.StreamError, match="retention cannot change from %s to %s" % (old, new)):
            js.plan(*plan_args)


def test_workqueue_refusal_says_never_even_on_old_servers():
    with pytest.raises(js.StreamError, match="never to or from workqueue"):
        js.plan(desired(retention="workqueue"), info(), V2_9, WHERE)


@pytest.mark.parametrize("version, allowed", [(V2_10, False), (V2_11, False), (V2_12, True), (V2_15, True)])
def test_max_consumers_changes_from_2_12(version, allowed):
    plan_args = (desired(max_consumers=10), info(), version, WHERE)
    if allowed:
        assert js.plan(*plan_args).action == "update"
    else:
        with pytest.raises(js.StreamError, match="max_consumers cannot change from -1 to 10 on nats-server 2.1"):
            js.plan(*plan_args)


def test_republish_is_fixed_on_2_9_only():
    wanted = desired(republish={"src": "orders.>", "dest": "copy.>", "headers_only": None})
    with pytest.raises(js.StreamError, match="republish cannot change from none to"):
        js.plan(wanted, info(SERVER_CONFIG_29), js.ServerVersion((2, 9, 0), False), WHERE)
    assert js.plan(wanted, info(), V2_10, WHERE).action == "update"


@pytest.mark.parametrize("field", ["deny_delete", "deny_purge", "allow_msg_ttl"])
def test_one_way_flags_can_be_set_but_not_unset(field):
    assert js.plan(desired(**{field: True}), info(), V2_15, WHERE).action == "update"
    with pytest.raises(js.StreamError, match="%s cannot be unset once set" % field):
        js.plan(desired(**{field: False}), info(**{field: True}), V2_15, WHERE)


MIRROR_CONFIG = dict({k: v for k, v in SERVER_CONFIG.items() if k not in ("subjects", "duplicate_window")},
                     name="recv-cnc", mirror={"name": "cnc", "external": {"api": "$JS.hub.API", "deliver": ""}})


def mirror_info(**changes):
    return info(MIRROR_CONFIG, messages=5, **changes)


def test_declaring_subjects_for_a_mirror_promotes_it_from_2_12():
    plan = js.plan(desired(name="recv-cnc", subjects=["cnc.>"]), mirror_info(), V2_12, WHERE)
    assert plan.action == "promote" and "mirror" not in plan.body and plan.body["subjects"] == ["cnc.>"]


@pytest.mark.parametrize("version", [V2_9, V2_10, V2_11])
def test_promotion_before_2_12_fails_clearly(version):
    with pytest.raises(js.StreamError, match="'recv-cnc' in domain 'hub': mirror cannot be removed on nats-server "
                                             "2.1?[019].* needs 2.12 or later"):
        js.plan(desired(name="recv-cnc", subjects=["cnc.>"]), mirror_info(), version, WHERE)


def test_a_declaration_that_leaves_the_mirror_out_leaves_it_alone():
    assert js.plan(desired(name="recv-cnc", max_age=0), mirror_info(), V2_9, WHERE).action == "none"


def test_a_mirror_cannot_change_or_be_added():
    with pytest.raises(js.StreamError, match="mirror cannot change from cnc \\(\\$JS.hub.API\\) to other"):
        js.plan(desired(name="recv-cnc", mirror={"name": "other", "domain": "hub"}), mirror_info(), V2_15, WHERE)
    with pytest.raises(js.StreamError, match="cannot become a mirror"):
        js.plan(desired(mirror={"name": "cnc"}), info(), V2_15, WHERE)


def test_recreate_refuses_a_stream_with_data_unless_allowed():
    wanted = desired(storage="memory", on_immutable_change="recreate")
    with pytest.raises(js.StreamError, match="would delete its 3 messages and 1 consumer: set allow_data_loss"):
        js.plan(wanted, info(messages=3, consumers=1), V2_15, WHERE)
    plan = js.plan(desired(storage="memory", on_immutable_change="recreate", allow_data_loss=True),
                   info(messages=3), V2_15, WHERE)
    assert plan.action == "recreate" and plan.body == {"name": "ORDERS", "storage": "memory"}
    assert js.plan(wanted, info(), V2_15, WHERE).action == "recreate"


def test_newer_fields_are_refused_on_older_servers_before_any_request():
    with pytest.raises(js.StreamError, match="compression needs nats-server 2.10 or later \\(the server is 2.9\\)"):
        js.plan(desired(compression="s2"), None, js.ServerVersion((2, 9, 0), False), WHERE)
    with pytest.raises(js.StreamError, match="metadata needs nats-server 2.10"):
        js.plan(desired(metadata={"a": "b"}), info(SERVER_CONFIG_29), js.ServerVersion((2, 9, 0), False), WHERE)
    with pytest.raises(js.StreamError, match="allow_msg_ttl needs nats-server 2.11"):
        js.plan(desired(allow_msg_ttl=True), info(), V2_10, WHERE)
    assert js.plan(desired(compression="none"), info(SERVER_CONFIG_29), V2_9, WHERE).action == "none"


def test_not_applied_names_fields_the_server_overrode():
    wanted = desired(mirror={"name": "cnc"}, mirror_direct=False).config
    server = dict(MIRROR_CONFIG, mirror={"name": "cnc"}, mirror_direct=True)
    assert js.not_applied(wanted, {"config": server}) == ["mirror_direct"]


def test_diff_is_normalised_before_and_after_with_a_header():
    result = js.diff(js.plan(desired(max_age="1h"), info(), V2_15, WHERE))
    assert result["before"]["max_age"] == 0 and result["after"]["max_age"] == 3600 * 10**9
    assert result["before_header"] == "stream ORDERS"


def test_an_empty_source_list_removes_every_source_and_other_fields_keep_a_mirror():
    server = dict(SERVER_CONFIG, subjects=None, sources=[{"name": "A"}, {"name": "B"}])
    plan = js.plan(desired(sources=[]), info(server), V2_15, WHERE)
    assert (plan.action, plan.fields, plan.body["sources"]) == ("update", ["sources"], [])
    kept = js.plan(desired(name="recv-cnc", max_age="1h"), mirror_info(), V2_15, WHERE)
    assert kept.action == "update" and kept.body["mirror"] == MIRROR_CONFIG["mirror"]


# --------------------------------------------------------------------------
# documentation


def test_examples_cover_the_reference_scenario():
    import yaml

    from ansible_collections.nats_edge.fleet.plugins.modules import jetstream_stream as module

    tasks = yaml.safe_load(module.EXAMPLES)
    used = [task["nats_edge.fleet.jetstream_stream"] for task in tasks]
    assert any(t.get("name") == "recv-cnc" and t.get("mirror", {}).get("domain") == "hub" for t in used)
    assert any(t.get("api_prefix") == "JS.test@hub.API" for t in used)
    assert set(yaml.safe_load(module.RETURN)) == {"name", "action", "leader", "stream", "streams", "actions", "diff"}


def test_the_first_bad_option_in_the_old_order_is_the_one_reported():
    # every duration is read before the duplicate window's floor is checked
    with pytest.raises(js.StreamError, match="subject_delete_marker_ttl: 'bad'"):
        desired(duplicate_window="50ms", subject_delete_marker_ttl="bad")
    with pytest.raises(js.StreamError, match="duplicate_window: 'bad'"):
        desired(duplicate_window="bad", subject_delete_marker_ttl="bad")
    with pytest.raises(js.StreamError, match="duplicate_window: '50ms': use at least 100ms"):
        desired(duplicate_window="50ms", subjects=["bad subject"])
    with pytest.raises(js.StreamError, match="first_seq: -1 cannot be negative"):
        desired(first_seq=-1, metadata={"_nats.x": "1"})


def test_the_config_keeps_the_order_options_were_always_converted_in():
    config = desired(sources=[{"name": "A"}], metadata={"a": "b"}, first_seq=2, subject_delete_marker_ttl="1m",
                     duplicate_window="1m", replicas=3, compression="s2", description="d").config
    assert list(config) == ["description", "compression", "duplicate_window", "subject_delete_marker_ttl",
                            "num_replicas", "first_seq", "metadata", "sources"]


def test_several_newer_fields_are_named_in_one_message_in_a_fixed_order():
    config = desired(metadata={"a": "b"}, first_seq=2, consumer_limits={"max_ack_pending": 5}, compression="s2",
                     subject_transform={"src": "a", "dest": "b"}, allow_msg_ttl=True).config
    with pytest.raises(js.StreamError) as caught:
        js.plan(js.Desired("ORDERS", "present", config, "fail", False, [], None), None, V2_9, WHERE)
    assert [part.split(" ")[0] for part in str(caught.value).split(": ", 1)[1].split("; ")] == [
        "compression", "subject_transform", "metadata", "first_seq", "consumer_limits", "allow_msg_ttl"]


def test_a_durable_sourcing_consumer_is_kept_and_needs_2_14():
    made = desired(sources=[{"name": "A", "domain": "site-1", "consumer": {"name": "hub", "deliver_subject": "src.A"}}]).config
    assert made["sources"] == [{"name": "A", "external": {"api": "$JS.site-1.API", "deliver": ""},
                                "consumer": {"name": "hub", "deliver_subject": "src.A"}}]
    old = js.ServerVersion((2, 12, 8), True)
    assert js.unsupported_fields(made, old) == ["sources.consumer needs nats-server 2.14 or later (the server is 2.12.8)"]
    assert js.unsupported_fields(made, js.ServerVersion((2, 14, 0), True)) == []
    assert js.needs_version(made)
    # as the server answers it
    assert js._sources_from_api([{"name": "A", "consumer": {"name": "hub", "deliver_subject": "src.A"}}]) == [
        {"name": "A", "consumer": {"name": "hub", "deliver_subject": "src.A"}}]


def test_a_source_the_stream_copies_cannot_take_or_drop_its_durable_consumer():
    # the server would count it as a new source and copy the origin again from its first message
    plain = [{"name": "A", "domain": "site-1"}, {"name": "B", "domain": "site-2"}]
    durable = [dict(plain[0], consumer={"name": "hub", "deliver_subject": "src.A"}), plain[1]]
    copying = info(sources=desired(sources=plain).config["sources"])
    with pytest.raises(js.StreamError) as caught:
        js.plan(desired(sources=durable), copying, V2_15, WHERE)
    assert str(caught.value).startswith("stream 'ORDERS' in domain 'hub': sources.consumer cannot change for 'A', which "
                                        "the stream already copies: nats-server would take it for a new source")
    with pytest.raises(js.StreamError, match="sources.consumer cannot change for 'A'"):
        js.plan(desired(sources=plain), info(sources=desired(sources=durable).config["sources"]), V2_15, WHERE)
    # a new source may come with its consumer
    assert js.plan(desired(sources=plain + [dict(name="C", domain="site-3", consumer={"name": "hub", "deliver_subject": "src.C"})]),
                   copying, V2_15, WHERE).action == "update"
