"""The stream a key-value bucket maps to (nats clients' mapping), and the checks of a bucket's or a store's
options, keys, values and objects that run before anything is sent."""
import json
import re

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import bucket_content
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import buckets as kv
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import stream_model as js_stream


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
    for bad in ("a..b", ".a", "a.", "a b", "", "a*", "a>"):
        with pytest.raises(kv.BucketError, match="is not a valid key"):
            kv.check_key("cfg", bad)


# -- every option, key and value is checked before anything is sent ---------------------------------------------

@pytest.mark.parametrize("key, hint", [(True, "'yes' or 'on'"), (False, "'yes' or 'on'"), (5, "'5'"), (1.5, "'1.5'"),
                                       (None, "'null'")])
def test_a_key_yaml_reads_as_a_boolean_or_a_number_is_refused_saying_to_quote_it(key, hint):
    with pytest.raises(kv.BucketError) as refused:
        kv.checked_entries("cfg", {key: "x"})
    assert "bucket 'cfg': entries: the key %r is" % (key,) in str(refused.value)
    assert "not text" in str(refused.value) and "quote it, as %s" % hint in str(refused.value)


def test_a_key_has_at_most_1024_characters():
    assert kv.check_key("cfg", "k" * 1024) == "k" * 1024
    with pytest.raises(kv.BucketError, match="entries: a key of 1025 characters is too long; a key has at most 1024"):
        kv.check_key("cfg", "k" * 1025)


def test_a_null_value_is_refused_saying_what_to_write_and_how_to_delete_a_key():
    with pytest.raises(kv.BucketError) as refused:
        kv.checked_entries("cfg", {"gone": None})
    message = str(refused.value)
    assert message.startswith("bucket 'cfg': entries.gone: null is not a value")
    assert "write '' for an empty value or 'null' for that text" in message
    assert "to delete the key, leave it out and set exclusive: true" in message


def test_a_string_is_stored_as_it_is_and_anything_else_as_json():
    assert kv.checked_entries("cfg", {"a": "on", "b": True, "c": 5, "d": {"y": [1], "x": None}}) == {
        "a": b"on", "b": b"true", "c": b"5", "d": b'{"x":null,"y":[1]}'}
    assert kv.object_content("fw", 0, "stable") == b"stable"
    assert kv.object_content("fw", 0, {"mode": "edge"}) == b'{"mode":"edge"}'
    assert kv.object_content("fw", 0, [1, 2]) == b"[1,2]"
    with pytest.raises(kv.BucketError, match=r"bucket 'fw': objects\[0\].content: null is not a value"):
        kv.object_content("fw", 0, None)


@pytest.mark.parametrize("stream", [kv.kv_stream, kv.object_store_stream])
@pytest.mark.parametrize("replicas", [0, -1, 6, True])
def test_replicas_are_1_to_5_as_for_streams(stream, replicas):
    with pytest.raises(kv.BucketError, match=r"bucket 'cfg': replicas: %r; use 1 to 5 \(left out, 1\)" % replicas):
        stream("cfg", {"replicas": replicas})
    assert stream("cfg", {})["replicas"] == 1 and stream("cfg", {"replicas": 3})["replicas"] == 3


@pytest.mark.parametrize("history", [True, False, 0, 65, "5"])
def test_history_is_a_number_from_1_to_64(history):
    with pytest.raises(kv.BucketError, match=r"bucket 'cfg': history: %r; a key keeps 1 to 64 values" % (history,)):
        kv.kv_stream("cfg", {"history": history})


@pytest.mark.parametrize("stream, what", [(kv.kv_stream, "a value"), (kv.object_store_stream, "an object")])
def test_a_ttl_is_at_least_100ms(stream, what):
    with pytest.raises(kv.BucketError) as refused:
        stream("cfg", {"ttl": "50ms"})
    assert str(refused.value).startswith("bucket 'cfg': ttl: '50ms': %s lives at least 100ms" % what)
    assert "duplicate_window" not in str(refused.value)
    assert stream("cfg", {"ttl": "100ms"})["max_age"] == "100000000ns"
    assert stream("cfg", {"ttl": 0})["max_age"] == 0


