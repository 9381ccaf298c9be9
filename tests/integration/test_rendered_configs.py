"""Configs built by the role's filters, checked and run by real nats-servers on loopback."""

import json
import socket
import ssl
import subprocess

import pytest

from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _server_config as sc

from conftest import free_port
from pki import CA


_TLS = {}


def server_tls(tmp_path):
    """The role's TLS settings with a CA and a certificate for loopback made in ``tmp_path`` (once per test)."""
    if str(tmp_path) not in _TLS:
        ca = CA(tmp_path)
        cert, key = ca.issue("server")
        _TLS[str(tmp_path)] = {"tls_cert_file": cert, "tls_key_file": key, "tls_ca_file": ca.path, "tls_timeout": 5,
                               "cluster_password": "r" * 32, "gateway_password": "g" * 32}
    return _TLS[str(tmp_path)]


def model(tmp_path, version, **over):
    s = dict(server_tls(tmp_path), **{
        "name": "n1", "inventory_hostname": "n1", "groups": {}, "hostvars": {},
        "config_dir": str(tmp_path), "listen_host": "127.0.0.1", "port": free_port(),
        "http_host": "127.0.0.1", "http_port": free_port(), "cluster_port": free_port(),
        "jetstream_enabled": True, "jetstream_store_dir": str(tmp_path / over.get("name", "n1")),
        "profile": sc.resource_profile(1024, [{"mount": "/", "size_total": 10 * 1024**3}], "/x"),
        "allow_anonymous": True,
    })
    s.update(over)
    conf, dropped = sc.prune_for_version(sc.build_config(s), version)
    return conf, dropped


def check(binary, tmp_path, conf):
    path = tmp_path / "check.conf"
    path.write_text(sc.render(conf, header="test"))
    return subprocess.run([binary, "-t", "-c", str(path)], capture_output=True, text=True, check=False)


def test_everything_the_role_renders_passes_the_servers_own_check(nats_binary, tmp_path):
    binary, version = nats_binary
    creds = tmp_path / "creds"
    creds.mkdir()
    conf, dropped = model(
        tmp_path, version,
        server_tags=["region:eu", "az:1"], max_payload="2MB", max_connections=1000,
        lame_duck_duration="30s", lame_duck_grace_period="5s",
        cluster_group="", cluster_routes=["nats-route://127.0.0.1:1"], cluster_name="c1",
        leafnodes_port=free_port(), jetstream_domain="hub", jetstream_unique_tag="az:",
        jetstream_sync_interval="2m",
        accounts={"$SYS": {"users": [{"user": "sys", "password": "s"}]},
                  "EDGE": {"jetstream": "enabled", "users": [{"user": "e", "password": "p"}]}},
        system_account="$SYS",
        mqtt={"port": free_port()}, websocket={"port": free_port()}, tls_handshake_first=True,
        leafnode_remotes=[{"url": "nats-leaf://127.0.0.1:1"}], tls_verify_clients=True,
        extra_config={"cluster": {"pool_size": 3, "compression": "s2_auto"}, "ping_interval": "20s"},
    )
    result = check(binary, tmp_path, conf)
    assert result.returncode == 0, result.stderr + result.stdout
    if version.startswith("2.9."):
        assert any(d.startswith("jetstream.sync_interval") for d in dropped)
        assert any(d.startswith("cluster.pool_size") for d in dropped)
    else:
        assert dropped == []


# a gateway and https monitoring as the role renders them: (settings, the options a 2.9.10 server does not get)
GATEWAY_ROWS = {
    "gateway": (lambda: dict(gateway={"port": free_port(), "advertise": "localhost", "reject_unknown_cluster": True,
                                      "connect_retries": 3, "connect_backoff": True, "write_deadline": "10s",
                                      "gateways": [{"name": "c2", "urls": ["nats://127.0.0.1:1"]},
                                                   {"name": "c3", "url": "nats://127.0.0.1:2",
                                                    "tls": {"timeout": 3}}]},
                             cluster_routes=["nats-route://127.0.0.1:1"], cluster_name="c1"),
                ["gateway.connect_backoff", "gateway.write_deadline"]),
    "extra-config-gateway": (lambda: dict(extra_config={"gateway": {"name": "c1", "port": free_port(), "gateways": [
        {"name": "c2", "urls": ["nats://127.0.0.1:1"]}]}}), []),
    "plaintext-gateway": (lambda: dict(gateway={"name": "c1", "port": free_port()}, insecure_plaintext=["gateway"]),
                          []),
    "https-monitoring": (lambda: dict(http_tls=True, tls_verify_clients=True), []),
}


@pytest.mark.parametrize("row", sorted(GATEWAY_ROWS))
def test_a_gateway_and_https_monitoring_pass_the_servers_own_check(nats_binary, tmp_path, row):
    binary, version = nats_binary
    over, old_only = GATEWAY_ROWS[row]
    conf, dropped = model(tmp_path, version, **over())
    result = check(binary, tmp_path, conf)
    assert result.returncode == 0, result.stderr + result.stdout
    if row == "https-monitoring":
        assert "https" in conf and "http" not in conf
    else:
        assert ("tls" in conf["gateway"]) is (row != "plaintext-gateway"), conf["gateway"]
    assert [d.split(" ")[0] for d in dropped] == (old_only if version.startswith("2.9.") else []), dropped


