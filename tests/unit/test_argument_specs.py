"""Every role's meta/argument_specs.yml must mirror its defaults/main.yml."""

import glob
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLES = sorted(os.path.dirname(os.path.dirname(p)) for p in glob.glob(os.path.join(ROOT, "roles/*/defaults/main.yml")))


@pytest.mark.parametrize("role", ROLES, ids=os.path.basename)
def test_argument_specs_mirror_defaults(role):
    with open(os.path.join(role, "defaults/main.yml")) as handle:
        defaults = yaml.safe_load(handle) or {}
    with open(os.path.join(role, "meta/argument_specs.yml")) as handle:
        options = yaml.safe_load(handle)["argument_specs"]["main"]["options"]
    assert sorted(set(defaults) - set(options)) == [], "defaults without a spec"
    assert sorted(set(options) - set(defaults)) == [], "specs without a default"
    for name, spec in options.items():
        assert spec.get("description"), name
        default = defaults[name]
        if isinstance(default, str) and "{{" in default:
            continue  # templated defaults are documented by their meaning
        assert spec.get("default") == default, "%s: spec default %r != %r" % (name, spec.get("default"), default)
