"""Gateways and monitoring over https as the role renders them (``_server_config.build_config``), run by real
nats-servers on loopback: two clusters exchange messages over a gateway with mutual TLS against the fleet CA, a
rogue gateway (plaintext, or with a certificate the CA did not issue) is refused both ways, a reload takes renewed
certificates and a restart-only change is refused as the restart fingerprint says, and https monitoring answers a
client that trusts the CA and nobody else, the role's own health check included. On the PyPI build (2.15.1) and
on 2.9.10, which behave alike here."""

import asyncio
import hashlib
import json
import os
import signal
import socket
import ssl
import urllib.error
import urllib.request

import pytest

from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _server_config as sc

from conftest import ROOT, free_port, run_playbook
from pki import CA, fingerprint
from test_route_security import deliveries, holds, impostor_ca, log, render, start
from test_route_security import settings as route_settings

FLEET_CA = "fleet"
GATEWAY_PASSWORD = "fleet-gateway-password-0123456789"
WRONG_PASSWORD = "not-the-gateway-password-0123"


def settings(ca, name, **over):
    """The role's settings for server ``name`` on loopback, with a certificate from ``ca`` and the gateway
    password."""
    return route_settings(ca, name, **dict({"gateway_password": GATEWAY_PASSWORD}, **over))


def gateways(server):
    """(names of the clusters ``server`` holds an outbound gateway connection to, names it takes one from)."""
    gatewayz = server.get("gatewayz")
    return (sorted(gatewayz.get("outbound_gateways") or {}), sorted(gatewayz.get("inbound_gateways") or {}))


def served_certificate(port, ca_path, client_cert=None, server_hostname="localhost"):
    """SHA-256 (hex) of the certificate the TLS listener at ``port`` serves, verified against ``ca_path``: a
    gateway listener starts with the TLS handshake (2.9.10 and 2.15.1 alike), as https does."""
    context = ssl.create_default_context(cafile=ca_path)
    if client_cert:
        context.load_cert_chain(*client_cert)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname=server_hostname) as tls:
            return hashlib.sha256(tls.getpeercert(binary_form=True)).hexdigest()


def client_url(s):
    return "nats://127.0.0.1:%d" % s["port"]


# --------------------------------------------------------------------------
# two clusters joined by a gateway


@pytest.fixture
def super_cluster(nats_binary, start_server, tmp_path):
    """Clusters ``east`` and ``west``, one server each, each gateway naming the other; both links up."""
    ca = CA(tmp_path, FLEET_CA)
    ports = {"east": free_port(), "west": free_port()}
    nodes = {}
    for name, other in (("east", "west"), ("west", "east")):
        s = settings(ca, name, gateway={"name": name, "port": ports[name], "gateways": [
            {"name": other, "url": "nats://127.0.0.1:%d" % ports[other]}]})
        nodes[name] = (s, start(start_server, nats_binary, s))
    for name, other in (("east", "west"), ("west", "east")):
        server = nodes[name][1]
        server.wait(lambda: gateways(server) == ([other], [other]), 15)
    return {"ca": ca, "nodes": nodes, "tmp_path": tmp_path}


def test_two_clusters_exchange_messages_over_a_gateway_with_mutual_tls(super_cluster):
    """Each cluster holds a gateway connection to the other and takes one from it, both over TLS verified against
    the fleet CA in both directions, and a message published in one cluster reaches a subscriber in the other."""
    (east_s, east), (west_s, west) = super_cluster["nodes"]["east"], super_cluster["nodes"]["west"]
    for server in (east, west):
        gateway = server.get("varz")["gateway"]
        assert gateway["tls_required"] is True and gateway["tls_verify"] is True, gateway
    assert "handshake error" not in log(east) + log(west)
    for publisher, listener in ((east_s, west_s), (west_s, east_s)):
        # the subscription's interest reaches the other cluster over the gateway
        got, _leaked = asyncio.run(deliveries(client_url(publisher), client_url(listener), None,
                                              super_cluster["ca"].path, wait=10, settle=0.3))
        assert got >= 1


# the rogue's gateway TLS (None: plaintext), its credentials, what the fleet's server logs on refusing it; alike on
# 2.9.10 and 2.15.1
ROGUES = {
    # a stock server that connects to the gateway port without TLS: the gateway waits for a TLS handshake
    # that never comes, and drops the connection when its handshake timeout runs out
    "plaintext": (None, None, "TLS gateway handshake error"),
    # a certificate the fleet CA did not issue, from a CA with the same name; the rogue verifies nothing itself
    "untrusted-cert": ("impostor", None, "certificate signed by unknown authority"),
    # a certificate from the fleet CA itself (a host of the fleet, or its key stolen), without the gateway password
    "fleet-cert-no-password": ("fleet", None, "authentication error"),
    "fleet-cert-wrong-password": ("fleet", ("gateway", WRONG_PASSWORD), "authentication error"),
}