def test_sizes_are_checked_naming_the_bucket_option():
    with pytest.raises(kv.BucketError, match="bucket 'cfg': max_value_size: '3GiB' is larger than a server takes"):
        kv.kv_stream("cfg", {"max_value_size": "3GiB"})
    with pytest.raises(kv.BucketError, match="bucket 'cfg': max_bytes: 'lots' is not a size"):
        kv.object_store_stream("cfg", {"max_bytes": "lots"})
    assert kv.kv_stream("cfg", {"max_bytes": "1KiB", "max_value_size": 0})["max_bytes"] == 1024


@pytest.mark.parametrize("options, domain, field", [
    ({"mirror": {"name": "cfg"}}, None, "mirror"),
    ({"mirror": {"name": "cfg", "domain": "hub"}}, "hub", "mirror"),
    ({"mirror": {"name": "cfg", "external": {"api": "$JS.hub.API"}}}, "hub", "mirror"),
    ({"sources": [{"name": "other", "domain": "leaf"}, {"name": "cfg"}]}, None, "sources[1]"),
])
def test_a_bucket_cannot_copy_itself(options, domain, field):
    with pytest.raises(kv.BucketError, match=r"bucket 'cfg': %s: names this bucket itself" % field.replace("[", r"\[")):
        kv.kv_stream("cfg", options, domain)
    if "mirror" in options:
        with pytest.raises(kv.BucketError, match="names this bucket itself"):
            kv.object_store_stream("cfg", options, domain)


def test_a_copy_of_the_same_name_in_another_domain_is_taken():
    assert kv.kv_stream("cfg", {"mirror": {"name": "cfg", "domain": "hub"}}, "leaf")["mirror"]["name"] == "KV_cfg"
    assert kv.kv_stream("cfg", {"mirror": {"name": "cfg", "domain": "hub"}}, None)["mirror"]["name"] == "KV_cfg"
    assert kv.kv_stream("cfg", {"sources": [{"name": "cfg", "domain": "leaf"}]}, "hub")["sources"]


def test_promote_is_not_with_mirror():
    with pytest.raises(kv.BucketError, match="bucket 'cfg': promote makes a copy a bucket of its own"):
        kv.kv_stream("cfg", {"promote": True, "mirror": {"name": "cfg", "domain": "hub"}})
    assert "mirror" not in kv.kv_stream("cfg", {"promote": True})


def test_declared_buckets_checks_every_bucket_option_key_and_value_before_anything_is_sent():
    """The fleet's preflight runs the same function: a bad option of any item is found before the first bucket."""
    good = {"name": "good", "entries": {"a": "1"}}
    for bad, message in (({"name": "bad", "replicas": 0}, "bucket 'bad': replicas: 0"),
                         ({"name": "bad", "ttl": "10ms"}, "bucket 'bad': ttl: '10ms'"),
                         ({"name": "bad", "entries": {True: "x"}}, "bucket 'bad': entries: the key True"),
                         ({"name": "bad", "entries": {"a": None}}, "bucket 'bad': entries.a: null is not a value"),
                         ({"name": "bad", "mirror": {"name": "bad"}}, "bucket 'bad': mirror: names this bucket")):
        with pytest.raises(kv.BucketError, match=message.replace("(", r"\(")):
            kv.declared_buckets({"buckets": [good, bad], "state": "present"})
    with pytest.raises(kv.BucketError, match="names this bucket itself"):
        kv.declared_buckets({"buckets": [{"name": "cfg", "sources": [{"name": "cfg", "domain": "hub"}]}],
                             "state": "present", "domain": "hub"})
    assert kv.declared_buckets({"buckets": [{"name": "gone", "replicas": 0}], "state": "absent"})  # nothing to check


# -- objects ------------------------------------------------------------------------------------------------------

