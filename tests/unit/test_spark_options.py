"""The jetstream data source's options, ranges, offsets and JSON typing (pure logic)."""

import datetime as dt

import pytest

from pyspark_jetstream import _options as opts


def read_options(**given):
    return opts.ReadOptions(dict({"stream": "telemetry"}, **given))


def test_defaults_and_case_insensitive_names():
    options = opts.ReadOptions({"STREAM": "t", "Servers": "nats://a:4222, nats://b:4222", "Partitions": "3"})
    assert options.servers == ["nats://a:4222", "nats://b:4222"]
    assert options.partitions == 3 and options.starting == "earliest" and options.tls is None
    assert opts.ReadOptions({"path": "from_load"}).streams == ["from_load"]


@pytest.mark.parametrize("given, message", [
    ({}, "'stream' is required"),
    ({"stream": "a.b"}, "is not a stream name"),
    ({"stream": "s", "partitons": "2"}, "unknown option(s) partitons"),
    ({"stream": "s", "partitions": "0"}, "'partitions': must be at least 1"),
    ({"stream": "s", "partitions": "two"}, "'partitions': 'two' is not a whole number"),
    ({"stream": "s", "domain": "hub", "api_prefix": "JS.x.API"}, "'domain' and 'api_prefix' exclude each other"),
    ({"stream": "s", "start_seq": "5", "start_time": "2026-01-01T00:00:00Z"}, "exclude each other"),
    ({"stream": "s", "starting": "latest", "start_seq": "5"}, "exclude each other"),
    ({"stream": "s", "starting": "newest"}, "'newest' is not earliest or latest"),
    ({"stream": "s", "start_time": "yesterday"}, "'start_time': 'yesterday' is not an RFC 3339 time"),
    ({"stream": "s", "creds": "/a", "user": "u"}, "'creds' and 'user' exclude each other"),
    ({"stream": "s", "tls_key": "/k"}, "'tls_key' needs 'tls_cert'"),
    ({"stream": "s", "tls_verify": "maybe"}, "'tls_verify': 'maybe' is not true or false"),
    ({"stream": "s", "deliver_prefix": "deliver.*"}, "must be a subject without wildcards"),
    ({"stream": "s", "timeout": "-1"}, "'timeout': must be positive"),
    ({"stream": "s", "json_schema": "site strin"}, "is not 'name type'"),
    ({"stream": "s", "json_schema": "a string, a long"}, "field 'a' appears twice"),
])
def test_bad_options_are_named(given, message):
    with pytest.raises(opts.OptionError) as caught:
        opts.ReadOptions(given)
    assert message in str(caught.value)


def test_tls_options_turn_tls_on():
    options = read_options(tls_ca="/ca.pem", tls_verify="false")
    assert options.tls == {"ca": "/ca.pem", "cert": None, "key": None, "verify": False, "handshake_first": False}


def test_split_range_covers_every_sequence_once():
    assert opts.split_range(1, 10, 3) == [(1, 4), (5, 7), (8, 10)]
    assert opts.split_range(5, 5, 4) == [(5, 5)]
    assert opts.split_range(10, 9, 2) == []
    for first, last, parts in ((1, 1000003, 7), (17, 40, 24), (3, 3, 1)):
        ranges = opts.split_range(first, last, parts)
        covered = [s for a, b in ranges for s in range(a, b + 1)]
        assert covered == list(range(first, last + 1))
        sizes = [b - a + 1 for a, b in ranges]
        assert max(sizes) - min(sizes) <= 1


def test_partition_count():
    assert opts.partition_count(read_options(partitions="4"), 1, 2) == 4
    assert opts.partition_count(read_options(), 1, 10) == 1
    assert opts.partition_count(read_options(messages_per_partition="100"), 1, 1000) == 10
    assert opts.partition_count(read_options(messages_per_partition="1"), 1, 1000) == 64
    assert opts.partition_count(read_options(), 10, 9) == 1


def test_offsets_belong_to_their_streams():
    start = opts.offset({"telemetry-north": 11, "telemetry-south": 4})
    assert start == {"streams": {"telemetry-north": 11, "telemetry-south": 4}}
    both = opts.offset_seqs(start, ["telemetry-north", "telemetry-south"])
    assert both == {"telemetry-north": 11, "telemetry-south": 4}
    # a stream added to the query is not in the checkpoint yet; one taken out is no longer read
    assert opts.offset_seqs(start, ["telemetry-north", "telemetry-east"]) == {"telemetry-north": 11}
    # what earlier versions wrote for their one stream
    assert opts.offset_seqs({"stream": "telemetry", "seq": 7}, ["telemetry"]) == {"telemetry": 7}
    with pytest.raises(opts.OptionError, match="checkpoint holds offsets of stream 'telemetry', the query reads 'other'"):
        opts.offset_seqs({"stream": "telemetry", "seq": 7}, ["other"])
    with pytest.raises(opts.OptionError, match="not an offset"):
        opts.offset_seqs({"x": 1}, ["telemetry"])