def rogue_conf(name, tls, ports, remote_port, credentials=None):
    """A stock server (not the role's config) whose gateway connects to ``remote_port``, with ``credentials`` (user,
    password) in its URL."""
    userinfo = "%s:%s@" % credentials if credentials else ""
    gateway = {"name": name, "listen": "127.0.0.1:%d" % ports["gateway"],
               "gateways": [{"name": "east", "urls": ["nats://%s127.0.0.1:%d" % (userinfo, remote_port)]}]}
    if tls:
        gateway["tls"] = dict(tls, insecure=True, timeout=2)
    return {"server_name": "rogue", "listen": "127.0.0.1:%d" % ports["client"],
            "http": "127.0.0.1:%d" % ports["http"], "gateway": gateway}


@pytest.mark.parametrize("case", sorted(ROGUES))
@pytest.mark.parametrize("claims", ["rogue", "west"])
def test_a_rogue_gateway_is_refused(super_cluster, nats_binary, start_server, case, claims):
    """A gateway that connects in plaintext, with a certificate the fleet CA did not issue, or with one it did but
    without the gateway password, is refused: the fleet's server logs why, keeps exactly its link with the other
    cluster (also when the rogue claims that cluster's name), and a message published in the fleet reaches the
    other cluster but not a subscriber on ``>`` at the rogue."""
    tls_kind, credentials, refusal = ROGUES[case]
    (east_s, east), (west_s, west) = super_cluster["nodes"]["east"], super_cluster["nodes"]["west"]
    tls = None
    if tls_kind:
        ca = impostor_ca(super_cluster["tmp_path"]) if tls_kind == "impostor" else super_cluster["ca"]
        cert, key = ca.issue("rogue")
        tls = {"cert_file": cert, "key_file": key}
    ports = {"client": free_port(), "http": free_port(), "gateway": free_port()}
    since = len(log(east))
    rogue = start_server(nats_binary[0], sc.render(rogue_conf(claims, tls, ports, east_s["gateway"]["port"], credentials)),
                         "rogue", ports["http"])
    rogue.wait(lambda: "Creating outbound gateway connection" in log(rogue), 10)
    east.wait(lambda: refusal in log(east)[since:], 10)
    # the fleet's servers never list the rogue and the rogue takes no gateway in; a rogue refused for its password
    # (not its TLS) lists its own outbound attempt for the moment between east's INFO and east's refusal, as a rogue
    # route does (test_route_security.refused_for), so only its inbound side is held for those
    expected = ((["west"], ["west"]), (["east"], ["east"]), [] if credentials or tls_kind == "fleet" else ([], []))
    holds(lambda: (gateways(east), gateways(west),
                   gateways(rogue)[1] if credentials or tls_kind == "fleet" else gateways(rogue)), expected, 1.2)
    got, leaked = asyncio.run(deliveries(client_url(east_s), client_url(west_s),
                                         "nats://127.0.0.1:%d" % ports["client"], super_cluster["ca"].path,
                                         wait=10, settle=0.3))
    assert got >= 1 and leaked == 0, (got, leaked)


def test_a_gateway_does_not_connect_to_an_impostor_at_its_peers_address(nats_binary, start_server, tmp_path):
    """A server whose certificate the fleet CA did not issue, listening where the fleet's gateway looks for
    cluster ``west`` and naming itself ``west``, gets no connection: the fleet's gateway verifies the certificate
    of the gateway it connects to, and sends it nothing."""
    ca = CA(tmp_path, FLEET_CA)
    west_port = free_port()
    east_s = settings(ca, "east", gateway={"name": "east", "port": free_port(),
                                           "gateways": [{"name": "west", "urls": ["nats://127.0.0.1:%d" % west_port]}]})
    cert, key = impostor_ca(tmp_path).issue("west")
    ports = {"client": free_port(), "http": free_port(), "gateway": west_port}
    impostor = start_server(nats_binary[0], sc.render({
        "server_name": "impostor", "listen": "127.0.0.1:%d" % ports["client"],
        "http": "127.0.0.1:%d" % ports["http"],
        "gateway": {"name": "west", "listen": "127.0.0.1:%d" % west_port,
                    "tls": {"cert_file": cert, "key_file": key, "timeout": 2}}}), "impostor", ports["http"])
    impostor.wait(lambda: impostor.get("healthz")["status"] == "ok", 10)
    east = start(start_server, nats_binary, east_s)
    east.wait(lambda: "certificate signed by unknown authority" in log(east), 10)
    holds(lambda: (gateways(east), gateways(impostor)), (([], []), ([], [])), 1.2)

    async def publish_and_count():
        import nats

        tls = ssl.create_default_context(cafile=ca.path)
        publisher = await nats.connect(client_url(east_s), tls=tls, allow_reconnect=False, connect_timeout=3)
        spy = await nats.connect("nats://127.0.0.1:%d" % ports["client"], allow_reconnect=False, connect_timeout=3)
        got = []

        async def count(msg):
            got.append(msg.subject)

        try:
            await spy.subscribe(">", cb=count)
            await spy.flush()
            for _attempt in range(20):
                await publisher.publish("orders.secret", b"for the fleet only")
                await publisher.flush()
                await asyncio.sleep(0.05)
            return got
        finally:
            await publisher.close()
            await spy.close()

    assert asyncio.run(publish_and_count()) == []


