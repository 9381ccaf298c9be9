"""After the rollouts: every node on the new version with the old one kept,
no acknowledged message lost or duplicated, and the arm64 edge device (run
under qemu-user) joined to the hub as a leaf with its small-device limits.
rollout-ci, the CI-sized cut, runs these without the arm64 device."""

import json
import os

import pytest

from lab_hosts import instances, monitor

NODES = [name for name in ["hub1", "hub2", "hub3", "site1", "site2", "pi1"] if name in instances()]
EDGE_PUBLISHERS = ["site1"] + [name for name in ["pi1"] if name in NODES]
MIB = 1024 * 1024
arm64_device = pytest.mark.skipif("pi1" not in NODES, reason="the CI-sized cut has no arm64 device")


@pytest.mark.parametrize("name", NODES)
def test_every_node_runs_the_new_version_and_keeps_the_old(lab, name):
    host = lab[name]
    assert host.check_output("/usr/local/bin/nats-server --version") == "nats-server: v2.15.1"
    assert host.check_output("/usr/local/bin/nats-server.previous --version") == "nats-server: v2.12.8"
    assert monitor(host, "varz")["version"] == "2.15.1"
    assert monitor(host, "healthz") == {"status": "ok"}


def test_no_acknowledged_message_was_lost_or_duplicated():
    path = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "load", "result.json")
    with open(path, encoding="utf-8") as handle:
        result = json.load(handle)
    assert (result["lost"], result["duplicated"]) == (0, 0)
    assert set(result["publishers"]) == {"hub"} | set(EDGE_PUBLISHERS)
    # each node of the first rollout had a turn while the load ran
    assert set(NODES) - {"site2"} <= {node["host"] for node in result["nodes"]}


def test_the_hub_sees_every_edge_site_as_a_leaf(lab):
    names = set()
    for hub in ("hub1", "hub2", "hub3"):
        names |= {leaf["name"] for leaf in monitor(lab[hub], "leafz")["leafs"]}
    assert set(NODES) - {"hub1", "hub2", "hub3"} <= names


def elf_machine(host, path):
    out = host.check_output("python3 -c \"import struct;f=open('%s','rb');h=f.read(20);"
                            "print(h[:4]==b'\\x7fELF', struct.unpack('<H',h[18:20])[0])\"" % path)
    magic, machine = out.split()
    assert magic == "True"
    return int(machine)


@arm64_device
def test_the_arm64_device_runs_an_arm64_build_under_emulation(lab):
    pi1 = lab["pi1"]
    assert pi1.check_output("uname -m") == "aarch64"
    assert elf_machine(pi1, "/usr/local/bin/nats-server") == 183  # EM_AARCH64
    assert elf_machine(lab["hub1"], "/usr/local/bin/nats-server") == 62  # EM_X86_64
    assert pi1.service("nats-server").is_running


@arm64_device
def test_the_arm64_device_is_a_leaf_with_its_own_domain_and_small_limits(lab):
    pi1 = lab["pi1"]
    varz = monitor(pi1, "varz")
    jsz = monitor(pi1, "jsz")
    assert varz["server_name"] == "pi1"
    assert jsz["config"]["domain"] == "pi1"
    assert jsz["config"]["max_memory"] == 32 * MIB
    assert jsz["config"]["max_storage"] == 512 * MIB
    assert varz["jetstream"]["config"]["max_memory"] == 32 * MIB
    assert varz["jetstream"]["config"]["max_storage"] == 512 * MIB
    assert varz["leafnodes"] == 1
    assert monitor(pi1, "leafz")["leafs"][0]["name"] in ("hub1", "hub2", "hub3")
    env = pi1.check_output("systemctl show nats-server -p Environment -p EnvironmentFiles -p MemoryMax")
    assert "MemoryMax=268435456" in env
    assert "GOMEMLIMIT=192MiB" in pi1.file("/etc/nats-server/nats-server.env").content_string
