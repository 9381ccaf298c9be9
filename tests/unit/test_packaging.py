"""What `ansible-galaxy collection build` leaves out of the tarball.

Every path the checkout ignores (.gitignore) is generated: virtualenvs, caches,
build output, and the demo's `.lab` with its nsc store, keys and creds. None of
it may reach a published tarball, so each must be covered by galaxy.yml's
build_ignore or by ansible-galaxy's own default ignores.
"""
import fnmatch
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# what ansible-galaxy skips without being told (ansible.galaxy.collection._build_files_manifest)
DEFAULT_IGNORE = ["*.pyc", "*.retry", "tests/output", ".git", "__pycache__", "*.tar.gz"]


def ignored_patterns():
    with open(os.path.join(ROOT, ".gitignore")) as handle:
        lines = [line.strip() for line in handle]
    return [line for line in lines if line and not line.startswith("#")]


def example_path(pattern):
    """A concrete top-level path that the .gitignore pattern matches."""
    return pattern.strip("/").replace("*", "x")


def excluded(path, build_ignore):
    parts = path.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return any(fnmatch.fnmatch(prefix, pattern)
               for prefix in prefixes for pattern in build_ignore + DEFAULT_IGNORE)


@pytest.mark.parametrize("pattern", ignored_patterns())
def test_generated_paths_stay_out_of_the_tarball(pattern):
    with open(os.path.join(ROOT, "galaxy.yml")) as handle:
        build_ignore = yaml.safe_load(handle)["build_ignore"]
    path = example_path(pattern)
    assert excluded(path, build_ignore), "%s (from .gitignore %r) would be built into the tarball" % (path, pattern)


def test_the_demo_secrets_are_covered():
    assert "/.lab/" in ignored_patterns()
