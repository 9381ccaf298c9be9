"""testinfra hosts for a molecule scenario's lab hosts, reached with `podman exec`."""

import json
import os

import pytest
import testinfra
import yaml


def instances():
    path = os.environ.get("MOLECULE_INSTANCE_CONFIG", "")
    with open(path) as handle:
        return {entry["instance"]: entry["address"] for entry in yaml.safe_load(handle) or []}


@pytest.fixture(scope="session")
def lab():
    return {name: testinfra.get_host("podman://" + container) for name, container in instances().items()}


def monitor(host, endpoint):
    """JSON from the server's monitoring port, read on the host itself."""
    out = host.check_output("python3 -c \"import urllib.request,sys;"
                            "print(urllib.request.urlopen('http://127.0.0.1:8222/%s').read().decode())\"" % endpoint)
    return json.loads(out)
