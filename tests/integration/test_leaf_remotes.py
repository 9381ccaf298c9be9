"""Leaf remote options of nats-server 2.12 to 2.15 as the role renders them, run by real servers on loopback: a
websocket remote through an HTTP CONNECT proxy the test runs, and remotes added and removed by a reload."""

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import threading

import pytest
import yaml

from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _server_config as sc

from conftest import COLLECTIONS, ROOT, free_port


def settings(tmp_path, name, **over):
    s = {"name": name, "inventory_hostname": name, "groups": {}, "hostvars": {}, "config_dir": str(tmp_path),
         "listen_host": "127.0.0.1", "port": free_port(), "http_host": "127.0.0.1", "http_port": free_port(),
         "jetstream_enabled": False, "insecure_plaintext": ["all"], "allow_anonymous": True}
    s.update(over)
    return s


def config(tmp_path, version, name, **over):
    """The config the role writes for ``version``, and its restart fingerprint."""
    conf, _dropped = sc.prune_for_version(sc.build_config(settings(tmp_path, name, **over)), version)
    return conf, sc.restart_fingerprint(conf, version)


def newer(version, than):
    return sc.parse_version(version) >= than


def server_check(binary, tmp_path, conf):
    path = tmp_path / "check.conf"
    path.write_text(sc.render(conf))
    return subprocess.run([binary, "-t", "-c", str(path)], capture_output=True, text=True, check=False)


EVERY_OPTION = {"url": "ws://127.0.0.1:1", "disabled": True, "ignore_discovered_servers": True,
                "isolate_leafnode_interest": True, "request_isolation": True, "ws_compression": True,
                "ws_no_masking": True,
                "proxy": {"url": "http://127.0.0.1:2", "username": "u", "password": "p", "timeout": "5s"}}


def test_every_remote_option_and_feature_flag_passes_the_servers_own_check(nats_binary, tmp_path):
    binary, version = nats_binary
    over = dict(leafnode_remotes=[EVERY_OPTION], feature_flags={"js_ack_fc_v2": True, "js_snapshot_sources": True})
    if not newer(version, (2, 14, 0)):
        # the oldest server: refused for the remote options, the flags left out
        with pytest.raises(sc.ConfigError, match=r"nats_server_leafnode_remotes\[0\]\.disabled needs nats-server "
                                                 r"2\.12\.0 or later, and this host runs %s" % version):
            config(tmp_path, version, "edge", **over)
        over["leafnode_remotes"] = [{"url": "ws://127.0.0.1:1", "ws_compression": True, "ws_no_masking": True}]
    conf, _fp = config(tmp_path, version, "edge", **over)
    result = server_check(binary, tmp_path, conf)
    assert result.returncode == 0, result.stderr + result.stdout
    assert ("feature_flags" in conf) is newer(version, (2, 14, 0))


def test_a_remote_dial_timeout_is_run_from_2_14_5_and_refused_before(nats_binary, tmp_path, start_server):
    """dial_timeout (the TCP connect to each of the remote's URLs): the servers that know it check it and link with
    it; an older server refuses the key as unknown, and the role refuses it before that, naming the version."""
    binary, version = nats_binary
    leaf_port = free_port()
    remote = {"url": "nats-leaf://127.0.0.1:%d" % leaf_port, "dial_timeout": "5s"}
    if not newer(version, (2, 14, 5)):
        with pytest.raises(sc.ConfigError, match=r"nats_server_leafnode_remotes\[0\]\.dial_timeout needs nats-server "
                                                 r"2\.14\.5 or later, and this host runs %s" % version):
            config(tmp_path, version, "edge", leafnode_remotes=[remote])
        unpruned = sc.build_config(settings(tmp_path, "edge", leafnode_remotes=[remote]))
        result = server_check(binary, tmp_path, unpruned)
        assert result.returncode != 0 and 'unknown field "dial_timeout"' in result.stderr + result.stdout
        return
    hub, _fp = config(tmp_path, version, "hub", leafnodes_port=leaf_port)
    edge, _fp = config(tmp_path, version, "edge", leafnode_remotes=[remote])
    assert edge["leafnodes"]["remotes"][0]["dial_timeout"] == "5s"
    assert 'dial_timeout: "5s"' in sc.render(edge)
    result = server_check(binary, tmp_path, edge)
    assert result.returncode == 0, result.stderr + result.stdout
    hub_server = start_server(binary, sc.render(hub), "hub", int(hub["http"].rsplit(":", 1)[1]))
    edge_server = start_server(binary, sc.render(edge), "edge", int(edge["http"].rsplit(":", 1)[1]))
    edge_server.wait(lambda: edge_server.get("leafz")["leafnodes"] == 1)
    assert hub_server.wait(lambda: hub_server.get("leafz")["leafnodes"] == 1)


