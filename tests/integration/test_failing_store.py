"""A failing store under a real nats-server: its JetStream store on an ext4 file system of its own (a loop device,
errors=remount-ro), which the kernel turns read-only on an error as it does when flash fails; the error is raised
through ext4's own trigger (/sys/fs/ext4/<device>/trigger_fs_error). What publishers see, what /healthz and the
rollout's health gate (nats_server_wait) say, and the documented recovery: stop, check the file system, mount it
again, start - the stream keeps what reached the flash and takes new messages again. nats-server 2.14 and newer
stop acknowledging and fail /healthz naming the stream; 2.9 acknowledges what it cannot write and stays healthy.

Needs root and a loop device (as make test has on the project's machines)."""

import json
import os
import subprocess

from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import JetStream, NatsClient, NatsClientError

from conftest import free_port, operator_mode_conf, run_module

FROZEN_SINCE = (2, 14, 0)


def _version(text):
    return tuple(int(part) for part in text.split("-")[0].split(".")[:3])


def _run(*argv):
    return subprocess.run(list(argv), capture_output=True, text=True, check=True, timeout=60).stdout


def test_a_store_that_turns_read_only_fails_the_health_gate_and_recovers(nats_binary, start_server, flash, tmp_path):
    binary, version = nats_binary
    mount, image, trigger = flash
    base = dict(store_dir=str(tmp_path / "stores"), keys_dir=str(tmp_path / "keys"), operator="fleet")
    operator = run_module("nsc_operator", base)
    port, http = free_port(), free_port()
    url = "nats://127.0.0.1:%d" % port
    conf = operator_mode_conf(mount, operator, port, http)  # its JetStream store and resolver on the flash
    server = start_server(binary, conf, "edge", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    pushed = run_module("nsc_account", dict(base, name="APP", jetstream=dict(disk_storage="32MiB", mem_storage="8MiB"),
                                            push=True, servers=[url], creds=operator["sys_creds"], timeout=3.0))
    assert not pushed.get("failed") and not pushed.get("unconfirmed"), pushed
    creds = run_module("nsc_user", dict(base, account="APP", name="app"))["creds_file"]
    app = {"servers": [url], "creds": creds, "timeout": 2.0}
    with NatsClient(app) as client:
        JetStream(client).call("STREAM.CREATE.TELEMETRY", {"name": "TELEMETRY", "subjects": ["t.>"], "storage": "file"})
        for number in range(10):
            json.loads(client.request("t.reading", b"%d" % number).decode())  # acknowledged
        client.flush()
        os.sync()  # on the flash, as after the server's sync interval: what fails next is new writes only

        with open(trigger, "w") as handle:  # the kernel remounts the file system read-only
            handle.write("nats_edge test\n")
        assert "emergency_ro" in open("/proc/mounts").read() or " ro," in open("/proc/mounts").read()

        # what a publisher sees
        unacknowledged = 0
        for number in range(3):
            try:
                client.request("t.reading", b"after %d" % number, timeout=2.0)
            except NatsClientError:
                unacknowledged += 1
    gate = run_module("nats_server_wait", {"url": "http://127.0.0.1:%d" % http, "endpoint": "healthz", "name": "edge",
                                           "timeout": 3, "interval": 0.5})
    info = run_module("jetstream_info", dict(app, system_creds=operator["sys_creds"]))
    assert not info.get("failed"), info
    stream = [row for row in info["streams"] if row["name"] == "TELEMETRY"][0]
    if _version(version) >= FROZEN_SINCE:
        # no acknowledgement, no error reply
        assert unacknowledged == 3
        # the gate the rollout waits on halts, naming the server, the stream and the error
        assert gate.get("failed") and "edge: not healthy" in gate["msg"], gate
        assert "TELEMETRY" in gate["msg"] and "read-only file system" in gate["msg"], gate["msg"]
        # jetstream_info names the server and the frozen stream
        assert [row["server"] for row in info["unhealthy"]] == ["n1"], info["unhealthy"]
        assert "read-only file system" in stream["health_error"], stream
        assert any("server n1 is not healthy" in w for w in info["warnings"]), info["warnings"]
    else:
        # before 2.14 the server acknowledges what it cannot write and stays healthy: the 3 are lost (below)
        assert unacknowledged == 0 and not gate.get("failed"), (unacknowledged, gate)
        assert info["unhealthy"] == [] and "health_error" not in stream, info

    # recovery: stop the server, check the file system, mount it again, start
    server.stop()
    subprocess.run(["umount", str(mount)], capture_output=True, check=True)
    subprocess.run(["e2fsck", "-f", "-y", str(image)], capture_output=True, check=False)  # exit 1: it fixed something
    _run("mount", "-o", "loop,errors=remount-ro", str(image), str(mount))
    server = start_server(binary, conf, "edge-again", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    with NatsClient(app) as client:
        js = JetStream(client)
        # what was on the flash is kept (and nothing of what came after, acknowledged or not)
        assert js.call("STREAM.INFO.TELEMETRY")["state"]["messages"] == 10
        json.loads(client.request("t.reading", b"new").decode())
        assert js.call("STREAM.INFO.TELEMETRY")["state"]["messages"] == 11
    passed = run_module("nats_server_wait", {"url": "http://127.0.0.1:%d" % http, "endpoint": "healthz",
                                             "timeout": 5})
    assert not passed.get("failed"), passed
    assert run_module("jetstream_info", dict(app, system_creds=operator["sys_creds"]))["unhealthy"] == []