def test_several_streams():
    assert read_options(stream=" telemetry-north, telemetry-south ").streams == ["telemetry-north", "telemetry-south"]
    assert read_options(stream="a,b", start_time="2026-11-23T10:00:00Z").start_time is not None
    for given, message in (({"stream": "a,b,a"}, "'stream': a named twice"),
                           ({"stream": "a,b.c"}, "'b.c' is not a stream name"),
                           ({"stream": " , "}, "'stream' is required"),
                           ({"stream": "a,b", "start_seq": "5"}, "'start_seq': a sequence belongs to one stream"),
                           ({"stream": "a,b", "end_seq": "5"}, "'end_seq': a sequence belongs to one stream")):
        with pytest.raises(opts.OptionError) as caught:
            opts.ReadOptions(given)
        assert message in str(caught.value)


def test_end_offsets_share_the_limit_fairly():
    starts = {"a": 1, "b": 1, "c": 1}
    lasts = {"a": 100, "b": 5, "c": 100}
    assert opts.end_offsets(starts, lasts) == {"a": 101, "b": 6, "c": 101}
    # b has 5 to read: the other two share what it leaves of 30
    assert opts.end_offsets(starts, lasts, 30) == {"a": 13, "b": 6, "c": 14}
    assert sum(end - starts[n] for n, end in opts.end_offsets(starts, lasts, 30).items()) == 30
    # Trigger.AvailableNow's targets, and a stream with nothing new
    assert opts.end_offsets(starts, lasts, None, {"a": 51, "b": 6, "c": 1}) == {"a": 51, "b": 6, "c": 1}
    assert opts.end_offsets({"a": 101}, {"a": 100}, 10) == {"a": 101}


@pytest.mark.parametrize("start, last, most, cap, end", [
    (1, 100, None, None, 101),   # everything there is
    (1, 100, 10, None, 11),      # max_messages_per_trigger
    (95, 100, 10, None, 101),    # fewer left than the limit
    (1, 100, None, 51, 51),      # Trigger.AvailableNow stops at what was there when it started
    (101, 100, None, None, 101),  # nothing new
    (50, 30, None, None, 50),    # the stream was purged below us: never go back
])
def test_end_offset(start, last, most, cap, end):
    assert opts.end_offset(start, last, most, cap) == end


def test_durations_and_times():
    assert opts.parse_duration("90s") == 90 and opts.parse_duration("5m") == 300
    assert opts.parse_duration("1 hour") == 3600 and opts.parse_duration("250ms") == 0.25
    assert opts.parse_duration("15") == 15
    with pytest.raises(opts.OptionError):
        opts.parse_duration("soon")
    moment = opts.parse_time("2026-11-23T10:00:00Z")
    assert moment == dt.datetime(2026, 11, 23, 10, tzinfo=dt.timezone.utc)
    assert opts.rfc3339(moment) == "2026-11-23T10:00:00.000000Z"


FIELDS = opts.parse_ddl("site string, metric STRING, value double, count long, ok boolean, timestamp timestamp")


def test_ddl():
    assert FIELDS == [("site", "string"), ("metric", "string"), ("value", "double"), ("count", "long"),
                      ("ok", "boolean"), ("timestamp", "timestamp")]


def test_json_rows_are_typed_and_errors_name_the_field():
    payloads = [
        b'{"site": "s1", "metric": "temp", "value": 21, "count": 3.0, "ok": true, "timestamp": "2026-11-23T10:00:00.5Z"}',
        b'{"site": "s1", "value": 1.5, "timestamp": 1795428000.25}',
        b'{"site": "s1", "value": "21"}',
        b'{"site": "s1", "value": true}',
        b'{"site": 7}',
        b'{"count": 1.5}',
        b'{"timestamp": "tomorrow"}',
        b'[1, 2]',
        b'{"site": "s1",',
        b'\xff\xfe',
        b'',
    ]
    columns, errors = opts.parse_json_rows(payloads, FIELDS)
    assert errors[:2] == [None, None]
    assert columns["value"][:2] == [21.0, 1.5] and columns["count"][:2] == [3, None]
    assert columns["metric"][:2] == ["temp", None] and columns["ok"][0] is True
    assert columns["timestamp"][0] == 1795428000500000 and columns["timestamp"][1] == 1795428000250000
    assert errors[2] == "field 'value': expected double, got the string '21'"
    assert errors[3] == "field 'value': expected double, got a boolean"
    assert errors[4] == "field 'site': expected string, got a number"
    assert errors[5] == "field 'count': expected long, got a number"
    assert errors[6] == "field 'timestamp': expected timestamp, got the string 'tomorrow'"
    assert errors[7] == "not a JSON object but an array"
    assert all(e.startswith("not JSON: ") for e in errors[8:])
    # a row in error has no values at all: nothing half-parsed reaches a table
    for name, _kind in FIELDS:
        assert columns[name][2:] == [None] * (len(payloads) - 2)


def test_an_unreadable_file_is_named_with_the_caller_s_error(tmp_path):
    (tmp_path / "job.yml").write_text("a: 1\n")
    assert opts.read_text(str(tmp_path / "job.yml"), KeyError) == "a: 1\n"
    with pytest.raises(LookupError, match=r"cannot read creds file .*/gone\.creds: No such file"):
        opts.read_text(str(tmp_path / "gone.creds"), LookupError, "creds file")
    with pytest.raises(ValueError, match=r"^cannot read .*/gone\.yml: No such file"):
        opts.read_text(str(tmp_path / "gone.yml"), ValueError)
