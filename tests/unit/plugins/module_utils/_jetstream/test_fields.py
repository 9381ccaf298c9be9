"""The shared declarative field: conversions by kind, overrides, defaults, version floors."""

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import consumer_model, stream_model
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.fields import ABSENT, Field, by_name

SECOND = 10 ** 9


@pytest.mark.parametrize("kind, given, expected", [
    ("duration", "1m", 60 * SECOND),
    ("durations", ["1s", "2s"], [SECOND, 2 * SECOND]),
    ("size", "1KiB", 1024),
    ("time", "2024-01-01T01:00:00+01:00", "2024-01-01T00:00:00Z"),
    ("percent", "50%", 50),
    ("metadata", {"a": 1}, {"a": "1"}),
    ("choice", "ALL", "all"),
    ("int", 5, 5),
    ("str", "x", "x"),
])
def test_field_kind_converts_what_the_user_wrote(kind, given, expected):
    assert Field("f", kind).from_user(given) == expected


@pytest.mark.parametrize("kind, given, message", [
    ("duration", 0, "a duration of 0 is not allowed"),
    ("percent", 101, "not a percentage"),
    ("size", "junk", "junk"),
])
def test_field_kind_conversion_raises_a_plain_value_error(kind, given, message):
    with pytest.raises(ValueError, match=message) as caught:
        Field("f", kind).from_user(given)
    assert caught.type is ValueError  # each model names the option in its own error


def test_field_convert_replaces_the_kind_and_gets_the_context():
    field = Field("max_msgs", "int", convert=lambda value, name: (value, name))
    assert field.from_user(3, "ORDERS") == (3, "ORDERS")


def test_field_absent_server_values_take_the_default_or_the_kinds_zero():
    assert Field("f", "bool").from_api(None) is False
    assert Field("f", "str", default="none").from_api(None) == "none"
    assert Field("f", "list").from_api(None) == []
    assert Field("f", "dict").from_api(None) is None
    assert Field("f", "int", default=ABSENT).zero() == 0


def test_field_defaults_and_values_from_the_api_are_copies():
    default = {"a": []}
    field = Field("f", "dict", default=default)
    field.zero()["a"].append(1)
    assert default == {"a": []}
    value = {"a": [1]}
    field.from_api(value)["a"].append(2)
    assert value == {"a": [1]}


def test_field_normalise_sees_absent_values_too():
    field = Field("f", "list", normalise=lambda value: sorted(value or []))
    assert field.from_api(None) == []
    assert field.from_api(["b", "a"]) == ["a", "b"]


def test_field_metadata_from_the_api_drops_what_the_server_stamps():
    assert Field("f", "metadata").from_api({"_nats.ver": "2.15.1", "team": "ops"}) == {"team": "ops"}


def test_field_in_use_ignores_empty_and_default_values():
    compression = Field("compression", "str", default="none", since=(2, 10, 0))
    assert not compression.in_use("none")
    assert not compression.in_use(None)
    assert compression.in_use("s2")
    limits = Field("consumer_limits", "dict", used=lambda value: any((value or {}).values()))
    assert not limits.in_use({"max_ack_pending": 0})
    assert limits.in_use({"max_ack_pending": 5})


def test_field_option_and_floor_names_default_to_the_api_name():
    field = Field("num_replicas", "int")
    assert (field.option, field.since_path) == ("num_replicas", "num_replicas")
    field = Field("num_replicas", "int", option="replicas", since_path="x.y")
    assert (field.option, field.since_path) == ("replicas", "x.y")


def test_field_display_writes_durations_and_percentages_as_users_do():
    assert Field("f", "duration").display(90 * SECOND) == "1m30s"
    assert Field("f", "duration").display(0) == 0
    assert Field("f", "percent").display(50) == "50%"
    assert Field("f", "percent").to_api(50) == "50%"


def test_field_tables_of_both_models_name_each_field_once():
    for fields in (stream_model.FIELDS, consumer_model.FIELDS):
        assert len(by_name(fields)) == len(fields)
    options = [f.option for f in stream_model.FIELDS]
    assert len(set(options)) == len(options)


def test_field_table_of_streams_covers_every_stream_option():
    options = set(f.option for f in stream_model.FIELDS)
    assert options == set(stream_model.STREAM_OPTIONS)


def test_field_table_of_streams_derives_the_old_tables():
    assert stream_model.MIN_VERSION == {
        "compression": (2, 10, 0), "subject_transform": (2, 10, 0), "metadata": (2, 10, 0),
        "first_seq": (2, 10, 0), "consumer_limits": (2, 10, 0), "mirror.subject_transforms": (2, 10, 0),
        "sources.subject_transforms": (2, 10, 0), "allow_msg_ttl": (2, 11, 0), "subject_delete_marker_ttl": (2, 11, 0),
        "persist_mode": (2, 12, 0), "allow_msg_counter": (2, 12, 0), "allow_atomic": (2, 12, 0),
        "allow_msg_schedules": (2, 12, 0), "mirror.consumer": (2, 14, 0), "sources.consumer": (2, 14, 0),
        "allow_batched": (2, 14, 0)}
    assert list(stream_model.MIN_VERSION) == [
        "compression", "subject_transform", "metadata", "first_seq", "consumer_limits", "mirror.subject_transforms",
        "sources.subject_transforms", "allow_msg_ttl", "subject_delete_marker_ttl", "persist_mode", "allow_msg_counter",
        "allow_atomic", "allow_msg_schedules", "mirror.consumer", "sources.consumer", "allow_batched"]
    assert sorted(stream_model.IMMUTABLE) == sorted(
        ["storage", "retention", "max_consumers", "republish", "deny_delete", "deny_purge", "allow_msg_ttl", "mirror",
         "persist_mode", "allow_msg_counter", "allow_msg_schedules", "sealed"])
    assert sorted(stream_model._DURATIONS) == ["duplicate_window", "max_age", "subject_delete_marker_ttl"]
