"""A full disk under a real nats-server: its JetStream store on an ext4 file system of its own (a loop device), filled
by something else (a file) until the server's writes fail with ENOSPC. What writers see, what /healthz and the
rollout's health gate (nats_server_wait) say, and the recovery: space freed, then (2.14 and newer) a restart.
nats-server 2.15 stops acknowledging, fails /healthz naming the stream and stays so after space is freed until it is
restarted; 2.9 answers each write with an error (err_code 10077, the ENOSPC text), stays healthy and takes writes
again as soon as there is space. Within JetStream's own limit (max_file_store below the free space, as the role's
small-device profile sizes it from the store's mount) neither release fills the disk: writers get err_code 10023
"insufficient resources" and the server stays healthy.

Needs root and a loop device (as make test has on the project's machines)."""

import json
import os

from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import JetStream, NatsClient, NatsClientError

from conftest import _js_conf, free_port, run_module

FROZEN_SINCE = (2, 14, 0)
PAYLOAD = b"x" * 1024


def _version(text):
    return tuple(int(part) for part in text.split("-")[0].split(".")[:3])


def _fill(mount, leave):
    """A file that leaves ``leave`` bytes free on the file system of ``mount`` (counting the blocks ext4 keeps for
    root, which a server running as root writes to)."""
    stat = os.statvfs(str(mount))
    path = os.path.join(str(mount), "filler")
    with open(path, "wb") as handle:
        os.posix_fallocate(handle.fileno(), 0, stat.f_bfree * stat.f_frsize - leave)
    os.sync()
    return path


def _write_until_refused(client, limit=20000):
    """(acknowledged, the errors of the first 3 writes that were not) for writes of 1 KiB until 3 fail."""
    acknowledged, errors = 0, []
    for _number in range(limit):
        try:
            reply = json.loads(client.request("t.reading", PAYLOAD, timeout=0.5).decode())
        except NatsClientError as exc:
            errors.append("no reply: %s" % exc)
        else:
            if "error" not in reply:
                acknowledged += 1
                continue
            errors.append("%(err_code)s %(description)s" % reply["error"])
        if len(errors) == 3:
            break
    return acknowledged, errors


def _gate(http):
    return run_module("nats_server_wait", {"url": "http://127.0.0.1:%d" % http, "endpoint": "healthz", "name": "edge",
                                           "timeout": 2, "interval": 0.5})