def test_the_oldest_server_refuses_the_gateway_options_the_role_leaves_out_for_it(nats_binary, tmp_path):
    """What the pruning is for: 2.9.10 refuses connect_backoff and write_deadline in a gateway block."""
    binary, version = nats_binary
    if not version.startswith("2.9."):
        pytest.skip("the newest server knows them")
    conf, _dropped = model(tmp_path, "2.15.1", gateway={"name": "c1", "port": free_port(), "connect_backoff": True,
                                                        "write_deadline": "10s"})
    result = check(binary, tmp_path, conf)
    assert result.returncode != 0
    assert "connect_backoff" in result.stderr + result.stdout


def test_the_server_rejects_what_the_role_must_catch(nats_binary, tmp_path):
    binary, version = nats_binary
    conf, _dropped = model(tmp_path, version, extra_config={"no_such_option": 1})
    result = check(binary, tmp_path, conf)
    assert result.returncode != 0
    assert "no_such_option" in result.stderr + result.stdout


def test_hub_and_leaf_with_their_own_jetstream_domains(nats_binary, tmp_path, start_server):
    binary, version = nats_binary
    leaf_port = free_port()
    hub, _dropped = model(tmp_path, version, name="hub", jetstream_domain="hub", leafnodes_port=leaf_port,
                          leafnodes_advertise="localhost")
    edge, _dropped = model(tmp_path, version, name="edge", jetstream_domain="edge",
                           leafnode_remotes=[{"url": "nats-leaf://127.0.0.1:%d" % leaf_port}])
    hub_server = start_server(binary, sc.render(hub), "hub", int(hub["http"].rsplit(":", 1)[1]))
    edge_server = start_server(binary, sc.render(edge), "edge", int(edge["http"].rsplit(":", 1)[1]))
    edge_server.wait(lambda: edge_server.get("leafz")["leafnodes"] == 1)
    assert hub_server.wait(lambda: hub_server.get("jsz")["config"]["domain"]) == "hub"
    assert edge_server.get("jsz")["config"]["domain"] == "edge"
    assert hub_server.wait(lambda: hub_server.get("healthz")["status"] == "ok")
    varz = edge_server.get("varz")
    assert varz["jetstream"]["config"]["max_memory"] == 256 * 1024**2
    # what the hub tells its leaf nodes to reconnect to: the address given, at the listener's port
    with socket.create_connection(("127.0.0.1", leaf_port), timeout=5) as conn:
        first = conn.makefile("rb").readline().decode()
    assert first.startswith("INFO ") and json.loads(first[5:])["leafnode_urls"] == ["localhost:%d" % leaf_port], first


def test_operator_mode_with_the_full_resolver(nats_binary, tmp_path, start_server):
    """What the role renders in operator mode starts, serves the preloaded
    system account and takes an account pushed to its resolver."""
    import asyncio

    import nats

    from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt

    binary, version = nats_binary
    op, sys_acc, sys_user = jwt.new_seed("operator"), jwt.new_seed("account"), jwt.new_seed("user")
    sys_pub = jwt.public_key(sys_acc)
    (tmp_path / "operator.jwt").write_text(
        jwt.encode(jwt.operator_claims("OP", jwt.public_key(op), system_account=sys_pub), op))
    sys_jwt = jwt.encode(jwt.account_claims("SYS", sys_pub), op)
    creds = tmp_path / "sys.creds"
    creds.write_text(jwt.creds(jwt.encode(jwt.user_claims("sys", jwt.public_key(sys_user)), sys_acc), sys_user))
    conf, _dropped = model(tmp_path, version, operator_jwt=str(tmp_path / "operator.jwt"), system_account=sys_pub,
                           resolver_preload={sys_pub: sys_jwt})
    assert check(binary, tmp_path, conf).returncode == 0
    http = int(conf["http"].rsplit(":", 1)[1])
    server = start_server(binary, sc.render(conf), "operator", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    assert server.get("varz")["system_account"] == sys_pub

    app = jwt.new_seed("account")
    app_jwt = jwt.encode(jwt.account_claims("APP", jwt.public_key(app)), op)

    async def push():
        nc = await nats.connect("nats://" + conf["listen"], user_credentials=str(creds), allow_reconnect=False,
                                tls=ssl.create_default_context(cafile=conf["tls"]["ca_file"]))
        try:
            reply = await nc.request("$SYS.REQ.CLAIMS.UPDATE", app_jwt.encode(), timeout=3)
            return json.loads(reply.data)
        finally:
            await nc.close()

    reply = asyncio.run(push())
    assert reply["data"]["code"] == 200, reply
    stored = tmp_path / "n1" / "jwt" / ("%s.jwt" % jwt.public_key(app))
    assert stored.read_text() == app_jwt
