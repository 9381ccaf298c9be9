"""Every module documents exactly the options it accepts, with the same types, defaults
and choices, has examples with fully qualified names, and documents what it returns."""

import glob
import importlib
import os

import pytest
import yaml
from ansible.module_utils import basic

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULES = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ROOT, "plugins/modules/*.py")))
PACKAGE = "ansible_collections.nats_edge.fleet.plugins"


class _Captured(Exception):
    pass


def argument_spec(name, monkeypatch):
    """The spec the module really builds, caught as it creates its AnsibleModule."""
    seen = {}

    def capture(self, argument_spec, **kwargs):
        seen.update(argument_spec)
        raise _Captured()

    monkeypatch.setattr(basic.AnsibleModule, "__init__", capture)
    module = importlib.import_module("%s.modules.%s" % (PACKAGE, name))
    with pytest.raises(_Captured):
        module.main()
    return module, seen


def documented(doc, key="options"):
    """The module's options (or attributes) with those of its documentation fragments."""
    entries = {}
    for fragment in doc.get("extends_documentation_fragment", []):
        parts = fragment.split(".")[2:]
        holder = importlib.import_module("%s.doc_fragments.%s" % (PACKAGE, parts[0])).ModuleDocFragment
        text = getattr(holder, parts[1].upper()) if len(parts) > 1 else holder.DOCUMENTATION
        entries.update(yaml.safe_load(text).get(key, {}))
    for name, rules in doc.get(key, {}).items():
        # as Ansible does, a module's entry adds to the fragment's
        entries[name] = dict(entries.get(name, {}), **rules)
    return entries


def compare(documented, spec, where, top=None):
    assert sorted(documented) == sorted(spec), where
    top = documented if top is None else top
    for option, rules in spec.items():
        doc_rules = documented[option]
        here = "%s.%s" % (where, option)
        assert doc_rules.get("description"), here
        assert doc_rules.get("type", "str") == rules.get("type", "str"), here
        for key in ("default", "choices", "elements", "aliases"):
            assert doc_rules.get(key) == rules.get(key), (here, key)
        assert bool(doc_rules.get("required")) == bool(rules.get("required")), here
        if rules.get("options") and "suboptions" in doc_rules:
            compare(doc_rules["suboptions"], rules["options"], here, top)
        elif rules.get("options"):
            # items documented as taking the module's own options (a bulk form)
            assert sorted(set(rules["options"]) - set(top)) == [], here


@pytest.mark.parametrize("name", MODULES)
def test_documented_options_match_the_argument_spec(name, monkeypatch):
    module, spec = argument_spec(name, monkeypatch)
    doc = yaml.safe_load(module.DOCUMENTATION)
    assert doc["module"] == name
    assert doc.get("short_description") and doc.get("description")
    assert set(documented(doc, "attributes")) >= {"check_mode", "diff_mode"}
    compare(documented(doc), spec, name)


@pytest.mark.parametrize("name", MODULES)
def test_examples_use_fully_qualified_names_and_return_is_documented(name):
    module = importlib.import_module("%s.modules.%s" % (PACKAGE, name))
    assert module.EXAMPLES.lstrip().startswith("---")
    tasks = yaml.safe_load(module.EXAMPLES)
    assert tasks and all(any(key.startswith(("nats_edge.fleet.", "ansible.builtin.")) for key in task)
                         for task in tasks)
    assert any("nats_edge.fleet.%s" % name in task for task in tasks)
    returned = yaml.safe_load(module.RETURN)
    assert returned and all(value.get("description") and value.get("returned") for value in returned.values())


def test_every_nats_module_is_in_the_action_group():
    with open(os.path.join(ROOT, "meta/runtime.yml")) as handle:
        group = yaml.safe_load(handle)["action_groups"]["nats"]
    connecting = [name for name in MODULES
                  if "nats_edge.fleet.connection" in yaml.safe_load(
                      importlib.import_module("%s.modules.%s" % (PACKAGE, name)).DOCUMENTATION
                  ).get("extends_documentation_fragment", [])]
    assert sorted(group) == sorted(connecting)


# Result keys Ansible itself interprets: a module returning one of these for
# its own purpose changes how the task is judged (``unreachable`` stops the
# play even under ignore_errors, ``rc`` != 0 fails it, ``results`` is read as
# a loop).
RESERVED_RESULT_KEYS = {"failed", "skipped", "changed", "unreachable", "ansible_facts", "rc", "results",
                        "invocation", "warnings", "deprecations", "exception", "msg", "skip_reason",
                        "stdout", "stderr", "stdout_lines", "stderr_lines", "module_stdout", "module_stderr"}
# Modules that return a reserved key for what Ansible does with it: facts the host keeps.
INTENDED = {"nats_server_state": {"ansible_facts"}}


@pytest.mark.parametrize("name", MODULES)
def test_no_returned_key_is_one_ansible_interprets(name):
    module = importlib.import_module("%s.modules.%s" % (PACKAGE, name))
    keys = set(yaml.safe_load(module.RETURN)) - INTENDED.get(name, set())
    assert not keys & RESERVED_RESULT_KEYS
    assert not [key for key in keys if key.startswith(("_ansible", "ansible_"))]