def test_a_disk_filled_by_something_else(nats_binary, start_server, flash):
    binary, version = nats_binary
    mount, _image, _trigger = flash
    port, http = free_port(), free_port()
    conf = _js_conf("edge", port, http, os.path.join(str(mount), "js"), "spoke")  # max_file_store 1 GiB: past the disk
    filler = _fill(mount, 3 * 1024 * 1024)
    server = start_server(binary, conf, "edge", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    app = {"servers": ["nats://127.0.0.1:%d" % port], "timeout": 2.0}
    with NatsClient(app) as client:
        JetStream(client, domain="spoke").call("STREAM.CREATE.TELEMETRY", {
            "name": "TELEMETRY", "subjects": ["t.>"], "storage": "file"})
        acknowledged, errors = _write_until_refused(client)
    assert 1000 < acknowledged < 3072, (acknowledged, errors)
    gate = _gate(http)
    frozen = _version(version) >= FROZEN_SINCE
    if frozen:
        # no acknowledgement, no error reply; the gate the rollout waits on halts, naming the stream and the error
        assert all(error.startswith("no reply") for error in errors), errors
        assert gate.get("failed") and "edge: not healthy" in gate["msg"], gate
        assert "TELEMETRY" in gate["msg"] and "no space left on device" in gate["msg"], gate["msg"]
    else:
        # each write answered with the error; the server stays healthy
        assert all(error.startswith("10077 ") and "no space left on device" in error for error in errors), errors
        assert not gate.get("failed"), gate

    os.unlink(filler)  # space again
    os.sync()
    with NatsClient(app) as client:
        if frozen:
            # the stream stays frozen with space free: no write taken, still not healthy
            assert _write_until_refused(client, limit=3)[0] == 0
            assert _gate(http).get("failed")
        else:
            assert _write_until_refused(client, limit=3) == (3, [])  # taken again, without a restart
    if frozen:
        server.stop()  # the recovery: a restart
        server = start_server(binary, conf, "edge-again", http)
        server.wait(lambda: server.get("healthz")["status"] == "ok")
    with NatsClient(app) as client:
        js = JetStream(client, domain="spoke")
        kept = js.call("STREAM.INFO.TELEMETRY")["state"]["messages"]
        # everything acknowledged is kept, and new writes are taken
        assert kept == acknowledged + (0 if frozen else 3), (kept, acknowledged)
        assert "error" not in json.loads(client.request("t.reading", b"new").decode())
    assert not _gate(http).get("failed")


def test_a_disk_that_fills_while_the_server_writes(nats_binary, start_server, flash):
    """The disk fills while the server runs (a log, another program), after the stream was created: 2.15 freezes the
    stream as above and a restart recovers it with everything acknowledged. 2.9 stops answering JetStream altogether
    (its API, the writes) while /healthz says ok; freeing space does not help, nor does SIGTERM: only SIGKILL. After
    it, with space free, the server starts with every acknowledged message."""
    binary, version = nats_binary
    mount, _image, _trigger = flash
    port, http = free_port(), free_port()
    conf = _js_conf("edge", port, http, os.path.join(str(mount), "js"), "spoke")
    server = start_server(binary, conf, "edge", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    app = {"servers": ["nats://127.0.0.1:%d" % port], "timeout": 2.0}
    with NatsClient(app) as client:
        js = JetStream(client, domain="spoke")
        js.call("STREAM.CREATE.TELEMETRY", {"name": "TELEMETRY", "subjects": ["t.>"], "storage": "file"})
        filler = _fill(mount, 3 * 1024 * 1024)
        acknowledged, errors = _write_until_refused(client)
        assert acknowledged > 1000 and all(error.startswith("no reply") for error in errors), (acknowledged, errors)
        os.unlink(filler)
        os.sync()
        if _version(version) >= FROZEN_SINCE:
            assert _gate(http).get("failed")
        else:
            # healthy by /healthz, yet its JetStream answers nothing, space or not
            assert not _gate(http).get("failed")
            try:
                js.call("STREAM.INFO.TELEMETRY")
            except NatsClientError as exc:
                assert "no reply" in str(exc) or "timed out" in str(exc), exc
            else:
                raise AssertionError("nats-server %s answered its JetStream API after ENOSPC" % version)
    if _version(version) >= FROZEN_SINCE:
        server.stop()
    else:
        server.proc.terminate()
        try:
            server.proc.wait(5)
        except Exception:  # pylint: disable=broad-except
            server.proc.kill()  # SIGTERM does not end it
            server.proc.wait(5)
        else:
            raise AssertionError("nats-server %s stopped on SIGTERM after ENOSPC" % version)
        server.log.close()
    server = start_server(binary, conf, "edge-again", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    with NatsClient(app) as client:
        assert JetStream(client, domain="spoke").call("STREAM.INFO.TELEMETRY")["state"]["messages"] == acknowledged
        assert "error" not in json.loads(client.request("t.reading", b"new").decode())


def test_jetstream_limit_below_the_free_space(nats_binary, start_server, flash):
    binary, _version_text = nats_binary
    mount, _image, _trigger = flash
    port, http = free_port(), free_port()
    conf = _js_conf("edge", port, http, os.path.join(str(mount), "js"), "spoke").replace(
        "max_file_store: 1073741824", "max_file_store: 4194304")  # 4 MiB of the 64 MiB file system
    server = start_server(binary, conf, "edge", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    with NatsClient({"servers": ["nats://127.0.0.1:%d" % port], "timeout": 2.0}) as client:
        JetStream(client, domain="spoke").call("STREAM.CREATE.TELEMETRY", {
            "name": "TELEMETRY", "subjects": ["t.>"], "storage": "file"})
        acknowledged, errors = _write_until_refused(client)
    assert 2000 < acknowledged < 4096, (acknowledged, errors)
    assert errors == ["10023 insufficient resources"] * 3, errors
    assert not _gate(http).get("failed")
