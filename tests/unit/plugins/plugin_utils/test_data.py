"""Filters take plain data: lazy containers become dicts and lists before any copy."""

import copy
from collections.abc import Mapping

from ansible.vars.hostvars import HostVars

from ansible_collections.nats_edge.fleet.plugins.filter import nats_fleet
from ansible_collections.nats_edge.fleet.plugins.plugin_utils._data import plain, plain_call


class Lazy(Mapping):
    """Stands for a container that must not be copied: it refuses deepcopy."""

    def __init__(self, data):
        self.data = data

    def __getitem__(self, key):
        return self.data[key]

    def __iter__(self):
        return iter(self.data)

    def __len__(self):
        return len(self.data)

    def __deepcopy__(self, memo):
        raise AssertionError("a lazy container was copied")


def test_plain_turns_mappings_and_sequences_into_dicts_and_lists():
    value = plain(Lazy({"a": (1, Lazy({"b": [Lazy({})]}))}))
    assert value == {"a": [1, {"b": [{}]}]}
    assert isinstance(value, dict) and isinstance(value["a"], list) and isinstance(value["a"][1], dict)
    copy.deepcopy(value)


class LazyHostVars(HostVars):
    """Every host's variables, as ansible-core's lazy hostvars."""

    def __init__(self, data):  # pylint: disable=super-init-not-called
        self.data = data


def test_plain_call_leaves_hostvars_alone():
    seen = {}

    def func(hostvars, hosts, where=""):
        seen.update(hostvars=hostvars, hosts=hosts, where=where)

    lazy = LazyHostVars({"h": 1})
    plain_call(func, (lazy, (Lazy({}),)), {"where": "x"})
    assert seen["hostvars"] is lazy and seen["hosts"] == [{}] and seen["where"] == "x"


def test_the_check_filter_never_copies_its_lazy_input():
    accounts = [Lazy({"name": "A", "users": [Lazy({"name": "u", "permissions": Lazy({"pub": Lazy({"allow": ["x"]})})})]})]
    assert nats_fleet.nats_fleet_check(Lazy({"accounts": accounts})) == 2
