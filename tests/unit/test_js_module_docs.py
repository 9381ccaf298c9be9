"""The JetStream consumer and info modules document exactly the options they accept."""

import importlib

import pytest
import yaml

from ansible_collections.nats_edge.fleet.plugins.doc_fragments.connection import ModuleDocFragment
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import CONNECTION_ARGSPEC, JETSTREAM_ARGSPEC

MODULES = ["jetstream_consumer", "jetstream_info"]


def load(name):
    return importlib.import_module("ansible_collections.nats_edge.fleet.plugins.modules.%s" % name)


@pytest.mark.parametrize("name", MODULES)
def test_documented_options_match_the_argument_spec(name):
    module = load(name)
    doc = yaml.safe_load(module.DOCUMENTATION)
    assert doc["module"] == name
    assert doc["extends_documentation_fragment"] == ["nats_edge.fleet.connection",
                                                     "nats_edge.fleet.connection.jetstream"]
    assert set(doc["attributes"]) == {"check_mode", "diff_mode", "idempotent"}
    documented = dict(yaml.safe_load(ModuleDocFragment.DOCUMENTATION)["options"])
    documented.update(yaml.safe_load(ModuleDocFragment.JETSTREAM)["options"])
    documented.update(doc["options"])
    spec = dict(CONNECTION_ARGSPEC, **JETSTREAM_ARGSPEC)
    spec.update(module.ARGUMENT_SPEC)
    assert sorted(documented) == sorted(spec)
    for option, rules in spec.items():
        doc_rules = documented[option]
        assert doc_rules.get("description"), option
        assert doc_rules.get("type", "str") == rules.get("type", "str"), option
        for key in ("default", "choices", "elements", "aliases"):
            assert doc_rules.get(key) == rules.get(key), (option, key)
        assert bool(doc_rules.get("required")) == bool(rules.get("required")), option


@pytest.mark.parametrize("name", MODULES)
def test_examples_use_fully_qualified_names_and_return_is_documented(name):
    module = load(name)
    assert module.EXAMPLES.lstrip().startswith("---")
    tasks = yaml.safe_load(module.EXAMPLES)
    assert tasks and all(any(key.startswith(("nats_edge.fleet.", "ansible.builtin.")) for key in task)
                         for task in tasks)
    assert any("nats_edge.fleet.%s" % name in task for task in tasks)
    returned = yaml.safe_load(module.RETURN)
    assert all(value.get("description") and value.get("returned") for value in returned.values())


def test_the_shared_durable_pull_consumer_is_an_example():
    tasks = yaml.safe_load(load("jetstream_consumer").EXAMPLES)
    shared = [t["nats_edge.fleet.jetstream_consumer"] for t in tasks if "nats_edge.fleet.jetstream_consumer" in t
              and t["nats_edge.fleet.jetstream_consumer"].get("name") == "DUR"]
    assert shared and shared[0].get("api_prefix") and not shared[0].get("deliver_subject")
