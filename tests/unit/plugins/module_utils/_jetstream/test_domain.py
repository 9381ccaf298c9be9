"""jetstream_domain's item checks (one ItemChecker per list, the fetch's own check as its ``then``) and its
connections, one per account's creds."""

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._items import ItemError
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import domain as jd

LISTS = dict(streams=[], kv_buckets=[], object_stores=[], consumers=[], fetches=[], creds="/task.creds")


def checked(**lists):
    return jd.checked_items(dict(LISTS, **lists))


def failure(**lists):
    with pytest.raises(ItemError) as caught:
        checked(**lists)
    assert isinstance(caught.value, NatsEdgeError)
    return str(caught.value)


def test_domain_items_get_their_kinds_defaults_and_the_tasks_creds_become_none():
    items = checked(streams=[{"name": "S", "subjects": ["s.>"], "creds": "/task.creds"}],
                    kv_buckets=[{"name": "cfg", "creds": "/ops.creds"}],
                    fetches=[{"bucket": "files", "name": "a", "dest": "/tmp/a", "mode": "0640"}])
    assert items["streams"][0]["creds"] is None
    assert items["kv_buckets"][0]["creds"] == "/ops.creds" and items["kv_buckets"][0]["state"] == "present"
    assert items["fetches"] == [{"bucket": "files", "name": "a", "dest": "/tmp/a", "mode": 0o640, "creds": None}]
    assert items["consumers"] == [] and items["object_stores"] == []


def test_domain_item_checkers_one_per_list():
    assert sorted(jd.item_checkers()) == sorted(jd.ITEM_SPECS)


@pytest.mark.parametrize("lists, message", [
    (dict(kv_buckets=["cfg"]), "kv_buckets[0]: expected a mapping, got 'cfg'"),
    (dict(kv_buckets=[{"name": "cfg", "histroy": 3}]), "kv_buckets[0] (cfg): unknown option histroy; an item takes "),
    (dict(streams=[{"name": "S", "subjects": ["s.>"]}, {"subjects": ["a"]}]),
     "streams[1]: missing required arguments: name"),
    (dict(consumers=[{"stream": "S", "name": "w", "ack_policy": "maybe"}]),
     "consumers[0] (w): value of ack_policy must be one of: explicit, all, none, flow_control, got: maybe"),
    (dict(consumers=[{"stream": "S", "name": "w", "filter_subject": "a", "filter_subjects": ["b"]}]),
     "consumers[0] (w): parameters are mutually exclusive: filter_subject|filter_subjects"),
    (dict(fetches=[{"bucket": "files", "name": "a", "dest": "/tmp/a", "mode": "rw"}]),
     "fetches[0] (files/a): mode: 'rw' is not an octal mode"),
    (dict(fetches=[{"bucket": "fi.les", "name": "a", "dest": "/tmp/a"}]),
     "fetches[0] (fi.les/a): object store bucket name: 'fi.les' is not valid"),
    (dict(fetches=[{"bucket": "files", "name": "a", "dest": "/nonexistent/a"}]),
     "fetches[0] (files/a): dest: the directory of /nonexistent/a does not exist"),
])
def test_domain_item_problems_name_the_list_the_item_and_the_option(lists, message):
    assert failure(**lists).startswith(message)


def test_domain_fetch_check_failure_chains_the_kinds_error():
    with pytest.raises(ItemError) as caught:
        checked(fetches=[{"bucket": "files", "name": "a", "dest": "/tmp/a", "mode": "rw"}])
    assert isinstance(caught.value.__cause__, NatsEdgeError)


def test_domain_connections_open_one_client_per_creds(monkeypatch):
    opened = []

    class FakeClient(object):
        def __init__(self, params):
            opened.append(params.get("creds"))

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(jd, "NatsClient", FakeClient)
    import contextlib
    with contextlib.ExitStack() as stack:
        connect = jd.Connections(dict(servers=["nats://x:4222"], creds="/task.creds", nkey_seed=None, user=None,
                                      password=None, token=None), stack)
        assert connect(None) is connect(None)
        assert connect("/ops.creds") is not connect(None)
    assert opened == ["/task.creds", "/ops.creds"]


# -- the lists as wholes: checked before anything is written -------------------------------------------------------

def lists_failure(**lists):
    with pytest.raises(ItemError) as caught:
        jd.checked_lists(checked(**lists), jd.Warnings())
    return str(caught.value)


def test_the_lists_are_checked_together_and_give_what_the_run_converges():
    warnings = jd.Warnings()
    declared = jd.checked_lists(checked(
        streams=[{"name": "ORDERS", "subjects": ["orders.>"]}, {"name": "copy", "mirror": {"name": "ORDERS"}}],
        kv_buckets=[{"name": "cfg", "entries": {"a": 1}}], object_stores=[{"name": "files", "objects": [
            {"name": "a", "content": "x"}]}],
        consumers=[{"stream": "ORDERS", "name": "w", "ack_wait": 30}]), warnings)
    assert [d.name for d in declared.streams] == ["ORDERS", "copy", "KV_cfg", "OBJ_files"]
    assert [name for name, _options, _state in declared.buckets] == ["cfg"] and list(declared.objects[0]) == ["a"]
    assert declared.consumers == [{"ack_wait": 30 * 10**9}]