def test_an_object_name_has_at_most_1024_bytes():
    assert kv.check_object_name("fw", 0, "\u00e9" * 512) == "\u00e9" * 512
    with pytest.raises(kv.BucketError, match=r"bucket 'fw': objects\[1\].name: a name of 1026 bytes is too long"):
        kv.check_object_name("fw", 1, "\u00e9" * 513)
    with pytest.raises(kv.BucketError, match="an object needs a name"):
        kv.check_object_name("fw", 0, "  ")


def test_object_metadata_values_are_text_numbers_and_booleans_as_their_text():
    assert kv.object_metadata("fw", "objects[0] (a)", {"board": "rpi4", "rev": 2, "signed": True, "ratio": 1.5}) == {
        "board": "rpi4", "rev": "2", "signed": "true", "ratio": "1.5"}
    for value, what in (({"rev": 2}, "a mapping"), ([1], "a list"), (None, "null")):
        with pytest.raises(kv.BucketError) as refused:
            kv.object_metadata("fw", "objects[0] (a)", {"board": value})
        assert str(refused.value).startswith("bucket 'fw': objects[0] (a).metadata.board: %s is not text" % what)
    with pytest.raises(kv.BucketError, match="the key 5 is a number, not text: quote it"):
        kv.object_metadata("fw", "objects[0] (a)", {5: "x"})
    meta = kv.object_meta("fw", "a", "n", 1, 1, "d", "t", metadata={"rev": 2, "signed": True})
    assert meta["metadata"] == {"rev": "2", "signed": "true"}
    assert not kv.meta_differs(meta, None, {"rev": 2, "signed": True})


def test_orphaned_chunks_are_the_uploads_of_the_object_its_metadata_does_not_name():
    mine = kv.nuid_prefix("gw.bin")
    other = kv.nuid_prefix("other.bin")
    subjects = ["$O.fw.C.%sa1" % mine, "$O.fw.C.%sb2" % mine, "$O.fw.C.%sc3" % other, "$O.fw.C.legacy"]
    assert kv.orphaned_chunks("fw", "gw.bin", subjects, mine + "b2") == ["$O.fw.C.%sa1" % mine]
    assert kv.orphaned_chunks("fw", "gw.bin", subjects, None) == ["$O.fw.C.%sa1" % mine, "$O.fw.C.%sb2" % mine]
    assert len(mine) == 16 and mine != other


def test_meta_of_message_reads_the_stored_metadata():
    import base64
    message = {"data": base64.b64encode(json.dumps({"name": "a", "nuid": "n"}).encode()).decode()}
    assert kv.meta_of_message(message) == {"name": "a", "nuid": "n"}
    assert kv.meta_of_message({"data": "!!"}) is None and kv.meta_of_message(None) is None


# -- what a bucket refuses of the stream the server has ---------------------------------------------------------

COPY = {"config": {"name": "KV_cfg", "mirror": {"name": "KV_cfg", "external": {"api": "$JS.hub.API", "deliver": ""}},
                   "max_bytes": -1}, "state": {"bytes": 5000}}


def test_a_copy_is_promoted_only_when_the_task_sets_promote():
    check = kv.live_check("key-value bucket", "KV_", "cfg", {})
    with pytest.raises(kv.BucketError) as refused:
        check({"subjects": ["$KV.cfg.>"]}, COPY, "in domain 'leaf'")
    assert str(refused.value) == (
        "key-value bucket 'cfg' in domain 'leaf' is a read-only copy of bucket 'cfg' in domain 'hub', and this task "
        "leaves out mirror: that would make it a bucket of its own for good (it would never follow its origin "
        "again). To keep the copy, set mirror: {name: cfg, domain: hub}; to promote it, set promote: true")
    kv.live_check("key-value bucket", "KV_", "cfg", {"promote": True})({}, COPY, "in domain 'leaf'")
    kv.live_check("key-value bucket", "KV_", "cfg", {"mirror": {"name": "cfg", "domain": "hub"}})(
        {}, COPY, "in domain 'leaf'")
    local = dict(COPY, config=dict(COPY["config"], mirror={"name": "OBJ_fw"}))
    with pytest.raises(kv.BucketError, match="of store 'fw' in the same domain.*set mirror: {name: fw}"):
        kv.live_check("object store", "OBJ_", "copy", {})({}, local, "in the local domain")


