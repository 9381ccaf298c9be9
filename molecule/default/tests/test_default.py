"""A 3-node hub cluster (domain hub) with one leaf edge (domain edge), from the distribution package."""

import pytest

from lab_hosts import monitor

HUBS = ["hub1", "hub2", "hub3"]
ALL = HUBS + ["edge1"]


@pytest.mark.parametrize("name", ALL)
def test_service_runs_under_systemd_as_nats(lab, name):
    host = lab[name]
    assert host.check_output("cat /proc/1/comm") == "systemd"
    service = host.service("nats-server")
    assert service.is_running and service.is_enabled
    pid = host.check_output("systemctl show -p MainPID --value nats-server")
    assert host.check_output("ps -o user= -p %s" % pid) == "nats"


@pytest.mark.parametrize("name", ALL)
def test_unit_is_hardened_and_sized(lab, name):
    host = lab[name]
    props = dict(line.split("=", 1) for line in host.check_output(
        "systemctl show nats-server -p NoNewPrivileges -p ProtectSystem -p PrivateTmp -p LimitNOFILE").splitlines())
    assert props == {"NoNewPrivileges": "yes", "ProtectSystem": "strict", "PrivateTmp": "yes",
                     "LimitNOFILE": "16384"}
    pid = host.check_output("systemctl show -p MainPID --value nats-server")
    # read as the service user: root in a container may not read another user's environ
    assert host.run("runuser -u nats -- grep -qz '^GOMEMLIMIT=[0-9]*MiB$' /proc/%s/environ" % pid).rc == 0


@pytest.mark.parametrize("name", ALL)
def test_config_is_valid_and_private(lab, name):
    host = lab[name]
    conf = host.file("/etc/nats-server/nats-server.conf")
    assert conf.user == "root" and conf.group == "nats" and conf.mode == 0o640
    assert host.run("/usr/sbin/nats-server -t -c /etc/nats-server/nats-server.conf").rc == 0
    assert not host.run("ls /etc/nats-server/ | grep -q '~$'").succeeded, "stale config backups left behind"


@pytest.mark.parametrize("name", ALL)
def test_healthy(lab, name):
    assert monitor(lab[name], "healthz") == {"status": "ok"}


@pytest.mark.parametrize("name", HUBS)
def test_routes_reach_both_peers(lab, name):
    routez = monitor(lab[name], "routez")
    peers = {route["remote_id"] for route in routez["routes"]}
    assert len(peers) == 2


def test_edge_is_a_connected_leaf(lab):
    assert monitor(lab["edge1"], "leafz")["leafnodes"] == 1
    assert sum(monitor(lab[hub], "leafz")["leafnodes"] for hub in HUBS) == 1


@pytest.mark.parametrize("name,domain", [("hub1", "hub"), ("hub2", "hub"), ("hub3", "hub"), ("edge1", "edge")])
def test_jetstream_domain(lab, name, domain):
    jsz = monitor(lab[name], "jsz")
    assert jsz["config"]["domain"] == domain


def test_hub_tags_and_cluster_name(lab):
    varz = monitor(lab["hub2"], "varz")
    assert varz["cluster"]["name"] == "hub"
    assert sorted(varz["tags"]) == ["az:hub2", "region:lab"]


@pytest.mark.parametrize("name", ALL)
def test_every_listener_runs_tls_and_routes_verify_their_peers(lab, name):
    varz = monitor(lab[name], "varz")
    assert varz["tls_required"] is True
    if name in HUBS:
        assert varz["cluster"]["tls_required"] is True and varz["cluster"]["tls_verify"] is True
        assert varz["leaf"]["tls_required"] is True
    # what a client sees first: the port takes TLS only
    info = lab[name].check_output("python3 -c \"import socket;s=socket.create_connection(('127.0.0.1',4222),5);"
                                  "print(s.makefile('rb').readline().decode())\"")
    assert '"tls_required":true' in info


@pytest.mark.parametrize("name", ALL)
def test_key_is_the_servers_alone(lab, name):
    host = lab[name]
    key = host.file("/etc/nats-server/tls/server-key.pem")
    assert key.user == "nats" and key.mode == 0o600
    folder = host.file("/etc/nats-server/tls")
    assert folder.user == "root" and folder.group == "nats" and folder.mode == 0o750
    conf = host.file("/etc/nats-server/nats-server.conf").content_string
    assert "BEGIN" not in conf  # keys and certificates stay in their files
