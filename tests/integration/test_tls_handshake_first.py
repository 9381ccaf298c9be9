"""The client port's TLS handshake first, as the role renders it (nats_server_client_tls_handshake_first), run by a
real nats-server on loopback with certificates made here, and the modules' tls_handshake_first against it: a module
that starts with the handshake connects, one that waits for the INFO fails saying why; a fallback delay serves both;
a server without it does not answer a module that starts with the handshake, until a reload gives it the option.
nats-server 2.9.10 does not know the option: the role refuses it there before anything is written."""

import signal
import subprocess

import pytest

from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _server_config as sc

from conftest import free_port
from pki import CA

FIRST = (2, 10, 4)


def settings(tmp_path, **over):
    ca = CA(tmp_path)
    cert, key = ca.issue("server")
    s = {"name": "hs", "inventory_hostname": "hs", "groups": {}, "hostvars": {}, "config_dir": str(tmp_path),
         "listen_host": "127.0.0.1", "port": free_port(), "http_host": "127.0.0.1", "http_port": free_port(),
         "tls_cert_file": cert, "tls_key_file": key, "tls_ca_file": ca.path, "tls_timeout": 2,
         "jetstream_enabled": True, "jetstream_store_dir": str(tmp_path / "js"), "allow_anonymous": True}
    s.update(over)
    return s


def render(s, version):
    conf, _dropped = sc.prune_for_version(sc.build_config(s), version)
    return sc.render(conf)


def start(start_server, binary, version, s):
    server = start_server(binary, render(s, version), s["name"], s["http_port"])
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    return server


def args(s, **over):
    out = dict(servers=["nats://127.0.0.1:%d" % s["port"]], tls_ca=s["tls_ca_file"], name="ORDERS",
               subjects=["orders.>"], timeout=3)
    out.update(over)
    return out


def test_the_oldest_server_does_not_know_it_and_the_role_refuses_it(nats_binary, tmp_path):
    binary, version = nats_binary
    s = settings(tmp_path, client_tls_handshake_first=True)
    if sc.parse_version(version) >= FIRST:
        assert "handshake_first: true" in render(s, version)
        return
    with pytest.raises(sc.ConfigError) as error:
        render(s, version)
    assert str(error.value).startswith("nats_server_client_tls_handshake_first needs nats-server 2.10.4 or later, "
                                       "and this host runs %s" % version)
    # and the server itself: the key it would get is one it refuses to start with
    conf = sc.build_config(s)
    path = tmp_path / "check.conf"
    path.write_text(sc.render(conf))
    check = subprocess.run([binary, "-t", "-c", str(path)], capture_output=True, text=True, check=False)
    assert check.returncode != 0 and "handshake_first" in check.stderr + check.stdout


def test_a_module_starts_tls_first_and_one_that_waits_for_the_info_is_told_why(nats_binary, tmp_path, start_server,
                                                                               module):
    binary, version = nats_binary
    if sc.parse_version(version) < FIRST:
        pytest.skip("nats-server %s does not know the TLS handshake first (the refusal is tested above)" % version)
    s = settings(tmp_path, client_tls_handshake_first=True)
    assert "handshake_first: true" in render(s, version)
    server = start(start_server, binary, version, s)
    assert 'Clients that are not using "TLS Handshake First" option will fail to connect' in open(
        server.log.name).read()

    created = module("jetstream_stream", args(s, tls_handshake_first=True))
    assert not created.get("failed") and created["changed"], created
    assert module("jetstream_stream", args(s, tls_handshake_first=True))["changed"] is False

    waiting = module("jetstream_stream", args(s))
    assert waiting.get("failed"), waiting
    assert waiting["msg"].startswith("cannot connect to nats://127.0.0.1:%d: " % s["port"]), waiting["msg"]
    assert "the server closed the connection before its INFO" in waiting["msg"], waiting["msg"]
    assert "set tls_handshake_first: true" in waiting["msg"], waiting["msg"]


def test_a_fallback_delay_serves_both_kinds_of_client(nats_binary, tmp_path, start_server, module):
    binary, version = nats_binary
    if sc.parse_version(version) < FIRST:
        pytest.skip("nats-server %s does not know the TLS handshake first" % version)
    s = settings(tmp_path, client_tls_handshake_first="300ms", tls_allow_non_tls=True)
    assert 'handshake_first: "300ms"' in render(s, version)
    start(start_server, binary, version, s)
    first = module("jetstream_stream", args(s, tls_handshake_first=True))
    assert not first.get("failed") and first["changed"], first
    waiting = module("jetstream_stream", args(s, subjects=["orders.>", "eu.orders.>"]))
    assert not waiting.get("failed") and waiting["changed"], waiting
    plaintext = module("jetstream_info", dict(servers=["nats://127.0.0.1:%d" % s["port"]], timeout=3))
    assert not plaintext.get("failed"), plaintext
    assert [stream["name"] for stream in plaintext["streams"]] == ["ORDERS"]


def test_a_server_without_it_does_not_answer_until_a_reload_gives_it(nats_binary, tmp_path, start_server, module):
    binary, version = nats_binary
    if sc.parse_version(version) < FIRST:
        pytest.skip("nats-server %s does not know the TLS handshake first" % version)
    s = settings(tmp_path)
    server = start(start_server, binary, version, s)
    unanswered = module("jetstream_stream", args(s, tls_handshake_first=True, timeout=2))
    assert unanswered.get("failed"), unanswered
    # the server's plaintext INFO reaches the client's TLS as a record it cannot read, or the handshake waits until
    # the time is up: both said so
    assert ("timed out" in unanswered["msg"] or "WRONG_VERSION_NUMBER" in unanswered["msg"]), unanswered
    assert "sends its INFO in plaintext instead: set tls_handshake_first: false" in unanswered["msg"], unanswered

    # the role reloads for it (the client tls block reloads): the same process takes the handshake first
    with_first = dict(s, client_tls_handshake_first=True)
    before = sc.restart_fingerprint(sc.build_config(s), version)
    assert not sc.fingerprint_needs_restart(before, sc.restart_fingerprint(sc.build_config(with_first), version))
    loaded = server.get("varz")["config_load_time"]
    with open(str(tmp_path / "hs.conf"), "w") as handle:
        handle.write(render(with_first, version))
    server.proc.send_signal(signal.SIGHUP)
    server.wait(lambda: server.get("varz")["config_load_time"] != loaded)
    created = module("jetstream_stream", args(s, tls_handshake_first=True))
    assert not created.get("failed") and created["changed"], created
    assert server.proc.poll() is None
