"""The integration tests' servers and the molecule scenarios' published ports never meet, so the two can run side by
side (make test runs them in parallel lanes)."""

import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_molecule_publishes_below_the_ports_the_integration_tests_pick():
    with open(os.path.join(ROOT, "tests", "integration", "conftest.py")) as handle:
        source = handle.read()
    low = int(re.search(r"return \((\d+), low - 1\)", source).group(1))
    published = []
    for path in glob.glob(os.path.join(ROOT, "molecule", "*", "molecule.yml")):
        with open(path) as handle:
            published += [int(port) for port in re.findall(r"127\.0\.0\.1:(\d+):\d+", handle.read())]
    assert published and max(published) < low, (max(published), low)