@pytest.mark.parametrize("lists, message", [
    (dict(streams=[{"name": "A", "subjects": ["a.>"]}, {"name": "B", "subjects": ["a.b"]}]),
     "streams[1] (B): stream 'B': subjects: 'a.b' overlaps 'a.>' of stream 'A'"),
    (dict(streams=[{"name": "A"}, {"name": "A", "creds": "/ops.creds"}, {"name": "A", "creds": "/ops.creds"}]),
     "streams[2] (A): stream 'A' (with creds /ops.creds) is declared more than once"),
    (dict(streams=[{"name": "KV_cfg", "subjects": ["x"]}], kv_buckets=[{"name": "cfg"}]),
     "kv_buckets[0] (cfg): stream 'KV_cfg' is declared more than once"),
    (dict(kv_buckets=[{"name": "ok"}, {"name": "cfg", "history": 65}]), "kv_buckets[1] (cfg): bucket 'cfg': history: 65"),
    (dict(kv_buckets=[{"name": "cfg", "entries": {"bad key": 1}}]), "kv_buckets[0] (cfg): bucket 'cfg': entries: 'bad key'"),
    (dict(object_stores=[{"name": "files", "objects": [{"name": "a", "src": "/nonexistent/a"}]}]),
     "object_stores[0] (files): bucket 'files': objects[0].src: /nonexistent/a is not a file"),
    (dict(consumers=[{"stream": "S", "name": "c", "max_deliver": 0}]),
     "consumers[0] (c): consumer 'c' on stream 'S': max_deliver: 0 is not allowed"),
    (dict(consumers=[{"stream": "S", "name": "c"}, {"stream": "S", "name": "d"}, {"stream": "S", "durable": "c"}]),
     "consumers[2] (c): consumer 'c' on stream 'S' is declared twice, also at consumers[0] (c); declare it once"),
    (dict(fetches=[{"bucket": "f", "name": "a", "dest": "/tmp/x"}, {"bucket": "f", "name": "b", "dest": "/tmp/./x"}]),
     "fetches[1] (f/b): dest /tmp/x (the file an object is written to) is declared twice, also at fetches[0] (f/a)"),
    (dict(streams=[{"name": "A", "mirror": {"name": "B"}}, {"name": "B", "mirror": {"name": "A"}}]),
     "streams[1] (B): mirror: copies in a cycle: stream 'B' copies from stream 'A', which copies from stream 'B'"),
    (dict(streams=[{"name": "A", "sources": [{"name": "C"}]}], kv_buckets=[{"name": "x"}],
          object_stores=[{"name": "B", "mirror": {"name": "A"}}]),
     None),  # a store's stream is OBJ_B: A copies from C, which is not there
])
def test_items_fine_alone_but_not_beside_each_other_are_named(lists, message):
    if message is None:
        jd.checked_lists(checked(**lists), jd.Warnings())
    else:
        assert lists_failure(**lists).startswith(message)


def test_a_cycle_of_copies_is_named_by_the_stream_that_closes_it():
    configs = [(("", "A"), {"mirror": {"name": "B"}}), (("", "B"), {"sources": [{"name": "C"}], "subjects": ["b"]}),
               (("", "C"), {"sources": [{"name": "A"}]}), (("", "D"), {"sources": [{"name": "A"}]})]

    def same(key, domain, name):
        return (key[0], name) if domain is None else None

    assert jd.copy_cycle(configs, same) == [(("", "C"), "sources[0]"), (("", "A"), "mirror"), (("", "B"), "sources[0]")]
    # a source filtered to subjects the copy does not hold takes nothing round: no cycle
    filtered = [configs[0], (("", "B"), {"sources": [{"name": "C", "filter_subject": "c.>"}], "subjects": ["b"]}), configs[2]]
    assert jd.copy_cycle(filtered, same) is None
    # an origin in another domain, or behind another account's import, is another stream
    assert jd.copy_cycle([(("", "A"), {"mirror": {"name": "A", "external": {"api": "$JS.hub.API", "deliver": ""}}})],
                         same) is None
    assert list(jd.copy_origins({"mirror": {"name": "x", "external": {"api": "$JS.hub.API", "deliver": ""}}})) == [
        ("mirror", "hub", "x")]
    assert list(jd.copy_origins({"sources": [{"name": "x", "external": {"api": "JS.a@hub.API", "deliver": "d.x"}}]})) == []


def test_a_consumer_is_planned_as_the_server_would_take_it():
    items = checked(consumers=[{"stream": "S", "name": "c", "ack_wait": "30s", "backoff": ["1s"]}])
    item, config = items["consumers"][0], jd.checked_lists(items, jd.Warnings()).consumers[0]
    with pytest.raises(jd.DomainError, match="^consumers\\[0\\] \\(c\\): ack_wait: the server replaces it"):
        jd.planned_consumer("consumers[0] (c)", item, config)
    item.update(ack_wait=None, backoff=None)
    assert jd.planned_consumer("c", item, {"deliver_policy": "new"}, {"deliver_policy": "new"}).action == "none"
    with pytest.raises(jd.DomainError, match="nats-server cannot change this on an existing consumer: deliver_policy"):
        jd.planned_consumer("c", item, {"deliver_policy": "new"}, {"deliver_policy": "all"})


def test_the_fetch_check_is_the_fetch_modules_own():
    from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import object_transfer
    assert jd.item_checkers()["fetches"].then.func is object_transfer.checked_fetch_item
    assert jd.item_checker("fetches", dest_here=False).then.keywords == {"on_this_host": False}