def test_max_bytes_below_what_a_bucket_holds_is_refused_naming_the_bytes():
    check = kv.live_check("object store", "OBJ_", "fw", {"promote": True})
    with pytest.raises(kv.BucketError) as refused:
        check({"max_bytes": 1000}, COPY, "in domain 'hub'")
    assert str(refused.value).startswith("object store 'fw' in domain 'hub': max_bytes: 1000 is below the 5000 bytes "
                                         "it already holds")
    check({"max_bytes": 5000}, COPY, "in domain 'hub'")
    check({"max_bytes": -1}, COPY, "in domain 'hub'")
    lowered = dict(COPY, config=dict(COPY["config"], max_bytes=1000))
    check({"max_bytes": 1000}, lowered, "in domain 'hub'")  # as it is already: nothing is sent


def test_buckets_and_stores_carry_their_check_of_the_live_stream():
    items = kv.bucket_stream_items([("cfg", {}, "present"), ("gone", {}, "absent")])
    assert callable(items[0]["check_existing"]) and "check_existing" not in items[1]
    store = kv.store_stream_item({"name": "fw", "state": "present"})
    assert callable(store["check_existing"])


# -- where a key-value bucket's copy starts and which keys it takes ----------------------------------------------

def _copied(options, bucket="all"):
    """The bucket's stream item and its stream's config as stream_model takes it."""
    from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import stream_model as js
    item = kv.kv_stream(bucket, options)
    return item, js.desired_from_params(dict(item, state="present")).config


def test_a_key_filter_of_a_source_of_another_name_becomes_its_transform():
    item, config = _copied({"sources": [{"name": "status", "domain": "s1", "filter_subject": "site.*.up",
                                         "start_seq": 3}]})
    assert item["sources"] == [{"name": "KV_status", "domain": "s1", "start_seq": 3, "subject_transforms": [
        {"src": "$KV.status.site.*.up", "dest": "$KV.all.site.{{wildcard(1)}}.up"}]}]
    assert config["sources"] == [{"name": "KV_status", "opt_start_seq": 3, "subject_transforms": [
        {"src": "$KV.status.site.*.up", "dest": "$KV.all.site.{{wildcard(1)}}.up"}],
        "external": {"api": "$JS.s1.API", "deliver": ""}}]


@pytest.mark.parametrize("given, wanted", [
    ("config.>", "$KV.cfg.config.>"), ("$KV.cfg.config.>", "$KV.cfg.config.>"), ("fleet", "$KV.cfg.fleet"),
    ("*.up", "$KV.cfg.*.up"),
])
def test_a_filter_is_a_key_pattern_or_a_subject_under_the_origin(given, wanted):
    # a source of the same name (another domain) and a mirror keep the origin's subjects: a plain filter
    assert _copied({"sources": [{"name": "cfg", "domain": "hub", "filter_subject": given}]}, "cfg")[1][
        "sources"][0]["filter_subject"] == wanted
    mirror = {"name": "cfg", "domain": "hub", "filter_subject": given, "start_time": "2026-01-01T02:00:00+02:00"}
    assert _copied({"mirror": mirror}, "cfg")[1]["mirror"] == {
        "name": "KV_cfg", "filter_subject": wanted, "opt_start_time": "2026-01-01T00:00:00Z",
        "external": {"api": "$JS.hub.API", "deliver": ""}}


def test_a_greedy_filter_keeps_the_rest_of_the_key():
    assert _copied({"sources": [{"name": "status", "filter_subject": "$KV.status.site.a.>"}]})[0]["sources"][0][
        "subject_transforms"] == [{"src": "$KV.status.site.a.>", "dest": "$KV.all.site.a.>"}]


