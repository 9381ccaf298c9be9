"""The 32-bit ARM devices: each runs its own architecture's nats-server build
under qemu-user, on the emulated CPU of the device it stands for, joined to
the hub as a leaf with its own domain and the small-device limits."""

import struct

import pytest

from lab_hosts import monitor

MIB = 1024 * 1024
EM_ARM = 40
EF_ARM_ABI_FLOAT_HARD, EF_ARM_ABI_FLOAT_SOFT = 0x400, 0x200
# host -> (Debian architecture, float ABI flag of its binaries, QEMU_CPU its services run on)
DEVICES = {"pi2": ("armhf", EF_ARM_ABI_FLOAT_HARD, "cortex-a7"), "pi0": ("armel", EF_ARM_ABI_FLOAT_SOFT, "arm1176")}


def address(host, name):
    """The lab address of another host, as this host resolves it."""
    return host.check_output("getent ahostsv4 %s" % name).split()[0]


def process_environment(host, pid):
    """A process's environment, read as its own user (root in a container may not read another user's)."""
    user = host.check_output("stat -c %%U /proc/%s" % pid)
    return host.check_output("runuser -u %s -- cat /proc/%s/environ" % (user, pid)).split("\x00")


def elf_header(host, path):
    """(class, machine, flags) of an ELF file on the host."""
    raw = host.check_output("od -An -v -tx1 -N52 %s" % path)
    head = bytes(int(byte, 16) for byte in raw.split())
    assert head[:4] == b"\x7fELF"
    machine, = struct.unpack("<H", head[18:20])
    flags, = struct.unpack("<I", head[36:40])
    return head[4], machine, flags


@pytest.mark.parametrize("name", sorted(DEVICES))
def test_the_device_runs_its_own_arm_build(lab, name):
    arch, float_abi, cpu = DEVICES[name]
    host = lab[name]
    assert host.check_output("dpkg --print-architecture") == arch
    assert host.package("nats-server").is_installed
    binary = host.check_output("command -v nats-server")
    elf_class, machine, flags = elf_header(host, host.check_output("readlink -f %s" % binary))
    assert (elf_class, machine) == (1, EM_ARM)  # 32-bit ARM
    assert flags & float_abi
    assert host.service("nats-server").is_running
    pid = host.check_output("systemctl show nats-server -p MainPID --value")
    assert "QEMU_CPU=%s" % cpu in process_environment(host, pid)


@pytest.mark.parametrize("name", sorted(DEVICES))
def test_the_device_is_a_leaf_with_its_own_domain_and_small_limits(lab, name):
    host = lab[name]
    varz = monitor(host, "varz")
    jsz = monitor(host, "jsz")
    assert varz["server_name"] == name
    assert varz["version"] == "2.9.10"
    assert jsz["config"]["domain"] == name
    assert jsz["config"]["max_memory"] == 32 * MIB
    assert jsz["config"]["max_storage"] == 512 * MIB
    assert varz["leafnodes"] == 1
    # 2.9's /leafz names no server: the leaf's address says which one
    assert monitor(host, "leafz")["leafs"][0]["ip"] == address(host, "hub1")
    assert "MemoryMax=268435456" in host.check_output("systemctl show nats-server -p MemoryMax")


def test_the_hub_sees_both_devices(lab):
    hub = lab["hub1"]
    assert {leaf["ip"] for leaf in monitor(hub, "leafz")["leafs"]} == {address(hub, name) for name in DEVICES}
