"""The collection's Python requirements are ranges (they merge with other collections' in one
execution environment); the project's locks pin both ends of each, and ansible-builder reads them."""

import os
import re
import shutil
import subprocess
import sys

import pytest
from packaging.requirements import Requirement

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def requirements(name):
    found = {}
    with open(os.path.join(ROOT, name)) as handle:
        for line in handle:
            line = line.split("#", 1)[0].strip()
            if line and not line.startswith("-"):
                requirement = Requirement(line)
                found[requirement.name.lower()] = requirement
    return found


def test_the_collection_states_ranges_not_pins():
    for name, requirement in requirements("requirements.txt").items():
        operators = sorted(spec.operator for spec in requirement.specifier)
        assert operators == ["<", ">="], (name, str(requirement.specifier))


@pytest.mark.parametrize("lock", ["requirements-dev.txt", "requirements-oldest.txt"])
def test_each_lock_pins_every_library_inside_its_range(lock):
    pinned = requirements(lock)
    for name, requirement in requirements("requirements.txt").items():
        assert name in pinned, (lock, name)
        version = next(iter(pinned[name].specifier)).version
        assert requirement.specifier.contains(version), (lock, name, version, str(requirement.specifier))


def test_the_oldest_lock_pins_the_lowest_end_of_each_range():
    lowest = requirements("requirements-oldest.txt")
    for name, requirement in requirements("requirements.txt").items():
        floor = next(spec.version for spec in requirement.specifier if spec.operator == ">=")
        assert next(iter(lowest[name].specifier)).version == floor, name


def test_ansible_builder_finds_the_dependencies():
    builder = shutil.which("ansible-builder", path=os.path.dirname(sys.executable))
    if builder is None:
        # the project's .venv (make venv, what make unit runs in) has it: missing there is a failure, not a skip
        assert os.path.realpath(sys.prefix) != os.path.realpath(os.path.join(ROOT, ".venv")), (
            "ansible-builder is missing from .venv: requirements-dev.txt pins it")
        pytest.skip("ansible-builder is not installed in this virtualenv (make venv installs it in .venv)")
    out = subprocess.run([builder, "introspect", os.path.join(ROOT, ".collections")], capture_output=True,
                         text=True, check=True).stdout
    listed = dict((r.name.lower(), r.specifier) for r in (Requirement(line) for line in re.findall(r"- '([^']+?)\s+#", out)))
    assert listed == dict((name, r.specifier) for name, r in requirements("requirements.txt").items()), out