def test_transforms_of_a_source_map_the_origins_keys_to_this_buckets():
    item, _config = _copied({"sources": [{"name": "status", "subject_transforms": [
        {"src": "site.*", "dest": "sites.{{wildcard(1)}}"}, {"src": "$KV.status.fleet", "dest": "$KV.all.fleet"}]}]})
    assert item["sources"][0]["subject_transforms"] == [
        {"src": "$KV.status.site.*", "dest": "$KV.all.sites.{{wildcard(1)}}"},
        {"src": "$KV.status.fleet", "dest": "$KV.all.fleet"}]


@pytest.mark.parametrize("options, message", [
    ({"mirror": {"name": "o", "subject_transforms": [{"src": "a", "dest": "b"}]}},
     "bucket 'all': mirror.subject_transforms: a mirror keeps its origin's keys as they are"),
    ({"sources": [{"name": "o", "filter_subject": "$KV.other.x"}]},
     "bucket 'all': sources[0].filter_subject: '$KV.other.x' is not under $KV.o.> (the keys of bucket 'o')"),
    ({"sources": [{"name": "o", "filter_subject": "$KV.o."}]}, "is not under $KV.o.>"),
    ({"sources": [{"name": "o", "filter_subject": "a b"}]}, "sources[0].filter_subject: 'a b' is not a key pattern"),
    ({"sources": [{"name": "o", "filter_subject": "a.>.b"}]}, "'a.>.b' is not a key pattern"),
    ({"sources": [{"name": "o", "filter_subject": "a..b"}]}, "'a..b' is not a key pattern"),
    ({"sources": [{"name": "o", "subject_transforms": [{"src": "a", "dest": "$KV.o.a"}]}]},
     "sources[0].subject_transforms[0].dest: '$KV.o.a' is not under $KV.all.>"),
    ({"sources": [{"name": "o", "filter_subject": "a", "subject_transforms": [{"src": "a", "dest": "b"}]}]},
     "bucket 'all': sources[0]: filter_subject and subject_transforms cannot be combined"),
])
def test_bad_copy_options_are_refused_naming_the_bucket_and_the_option(options, message):
    with pytest.raises(kv.BucketError) as err:
        kv.kv_stream("all", options)
    assert message in str(err.value), str(err.value)


def test_start_seq_and_start_time_are_checked_as_a_streams():
    from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import stream_model as js
    with pytest.raises(js.StreamError, match="sources\\[0\\]: start_seq and start_time cannot be combined"):
        _copied({"sources": [{"name": "o", "start_seq": 2, "start_time": "2026-01-01T00:00:00Z"}]})
    with pytest.raises(js.StreamError, match="mirror: start_time: "):
        _copied({"mirror": {"name": "o", "start_time": "yesterday"}})


def test_the_bucket_options_take_the_streams_copy_options_and_the_store_keeps_its_own():
    for key in ("start_seq", "start_time", "filter_subject", "subject_transforms"):
        assert key in kv.KV_OPTIONS["mirror"]["options"] and key in kv.KV_OPTIONS["sources"]["options"]
        assert key not in kv.BUCKET_OPTIONS["mirror"]["options"]  # an object store's copy is whole
    assert kv.BUCKET_OPTIONS["placement"]["options"]["preferred"] == {"type": "str"}


def test_the_preferred_server_is_no_part_of_a_buckets_stream_config():
    from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import stream_model as js
    item = kv.kv_stream("cfg", {"placement": {"cluster": "c", "tags": None, "preferred": "n2"}})
    desired = js.desired_from_params(dict(item, state="present"))
    assert desired.preferred == "n2" and desired.config["placement"] == {"cluster": "c"}
    store = kv.object_store_stream("files", {"placement": {"preferred": "n1", "cluster": None, "tags": None}})
    desired = js.desired_from_params(dict(store, state="present"))
    assert desired.preferred == "n1" and "placement" not in desired.config


