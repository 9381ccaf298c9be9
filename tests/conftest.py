"""Make the checkout importable as ansible_collections.nats_edge.fleet."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINK_ROOT = os.path.join(ROOT, ".collections")
LINK = os.path.join(LINK_ROOT, "ansible_collections", "nats_edge", "fleet")

if not os.path.exists(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink(ROOT, LINK)
if LINK_ROOT not in sys.path:
    sys.path.insert(0, LINK_ROOT)


def pytest_configure(config):
    config.addinivalue_line("markers", "alone: measures timing under load; make test runs it after the parallel lanes, "
                            "by itself")
