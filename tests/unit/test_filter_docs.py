"""Every filter has its docs beside it (plugins/filter/<name>.yml), they document the
arguments the filter really takes, and the examples give the results their comments say."""

import inspect
import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.nats_edge.fleet.plugins.filter import nats_fleet, nats_monitoring, nats_rollout, nats_rotate, nats_server
from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _server_config as sc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FILTER_DIR = os.path.join(ROOT, "plugins", "filter")
FILTERS = {**nats_server.FilterModule().filters(), **nats_rollout.FilterModule().filters(),
           **nats_fleet.FilterModule().filters(), **nats_rotate.FilterModule().filters(),
           **nats_monitoring.FilterModule().filters()}
# filters taking **kwargs hand them to these functions
KEYWORDS_FROM = {"nats_server_profile": sc.resource_profile}
# examples that depend on the inventory, or whose result is text shown over several lines
WITHOUT_STATED_RESULTS = ({"nats_server_peer_urls", "to_nats_conf"} | set(nats_fleet.FilterModule().filters())
                          | set(nats_rotate.FilterModule().filters()) | set(nats_monitoring.FilterModule().filters()))


def docs(name):
    with open(os.path.join(FILTER_DIR, name + ".yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def parameters(name):
    """[(name, default or inspect.Parameter.empty)] the filter accepts, its input first."""
    params = list(inspect.signature(FILTERS[name]).parameters.values())
    out = [(p.name, p.default) for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    if any(p.kind == p.VAR_KEYWORD for p in params):
        taken = {param[0] for param in out}
        out += [(p.name, p.default) for p in inspect.signature(KEYWORDS_FROM[name]).parameters.values()
                if p.name not in taken]
    return out


def test_every_filter_has_docs_and_no_docs_lack_a_filter():
    documented = {f[:-4] for f in os.listdir(FILTER_DIR) if f.endswith(".yml")}
    assert documented == set(FILTERS)


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_docs_match_the_signature(name):
    doc = docs(name)
    assert set(doc) == {"DOCUMENTATION", "EXAMPLES", "RETURN"}
    documentation = doc["DOCUMENTATION"]
    assert documentation["name"] == name
    assert documentation["short_description"] and documentation["description"]
    params = parameters(name)
    expected = ["_input"] + [param[0] for param in params[1:]]
    options = documentation["options"]
    assert sorted(options) == sorted(expected)
    positional = [p.strip() for p in documentation["positional"].split(",")]
    assert positional == expected[:len(positional)], "positional arguments out of the signature's order"
    for option, (_param, default) in zip(expected, params):
        spec = options[option]
        assert spec.get("type"), "%s: %s has no type" % (name, option)
        if default is inspect.Parameter.empty:
            assert spec.get("required") is True, "%s: %s is required" % (name, option)
        else:
            assert not spec.get("required"), "%s: %s has a default" % (name, option)
            if default is not None:
                assert spec.get("default") == default, "%s: %s defaults to %r" % (name, option, default)
    assert "_value" in doc["RETURN"] and doc["RETURN"]["_value"].get("type")


def stated_results():
    """(filter, key, template, result) for each example whose comment above it ends in JSON."""
    for name in sorted(FILTERS):
        text = docs(name)["EXAMPLES"]
        comment = []
        for line in text.splitlines():
            stripped = line.strip()
            if stripped.startswith("#"):
                comment.append(stripped[1:].strip())
                continue
            if stripped and not line.startswith(" ") and ":" in line:
                key = line.split(":", 1)[0]
                for candidate in (" ".join(comment[i:]) for i in range(len(comment))):
                    try:
                        result = json.loads(candidate)
                    except ValueError:
                        continue
                    yield name, key, yaml.safe_load(text)[key], result
                    break
            if stripped and not line.startswith(" "):
                comment = []


def test_examples_give_the_results_their_comments_state(tmp_path):
    cases = list(stated_results())
    assert {case[0] for case in cases} == set(FILTERS) - WITHOUT_STATED_RESULTS
    out = tmp_path / "results.json"
    playbook = [{
        "hosts": "localhost", "gather_facts": False,
        "vars": {"cases": {"%s.%s" % case[:2]: case[2] for case in cases}},
        "tasks": [{"ansible.builtin.copy": {"content": "{{ cases | to_json }}", "dest": str(out), "mode": "0600"}}],
    }]
    (tmp_path / "examples.yml").write_text(yaml.safe_dump(playbook))
    ansible_playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    proc = subprocess.run([ansible_playbook, "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable,
                           str(tmp_path / "examples.yml")],
                          capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rendered = json.loads(out.read_text())
    for name, key, _template, result in cases:
        assert rendered["%s.%s" % (name, key)] == result, "%s example %s" % (name, key)