# -- sealed stores, object headers and chunk sizes ---------------------------------------------------------------

def test_a_sealed_store_has_what_the_server_forces_on_sealing():
    writable = kv.object_store_stream("rel", {"sealed": True})
    assert writable["allow_rollup"] and "sealed" not in writable  # written first, then sealed (seal_item)
    sealed = kv.object_store_stream("rel", {"sealed": True}, sealed=True)
    assert sealed["sealed"] and "allow_rollup" not in sealed and sealed["max_age"] == 0 and sealed["discard"] == "new"
    for option, forced in js_stream.SEALED_FORCES.items():
        assert sealed.get(option, forced) == forced, option
    # the stream model takes it as it is (no allow_rollup against the forced deny_purge)
    assert js_stream.desired_items({"streams": [dict(kv.store_stream_item(
        {"name": "rel", "state": "present"}, sealed=True), check_existing=None)]})[0].config["sealed"]
    assert kv.seal_item("rel") == {"name": "OBJ_rel", "sealed": True, "state": "present",
                                   "on_immutable_change": "fail", "allow_data_loss": False}


@pytest.mark.parametrize("options, live, message", [
    ({"sealed": True, "ttl": "30d"}, False, "bucket 'rel': ttl: '30d': sealed: a sealed store keeps its objects for "
                                            "good (nats-server sets its ttl to 0 when it seals it): leave ttl out"),
    ({"ttl": 60}, True, "bucket 'rel': ttl: 60: the store is sealed: a sealed store keeps its objects for good"),
    ({"sealed": False}, True, "object store 'rel' is sealed, and sealed: false cannot unseal it (nats-server never "
                              "unseals a stream): set sealed: true or leave it out"),
    ({"sealed": True, "mirror": {"name": "up", "domain": "hub"}}, False,
     "bucket 'rel': sealed: a copy (mirror) follows its origin and is read-only already: seal its origin 'up'"),
])
def test_what_a_sealed_store_cannot_have_is_refused(options, live, message):
    with pytest.raises(kv.BucketError) as refused:
        kv.object_store_stream("rel", options, sealed=live)
    assert str(refused.value).startswith(message), refused.value


def test_a_ttl_of_0_or_unsealing_a_store_that_is_not_sealed_is_taken():
    assert kv.object_store_stream("rel", {"sealed": True, "ttl": 0})["max_age"] == 0
    assert "sealed" not in kv.object_store_stream("rel", {"sealed": False, "ttl": 60})


def test_object_headers_are_lists_of_text_under_names_kept_as_written():
    assert kv.object_headers("fw", "objects[0] (a)", {"Content-Type": "text/plain", "x-tag": ["a", 2, True]}) == {
        "Content-Type": ["text/plain"], "x-tag": ["a", "2", "true"]}
    assert kv.object_headers("fw", "objects[0] (a)", None) == {}


@pytest.mark.parametrize("headers, message", [
    ({"Bad Name": "x"}, "objects[0] (a).headers: 'Bad Name' is not a header name; use printable ASCII without "
                        "spaces or ':'"),
    ({"K:V": "x"}, "'K:V' is not a header name"),
    ({"": "x"}, "'' is not a header name"),
    ({5: "x"}, "5 is not a header name; use printable ASCII without spaces or ':' (quote it)"),
    ({"K": None}, "objects[0] (a).headers.K: null is not text; a header's value is a string"),
    ({"K": {"a": 1}}, "objects[0] (a).headers.K: a mapping is not text"),
    ({"K": []}, "objects[0] (a).headers.K: an empty list"),
    ({"K": ["a", ["b"]]}, "objects[0] (a).headers.K: a list is not text"),
    ({"K": "one\ntwo"}, "objects[0] (a).headers.K: a header's value is one line: it has a line break"),
])
def test_bad_object_headers_are_refused_naming_the_object(headers, message):
    with pytest.raises(kv.BucketError) as refused:
        kv.object_headers("fw", "objects[0] (a)", headers)
    assert str(refused.value).startswith("bucket 'fw': ") and message in str(refused.value), refused.value


