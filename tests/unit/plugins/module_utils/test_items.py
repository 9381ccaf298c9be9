"""The one validator of list items (module_utils/_items.py)."""

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._items import (
    ItemChecker, ItemError, check_list, is_copy, refuse_twins, refuse_unknown, where)

SPEC = dict(name=dict(type="str", required=True), replicas=dict(type="int", default=1, aliases=["r"]),
            password=dict(type="str", no_log=True))


def test_a_good_item_gets_the_specs_defaults_and_keeps_what_it_set():
    assert ItemChecker(SPEC).check("streams[0]", {"name": "orders", "r": 3}) == {
        "name": "orders", "replicas": 3, "r": 3, "password": None}


@pytest.mark.parametrize("item, message", [
    ("orders", "streams[2] (x): expected a mapping, got 'orders'"),
    ({"name": "orders", "replica": 3}, "streams[2] (x): unknown option replica; an item takes name, password, replicas"),
    ({"name": "orders", "a": 1, "b": 2}, "streams[2] (x): unknown options a, b; an item takes name, password, replicas"),
    ({"replicas": 3}, "streams[2] (x): missing required arguments: name"),
    ({"name": "orders", "replicas": "many"}, "streams[2] (x): argument 'replicas' is of type"),
])
def test_a_bad_item_is_named_with_its_place_and_option(item, message):
    with pytest.raises(ItemError) as caught:
        ItemChecker(SPEC).check(where("streams", 2, "x"), item)
    assert str(caught.value).startswith(message)
    assert isinstance(caught.value, NatsEdgeError)


def test_accepted_keys_are_taken_off_and_listed_with_the_takers_name():
    checker = ItemChecker(SPEC, accepted=("hosts",), takes="jetstream_stream")
    assert checker.check("s", {"name": "a", "hosts": ["h"]})["name"] == "a"
    with pytest.raises(ItemError, match="unknown option host; jetstream_stream takes name, password, replicas, hosts"):
        checker.check("s", {"name": "a", "host": "h"})


def test_the_kinds_own_check_runs_last_and_its_error_is_prefixed():
    def then(validated):
        if validated["replicas"] > 5:
            raise NatsEdgeError("replicas: at most 5")
        return dict(validated, checked=True)
    checker = ItemChecker(SPEC, then=then)
    assert checker.check("s", {"name": "a"})["checked"] is True
    with pytest.raises(ItemError, match=r"^streams\[0\] \(a\): replicas: at most 5$") as caught:
        checker.check(where("streams", 0, "a"), {"name": "a", "replicas": 7})
    assert isinstance(caught.value.__cause__, NatsEdgeError)


def test_no_log_values_are_collected_for_the_module():
    checker = ItemChecker(SPEC)
    checker.check("s", {"name": "a", "password": "s3cret"})
    assert "s3cret" in checker.no_log_values


def test_is_copy():
    assert is_copy({"mirror": {"name": "a"}}) and is_copy({"sources": [{"name": "a"}]})
    assert not is_copy({"subjects": ["a"]}) and not is_copy({"sources": []}) and not is_copy(None)


def _unique_names(items):
    """A check of a whole list, in order: each name once."""
    seen = set()
    for item in items:
        if item["name"] in seen:
            raise NatsEdgeError("%r is declared more than once" % item["name"])
        seen.add(item["name"])
    return len(items)


def always_fails(_part):
    raise NatsEdgeError("always")


def test_a_list_check_names_the_item_at_which_the_list_fails():
    items = [{"name": "a"}, {"name": "b"}, {"name": "c"}, {"name": "b"}, {"name": "a"}]
    places = [where("streams", index, item["name"]) for index, item in enumerate(items)]
    assert check_list(places[:3], items[:3], _unique_names) == 3
    with pytest.raises(ItemError, match=r"^streams\[3\] \(b\): 'b' is declared more than once$") as caught:
        check_list(places, items, _unique_names)
    assert isinstance(caught.value.__cause__, NatsEdgeError)
    # a check that fails whatever the items (nothing to name) raises its own error
    with pytest.raises(NatsEdgeError, match="^always$"):
        check_list([], [], always_fails)


def test_twins_are_refused_naming_both():
    items = [{"dest": "/a"}, {"dest": "/b"}, {"dest": "/a"}]
    places = ["fetches[%d]" % index for index in range(3)]
    refuse_twins(places[:2], items[:2], lambda item: [item["dest"]], lambda dest: "dest %s" % dest)
    with pytest.raises(ItemError, match=r"^fetches\[2\]: dest /a is declared twice, also at fetches\[0\]; declare it once"):
        refuse_twins(places, items, lambda item: [item["dest"]], lambda dest: "dest %s" % dest)


def test_unknown_keys_are_refused_with_what_takes_them():
    refuse_unknown("s", {"name": "a", "r": 1, "hosts": []}, SPEC, accepted=("hosts",))
    with pytest.raises(ItemError, match=r"^s: unknown option host; nsc_account takes name, password, replicas, hosts$"):
        refuse_unknown("s", {"name": "a", "host": 1}, SPEC, "nsc_account", ("hosts",))