class ConnectProxy:
    """An HTTP CONNECT proxy on loopback: counts the CONNECTs it saw and the credentials they carried, then
    relays bytes both ways."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.connects = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                client, _addr = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client):
        try:
            self._relay(client)
        except OSError:
            client.close()

    def _relay(self, client):
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(4096)
            if not chunk:
                client.close()
                return
            head += chunk
        head, rest = head.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        method, target, _http = lines[0].split(" ", 2)
        headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
        self.connects.append((method, target, headers.get("Proxy-Authorization", "")))
        host, port = target.rsplit(":", 1)
        upstream = socket.create_connection((host, int(port)), timeout=5)
        upstream.settimeout(None)
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        if rest:
            upstream.sendall(rest)
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.sock.close()


def test_a_websocket_remote_reaches_its_hub_through_an_http_connect_proxy(nats_binary, tmp_path, start_server):
    binary, version = nats_binary
    ws_port = free_port()
    proxy = {"url": "http://127.0.0.1:1", "username": "edge", "password": "proxy-secret", "timeout": "5s"}
    remote = {"url": "ws://127.0.0.1:%d" % ws_port, "proxy": proxy}
    if not newer(version, (2, 12, 1)):
        with pytest.raises(sc.ConfigError, match=r"nats_server_leafnode_remotes\[0\]\.proxy needs nats-server 2\.12\.1"):
            config(tmp_path, version, "edge", leafnode_remotes=[remote])
        return
    relay = ConnectProxy()
    try:
        proxy["url"] = "http://127.0.0.1:%d" % relay.port
        hub, _fp = config(tmp_path, version, "hub", leafnodes_port=free_port(), websocket={"port": ws_port})
        edge, _fp = config(tmp_path, version, "edge", leafnode_remotes=[remote])
        assert edge["leafnodes"]["remotes"][0]["proxy"]["url"] == proxy["url"]
        hub_server = start_server(binary, sc.render(hub), "hub", int(hub["http"].rsplit(":", 1)[1]))
        edge_server = start_server(binary, sc.render(edge), "edge", int(edge["http"].rsplit(":", 1)[1]))
        edge_server.wait(lambda: edge_server.get("leafz")["leafnodes"] == 1)
        assert hub_server.wait(lambda: hub_server.get("leafz")["leafnodes"] == 1)
        expected_auth = "Basic " + base64.b64encode(b"edge:proxy-secret").decode()
        assert ("CONNECT", "127.0.0.1:%d" % ws_port, expected_auth) in relay.connects, relay.connects
    finally:
        relay.close()


def accounts(*names):
    return {name: {"users": [{"user": name.lower(), "password": "pw-" + name.lower()}]} for name in names}


def test_a_remote_added_or_removed_reloads_from_2_14_and_restarts_before(nats_binary, tmp_path, start_server):
    """The role reloads (same process, a newer config_load_time, the new leaf connection in /leafz) where the
    server takes it, and restarts where it refuses it: the oldest server refuses the reload."""
    binary, version = nats_binary
    leaf_port = free_port()
    hub, _fp = config(tmp_path, version, "hub", leafnodes_port=leaf_port)
    url = "nats-leaf://127.0.0.1:%d" % leaf_port
    ports = dict(port=free_port(), http_port=free_port())
    a = {"url": url, "account": "A"}
    b = {"url": url.replace("127.0.0.1", "localhost"), "account": "B"}
    edge_a, fp_a = config(tmp_path, version, "edge", leafnode_remotes=[a], accounts=accounts("A", "B"), **ports)
    edge_ab, fp_ab = config(tmp_path, version, "edge", leafnode_remotes=[a, b], accounts=accounts("A", "B"), **ports)
    reloads = newer(version, sc.RELOAD_REMOTES_SINCE)
    # what the role decides
    assert sc.fingerprint_needs_restart(json.dumps(fp_a), fp_ab) is not reloads
    assert sc.fingerprint_needs_restart(json.dumps(fp_ab), fp_a) is not reloads

    hub_server = start_server(binary, sc.render(hub), "hub", int(hub["http"].rsplit(":", 1)[1]))
    edge_server = start_server(binary, sc.render(edge_a), "edge", ports["http_port"])
    edge_server.wait(lambda: edge_server.get("leafz")["leafnodes"] == 1)
    hub_server.wait(lambda: hub_server.get("leafz")["leafnodes"] == 1)
    before = edge_server.get("varz")
    conf_path = str(tmp_path / "edge.conf")

    def signal_reload(conf):
        with open(conf_path, "w") as handle:
            handle.write(sc.render(conf))
        os.kill(edge_server.proc.pid, signal.SIGHUP)

    def reload_to(conf):
        loaded = edge_server.get("varz")["config_load_time"]
        signal_reload(conf)
        edge_server.wait(lambda: edge_server.get("varz")["config_load_time"] != loaded)

    if not reloads:
        signal_reload(edge_ab)
        edge_server.wait(lambda: "reload" in open(conf_path + ".log").read().lower())
        log = open(conf_path + ".log").read()
        assert "not supported" in log, log[-1500:]
        assert edge_server.get("varz")["config_load_time"] == before["config_load_time"]
        assert edge_server.get("leafz")["leafnodes"] == 1
        return

    reload_to(edge_ab)
    after = edge_server.wait(lambda: edge_server.get("leafz")["leafnodes"] == 2 and edge_server.get("varz"))
    assert edge_server.proc.poll() is None and after["start"] == before["start"]
    assert after["config_load_time"] != before["config_load_time"]
    leafs = {leaf["account"] for leaf in edge_server.get("leafz")["leafs"]}
    assert leafs == {"A", "B"}
    hub_server.wait(lambda: hub_server.get("leafz")["leafnodes"] == 2)
    # and removed again
    reload_to(edge_a)
    edge_server.wait(lambda: edge_server.get("leafz")["leafnodes"] == 1)
    assert [leaf["account"] for leaf in edge_server.get("leafz")["leafs"]] == ["A"]
    assert edge_server.get("varz")["start"] == before["start"]
    # disabled reloads; a remote changed in place otherwise does not, and the role restarts for it
    edge_off, fp_off = config(tmp_path, version, "edge", leafnode_remotes=[dict(a, disabled=True)],
                              accounts=accounts("A", "B"), **ports)
    assert sc.fingerprint_needs_restart(json.dumps(fp_a), fp_off) is False
    reload_to(edge_off)
    edge_server.wait(lambda: edge_server.get("leafz")["leafnodes"] == 0)
    edge_hub, fp_hub = config(tmp_path, version, "edge", leafnode_remotes=[dict(a, deny_imports=["x.>"])],
                              accounts=accounts("A", "B"), **ports)
    assert sc.fingerprint_needs_restart(json.dumps(fp_off), fp_hub) is True
    loaded = edge_server.get("varz")["config_load_time"]
    signal_reload(edge_hub)
    edge_server.wait(lambda: "not supported" in open(conf_path + ".log").read())
    assert edge_server.get("varz")["config_load_time"] == loaded


ROLE_VARS = os.path.join(ROOT, "roles", "nats_server", "vars", "main.yml")


def test_the_role_reloads_for_remotes_added_and_restarts_for_a_remote_changed(tmp_path):
    """The role's own decision (vars/main.yml) over the host's state: a fingerprint written this run restarts only
    where fingerprint_restart says so; one newer than the config the server loaded (a run stopped before its
    restart) restarts; a reload's load time past the fingerprint's mtime leaves it be."""
    role_vars = yaml.safe_load(open(ROLE_VARS))
    a, b = {"urls": ["nats-leaf://hub-1:7422"]}, {"urls": ["nats-leaf://hub-2:7422"]}
    cases = {
        "added": (150, True, {"leafnodes": {"remotes": {"r-a": a}}}, {"leafnodes": {"remotes": {"r-a": a, "r-b": b}}},
                  (False, True)),
        "changed": (150, True, {"leafnodes": {"remotes": {"r-a": a}}},
                    {"leafnodes": {"remotes": {"r-a": dict(a, hub=True)}}}, (True, True)),
        "interrupted": (250, False, {}, {}, (True, False)),
        "reloaded-before": (150, False, {}, {}, (False, False)),
    }
    plays = []
    for name, (mtime, written, old, new, _expected) in sorted(cases.items()):
        play_vars = {key: role_vars[key] for key in ("_nats_server_wants_restart", "_nats_server_wants_reload")}
        play_vars.update({
            "_nats_server_was_up": True, "_nats_server_up_already": True, "_nats_server_live": True,
            "_nats_server_stale_process": False, "_nats_server_binary_changed": False,
            "_nats_server_serves_stale_cert": False, "_nats_server_restart_files": [], "_nats_server_reload_files": [],
            "_nats_server_fingerprint_file": "/etc/nats-server/restart-fingerprint.json",
            "_nats_server_live_mtimes": {"/etc/nats-server/restart-fingerprint.json": mtime},
            "_nats_server_live_started_at": 100, "_nats_server_live_loaded_at": 200,
            "_nats_server_env_written": {}, "_nats_server_unit_written": {}, "_nats_server_creds_files": {},
            "_nats_server_operator_written": {}, "_nats_server_tls_written": {},
            "_nats_server_config_written": {"changed": written}, "_nats_server_fingerprint_written": {"changed": written},
            "_nats_server_fingerprint": json.dumps(new) + "\n",
            "_nats_server_previous_fingerprint": {"content": base64.b64encode(json.dumps(old).encode()).decode()},
        })
        plays.append({"hosts": "localhost", "gather_facts": False, "vars": play_vars, "tasks": [{"debug": {
            "msg": name + " {{ _nats_server_wants_restart | bool }} {{ _nats_server_wants_reload | bool }}"}}]})
    (tmp_path / "play.yml").write_text(yaml.safe_dump(plays))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                           "-c", "local", str(tmp_path / "play.yml")], capture_output=True, text=True, env=env,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    report = json.loads(proc.stdout[proc.stdout.index("{"):])
    seen = {}
    for play in report["plays"]:
        name, restart, reload_ = play["tasks"][0]["hosts"]["localhost"]["msg"].split()
        seen[name] = (restart == "True", reload_ == "True")
    assert seen == {name: case[4] for name, case in cases.items()}