def test_headers_are_compared_like_metadata_when_declared():
    meta = kv.object_meta("fw", "a", "n", 1, 1, "d", "t", headers={"K": ["v"]})
    assert meta["headers"] == {"K": ["v"]}
    assert not kv.meta_differs(meta, None, None, {"K": ["v"]})
    assert kv.meta_differs(meta, None, None, {"K": ["w"]}) and kv.meta_differs(meta, None, None, {})
    assert not kv.meta_differs(meta, None, None)  # not declared (a fleet's object_stores item): kept
    # a client that wrote a name to a single string
    assert kv.headers_of({"headers": {"K": "v"}}) == {"K": ["v"]} and kv.headers_of({"headers": None}) == {}


def test_a_chunk_size_is_at_least_a_byte_and_at_most_the_max_payload():
    assert kv.object_chunk_size("fw", "objects[0] (a)", "128KiB") == 131072
    assert kv.object_chunk_size("fw", "objects[0] (a)", 1) == 1
    assert kv.object_chunk_size("fw", "objects[0] (a)", None) is None
    for value in (0, "0", -1, "-1"):
        with pytest.raises(kv.BucketError, match=r"bucket 'fw': objects\[0\] \(a\).chunk_size: .*(at least 1 byte|"
                                                 r"below 0)"):
            kv.object_chunk_size("fw", "objects[0] (a)", value)
    with pytest.raises(kv.BucketError, match="is not a size"):
        kv.object_chunk_size("fw", "objects[0] (a)", True)
    kv.check_chunk_size("fw", "objects[0] (a)", 1048576, 1048576)
    kv.check_chunk_size("fw", "objects[0] (a)", 5, None)
    with pytest.raises(kv.BucketError, match=r"objects\[0\] \(a\).chunk_size: 1048577 bytes is above the 1048576 "):
        kv.check_chunk_size("fw", "objects[0] (a)", 1048577, 1048576)
    assert kv.object_meta("fw", "a", "n", 1, 1, "d", "t", chunk_size=1024)["options"] == {"max_chunk_size": 1024}
    assert kv.object_meta("fw", "a", "n", 1, 1, "d", "t")["options"] == {"max_chunk_size": kv.CHUNK_SIZE}


def test_a_sealed_store_refuses_a_run_that_would_change_its_objects_naming_them():
    bucket_content.refuse_sealed("rel", dict(uploads=[], updates=[], deletes=[]), "in domain 'hub'")
    with pytest.raises(kv.BucketError) as refused:
        bucket_content.refuse_sealed("rel", dict(uploads=["a", "b"], updates=["c"], deletes=["d"]), "in domain 'hub'")
    assert str(refused.value) == (
        "object store 'rel' in domain 'hub' is sealed, so it is read-only for good: this task would upload 'a', 'b'; "
        "update the description, metadata or headers of 'c'; delete (exclusive) 'd'; declare the objects as the "
        "store holds them (nothing was sent)")


def test_checked_objects_gives_headers_only_to_objects_that_declare_the_key():
    params = dict(name="fw", state="present", objects=[
        dict(name="a", content="x", headers=None, chunk_size="1KiB"), dict(name="b", content="y")])
    wanted = bucket_content.checked_objects(params)
    assert wanted["a"]["headers"] == {} and wanted["a"]["chunk_size"] == 1024
    assert wanted["b"].get("headers") is None and wanted["b"]["chunk_size"] is None
    with pytest.raises(kv.BucketError, match=r"objects\[0\] \(a\).chunk_size: 0"):
        bucket_content.checked_objects(dict(params, objects=[dict(name="a", content="x", chunk_size=0)]))