def test_a_gateway_reloads_renewed_certificates_and_restarts_for_a_new_timeout(super_cluster, nats_binary):
    """New certificate, key and CA files (another path, as a change of the role's settings puts them) keep the
    restart fingerprint, and a reload (SIGHUP) serves them on the gateway port with both links standing; a new
    TLS handshake timeout changes the fingerprint, and the server indeed refuses to reload it."""
    _binary, version = nats_binary
    ca = super_cluster["ca"]
    (east_s, east), (west_s, west) = super_cluster["nodes"]["east"], super_cluster["nodes"]["west"]
    conf_path = east.proc.args[-1]
    peer = (west_s["tls_cert_file"], west_s["tls_key_file"])
    port = east_s["gateway"]["port"]
    assert served_certificate(port, ca.path, peer) == fingerprint(east_s["tls_cert_file"])

    folder = super_cluster["tmp_path"] / "renewed"
    folder.mkdir()
    cert, key = ca.issue("east", folder=folder)
    renewed = dict(east_s, tls_cert_file=cert, tls_key_file=key)
    assert sc.restart_fingerprint(sc.build_config(renewed)) == sc.restart_fingerprint(sc.build_config(east_s))
    with open(conf_path, "w") as handle:
        handle.write(render(renewed, version))
    since = len(log(east))
    east.proc.send_signal(signal.SIGHUP)
    east.wait(lambda: "Reloaded" in log(east)[since:], 10)
    assert "Failed to reload" not in log(east)[since:]
    east.wait(lambda: served_certificate(port, ca.path, peer) == fingerprint(cert), 10)
    assert gateways(east) == (["west"], ["west"]) and gateways(west) == (["east"], ["east"])

    slower = dict(renewed, tls_timeout=3)
    assert sc.restart_fingerprint(sc.build_config(slower)) != sc.restart_fingerprint(sc.build_config(renewed))
    with open(conf_path, "w") as handle:
        handle.write(render(slower, version))
    since = len(log(east))
    east.proc.send_signal(signal.SIGHUP)
    east.wait(lambda: "config reload not supported for Gateway" in log(east)[since:], 10)


# --------------------------------------------------------------------------
# monitoring over https


def https_get(port, endpoint, context):
    with urllib.request.urlopen("https://127.0.0.1:%d/%s" % (port, endpoint), timeout=3, context=context) as reply:
        return json.loads(reply.read().decode())


@pytest.fixture
def https_monitored(nats_binary, start_server, tmp_path):
    """A server built with nats_server_http_tls, healthy on its https monitoring port."""
    ca = CA(tmp_path, FLEET_CA)
    s = settings(ca, "m1", http_tls=True)
    server = start(start_server, nats_binary, s)
    context = ssl.create_default_context(cafile=ca.path)
    server.wait(lambda: https_get(s["http_port"], "healthz", context) == {"status": "ok"}, 10)
    return {"ca": ca, "s": s, "server": server, "tmp_path": tmp_path}


def test_https_monitoring_answers_clients_that_trust_the_ca_and_nobody_else(https_monitored):
    """/healthz and /varz answer over https with the host's certificate, verified against the fleet CA at the
    address the role reads it at; a client that trusts other CAs fails its handshake, and a plaintext http request
    gets no monitoring data."""
    s, ca = https_monitored["s"], https_monitored["ca"]
    port = s["http_port"]
    context = ssl.create_default_context(cafile=ca.path)
    assert https_get(port, "healthz", context) == {"status": "ok"}
    varz = https_get(port, "varz", context)
    assert varz["server_name"] == "m1" and varz["https_port"] == port and not varz.get("http_port"), varz
    assert served_certificate(port, ca.path, server_hostname="127.0.0.1") == fingerprint(s["tls_cert_file"])

    stranger = CA(https_monitored["tmp_path"], "stranger")
    for untrusting in (ssl.create_default_context(cafile=stranger.path), ssl.create_default_context()):
        with pytest.raises(urllib.error.URLError) as refused:
            https_get(port, "varz", untrusting)
        assert isinstance(refused.value.reason, ssl.SSLCertVerificationError), refused.value

    # Go's TLS listener answers a plaintext request with a bare 400 (2.9.10 and 2.15.1 alike)
    with pytest.raises(urllib.error.HTTPError) as plain:
        urllib.request.urlopen("http://127.0.0.1:%d/varz" % port, timeout=3)
    assert plain.value.code == 400
    assert b"server_id" not in plain.value.read()


