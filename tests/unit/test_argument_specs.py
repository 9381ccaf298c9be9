"""Every role's meta/argument_specs.yml must mirror its defaults/main.yml (or the files of its defaults/main/, each
entry point's options together)."""

import glob
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLES = sorted(os.path.dirname(os.path.dirname(p)) for p in glob.glob(os.path.join(ROOT, "roles/*/defaults/main.yml"))
               + glob.glob(os.path.join(ROOT, "roles/*/defaults/main")))


def role_defaults(role):
    paths = ([os.path.join(role, "defaults/main.yml")] if os.path.isfile(os.path.join(role, "defaults/main.yml"))
             else sorted(glob.glob(os.path.join(role, "defaults/main/*.yml"))))
    defaults = {}
    for path in paths:
        with open(path) as handle:
            defaults.update(yaml.safe_load(handle) or {})
    return defaults, len(paths) > 1


@pytest.mark.parametrize("role", ROLES, ids=os.path.basename)
def test_argument_specs_mirror_defaults(role):
    defaults, several = role_defaults(role)
    with open(os.path.join(role, "meta/argument_specs.yml")) as handle:
        specs = yaml.safe_load(handle)["argument_specs"]
    options = dict(specs["main"]["options"])
    if several:  # each file's variables are the options of one entry point or another
        for entry in specs.values():
            options.update(entry.get("options") or {})
    assert sorted(set(defaults) - set(options)) == [], "defaults without a spec"
    assert sorted(set(options) - set(defaults)) == [], "specs without a default"
    for name, spec in options.items():
        assert spec.get("description"), name
        default = defaults[name]
        if isinstance(default, str) and "{{" in default:
            continue  # templated defaults are documented by their meaning
        assert spec.get("default") == default, "%s: spec default %r != %r" % (name, spec.get("default"), default)