def test_entry_ttls_are_whole_seconds_or_never_for_keys_of_entries():
    options = dict(entries={"a": "1", "b": "2", "c": "3"}, per_key_ttl=True, entry_ttls={"a": "1h", "b": 90, "c": "never"})
    assert kv.checked_entry_ttls("cfg", options) == {"a": "3600", "b": "90", "c": "never"}
    assert kv.checked_entry_ttls("cfg", dict(entries={"a": "1"})) == {}
    # with one value per key the server keeps a TTL shorter than the marker's as it is
    assert kv.checked_entry_ttls("cfg", dict(entries={"a": "1"}, per_key_ttl=True, limit_marker_ttl="10m",
                                             entry_ttls={"a": 5})) == {"a": "5"}


@pytest.mark.parametrize("options, message", [
    (dict(entries={"a": "1"}, entry_ttls={"a": "1h"}), "bucket 'cfg': entry_ttls needs per_key_ttl: true"),
    (dict(per_key_ttl=True, entry_ttls={"a": "1h"}), "bucket 'cfg': entry_ttls needs entries"),
    (dict(entries={"a": "1"}, per_key_ttl=True, entry_ttls={"b": "1h"}),
     "bucket 'cfg': entry_ttls.b: 'b' is not a key of entries"),
    (dict(entries={"a": "1"}, per_key_ttl=True, entry_ttls={"a": "500ms"}),
     "bucket 'cfg': entry_ttls.a: '500ms': a value lives whole seconds, at least 1s"),
    (dict(entries={"a": "1"}, per_key_ttl=True, entry_ttls={"a": "1.5s"}), "whole seconds"),
    (dict(entries={"a": "1"}, per_key_ttl=True, entry_ttls={"a": "soon"}), "entry_ttls.a: 'soon' is not a duration"),
    (dict(entries={"a": "1"}, per_key_ttl=True, limit_marker_ttl="10m", history=5, entry_ttls={"a": "1m"}),
     "entry_ttls.a: '1m' is shorter than the bucket's limit_marker_ttl '10m', which the server makes it on every "
     "write where a key keeps more than one value (history 5)"),
])
def test_bad_entry_ttls_are_refused_naming_the_bucket_and_the_key(options, message):
    with pytest.raises(kv.BucketError, match=re.escape(message)):
        kv.checked_entry_ttls("cfg", options)
    with pytest.raises(kv.BucketError, match=re.escape(message)):
        kv.declared_buckets(dict(name="cfg", state="present", **options))


@pytest.mark.parametrize("header, seconds", [
    ("90", 90), ("1h", 3600), ("1m30s", 90), ("never", -1), ("NEVER", -1), ("soon", None), ("", None)])
def test_a_stored_ttl_header_reads_as_the_server_reads_it(header, seconds):
    assert kv.ttl_seconds(header) == seconds


def test_a_value_is_written_again_when_its_ttl_differs_and_a_removed_key_is_gone():
    messages = [("$KV.cfg.a", {"Nats-TTL": "1h"}, b"1", 1), ("$KV.cfg.b", None, b"2", 2),
                ("$KV.cfg.c", {"Nats-Marker-Reason": "MaxAge", "Nats-TTL": "60"}, b"", 3),
                ("$KV.cfg.d", {"KV-Operation": "DEL"}, b"", 4)]
    current = kv.current_entries("cfg", messages)
    assert current == {"a": (b"1", 3600), "b": (b"2", None)}
    entries = {"a": "1", "b": "2", "c": "3"}
    assert kv.plan_entries("cfg", entries, current, False, {"a": "3600"}) == ({"c": b"3"}, [])
    # the TTL changes, or goes: written again; a key that gets one: written again
    assert kv.plan_entries("cfg", entries, current, False, {"a": "60"})[0] == {"a": b"1", "c": b"3"}
    assert kv.plan_entries("cfg", entries, current, False, {})[0] == {"a": b"1", "c": b"3"}
    assert kv.plan_entries("cfg", entries, current, False, {"a": "3600", "b": "never"})[0] == {"b": b"2", "c": b"3"}