HEALTH_CHECK = """
- name: The nats_server role's health check
  ansible.builtin.include_role:
    name: nats_edge.fleet.nats_server
    tasks_from: health
  vars:
    nats_server_http_tls: {tls}
    nats_server_http_port: {port}
    nats_server_tls_ca_file: {ca}
    nats_server_health_timeout: 2
"""


@pytest.mark.parametrize("trusts,tls,passes", [
    ("fleet", "true", True), ("stranger", "true", False), ("fleet", "false", False)])
def test_the_roles_health_check_verifies_https_monitoring_against_the_ca(https_monitored, trusts, tls, passes):
    """The role's wait for /healthz (after a start or a restart) reads https monitoring verified against the CA it
    is given: it passes with the fleet CA, fails with another, and fails reading the port over http."""
    tmp_path = https_monitored["tmp_path"]
    ca = https_monitored["ca"].path if trusts == "fleet" else CA(tmp_path, "stranger").path
    result = run_playbook(tmp_path, HEALTH_CHECK.format(tls=tls, port=https_monitored["s"]["http_port"], ca=ca))
    assert (result.returncode == 0) is passes, result.stdout[-3000:]
    if not passes:
        assert "nats-server is not healthy" in result.stdout, result.stdout[-3000:]
    if trusts == "stranger":
        assert "CERTIFICATE_VERIFY_FAILED" in result.stdout, result.stdout[-3000:]


def test_https_monitoring_serves_a_renewed_certificate_after_a_reload(https_monitored):
    """A certificate renewed in place is served on the https monitoring port after a reload, as on the client
    port (the monitoring listener takes the client listener's TLS settings at each handshake)."""
    s, ca, server = https_monitored["s"], https_monitored["ca"], https_monitored["server"]
    port = s["http_port"]
    old = fingerprint(s["tls_cert_file"])
    assert served_certificate(port, ca.path, server_hostname="127.0.0.1") == old
    renewed, _key = ca.issue("m1")
    assert renewed == s["tls_cert_file"] and fingerprint(renewed) != old
    assert served_certificate(port, ca.path, server_hostname="127.0.0.1") == old
    server.proc.send_signal(signal.SIGHUP)
    server.wait(lambda: served_certificate(port, ca.path, server_hostname="127.0.0.1") == fingerprint(renewed), 10)
    context = ssl.create_default_context(cafile=ca.path)
    assert https_get(port, "healthz", context) == {"status": "ok"}


ROLLOUT_GATE = """
- name: The rollout playbook's gate on each member's /healthz
  ansible.builtin.include_tasks: {gate}
  vars:
    nats_rollout_gate_timeout: 2
    _nats_fleet_rollout_gate:
      what: the cluster is healthy
      hosts: [localhost]
      endpoint: healthz
"""


@pytest.mark.parametrize("trusts,passes", [("fleet", True), ("stranger", False)])
def test_the_rollout_gates_read_https_monitoring_verified_against_the_hosts_ca(https_monitored, trusts, passes):
    """The rollout playbook's gates read each member's monitoring port where nats_server_monitor says, with the
    member's variables as the inventory gives them: over https, verified against its CA (a gate at http:// would
    never see the server healthy and halt the rollout)."""
    tmp_path = https_monitored["tmp_path"]
    ca = https_monitored["ca"].path if trusts == "fleet" else CA(tmp_path, "stranger").path
    host = {"nats_server_http_tls": True, "nats_server_http_port": https_monitored["s"]["http_port"],
            "nats_server_tls_ca_file": ca}
    gate = os.path.join(ROOT, "roles", "nats_fleet", "tasks", "rollout_gate.yml")
    result = run_playbook(tmp_path, ROLLOUT_GATE.format(gate=gate), extra_args=["-e", json.dumps(host)])
    assert (result.returncode == 0) is passes, result.stdout[-3000:]
    if not passes:
        assert "rollout halted at localhost: the cluster is healthy did not hold" in result.stdout, result.stdout[-3000:]
        assert "CERTIFICATE_VERIFY_FAILED" in result.stdout, result.stdout[-3000:]
