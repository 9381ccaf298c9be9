"""Every playbook of the collection has the collection's filters loaded once for its run.

A play's ``hosts`` is templated by ansible-playbook's main process; each task runs in a fork of it per host. A
filter plugin the main process never loaded is imported again in every such fork (about 30 ms of CPU per task and
host), so each playbook's first play passes its pattern through ``nats_edge.fleet.nats_preload`` (or imports a
playbook whose first play does).
"""

import glob
import os

import pytest
import yaml

from ansible_collections.nats_edge.fleet.plugins.filter.nats_fleet import FilterModule

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOKS = sorted(glob.glob(os.path.join(ROOT, "playbooks", "*.yml")))


def preloads(path):
    with open(path) as handle:
        first = yaml.safe_load(handle)[0]
    if "ansible.builtin.import_playbook" in first:
        return preloads(os.path.join(os.path.dirname(path), first["ansible.builtin.import_playbook"]))
    return "nats_edge.fleet.nats_preload" in str(first.get("hosts", ""))


@pytest.mark.parametrize("path", PLAYBOOKS, ids=os.path.basename)
def test_the_first_play_of_every_playbook_loads_the_collections_filters(path):
    assert preloads(path), "%s: the first play's hosts do not pass through nats_edge.fleet.nats_preload" % path


@pytest.mark.parametrize("value", ["nats_servers", ["hub-1", "spoke1-1"], [], ""])
def test_the_preload_filter_returns_its_input_unchanged(value):
    assert FilterModule().filters()["nats_preload"](value) == value
