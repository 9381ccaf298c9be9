"""nats-server from a release archive (node1) and from a pushed binary (node2)."""

import pytest

from lab_hosts import monitor


@pytest.mark.parametrize("name,version", [("node1", "2.12.8"), ("node2", "2.15.1")])
def test_installed_version_runs(lab, name, version):
    host = lab[name]
    assert host.check_output("/usr/local/bin/nats-server --version") == "nats-server: v" + version
    assert host.service("nats-server").is_running
    varz = monitor(host, "varz")
    assert varz["version"] == version
    assert monitor(host, "healthz") == {"status": "ok"}
    assert monitor(host, "jsz")["config"]["domain"] == "edge"


def test_binary_is_root_owned_and_not_writable_by_the_service(lab):
    binary = lab["node1"].file("/usr/local/bin/nats-server")
    assert binary.user == "root" and binary.mode == 0o755


def test_archives_were_verified_and_kept_in_the_cache(lab):
    host = lab["node1"]
    cached = host.check_output("ls /var/cache/nats-server").split()
    assert "nats-server-v2.12.8-linux-amd64.tar.gz" in cached
    assert "nats-server-v2.15.1-linux-amd64.tar.gz" in cached


def test_config_rendered_for_the_installed_version(lab):
    conf = lab["node1"].file("/etc/nats-server/nats-server.conf").content_string
    assert "# nats-server 2.12.8 on node1" in conf
