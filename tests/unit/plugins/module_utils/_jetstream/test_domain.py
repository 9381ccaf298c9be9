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
     "consumers[0] (w): value of ack_policy must be one of: explicit, all, none, got: maybe"),
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
