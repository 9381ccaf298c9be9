"""A power cut under a real nats-server, at the device: its JetStream store on an ext4 file system of its own (a loop
device); while a publisher writes steadily, acknowledged, the file system is cut off from its device at once (ext4's
own error trigger: from then on nothing more reaches the device, what the kernel had not written back is gone),
the server is killed (SIGKILL), and the file system is checked and mounted again, as after a power cut.

What survives depends on sync_interval: with ``always`` every acknowledged message is kept; with the default (two
minutes) what was acknowledged since the last sync is lost - here all of it, as the run is shorter than the kernel's
own writeback. The stream comes back and takes new messages.

Needs root and a loop device (as make test has on the project's machines)."""

import json
import os
import signal
import subprocess
import threading
import time

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import JetStream, NatsClient

from conftest import free_port
from test_failing_store import _version

SYNC_SINCE = (2, 10, 0)  # 2.9 takes no sync_interval


def _publish_until(url, stop, acked):
    """Publish one message after another until ``stop`` is set, each awaited; the acknowledged sequences go to
    ``acked``."""
    with NatsClient({"servers": [url], "timeout": 2.0}) as client:
        number = 0
        while not stop.is_set():
            number += 1
            try:
                reply = json.loads(client.request("t.reading", b"%d" % number, timeout=1.0).decode())
            except Exception:  # the cut: no acknowledgement, or the connection is gone
                return
            if "seq" in reply:
                acked.append(reply["seq"])


def _cut(server, trigger, mount, image):
    with open(trigger, "w") as handle:
        handle.write("power cut\n")
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(10)
    subprocess.run(["umount", str(mount)], capture_output=True, check=True)
    subprocess.run(["e2fsck", "-f", "-y", str(image)], capture_output=True, check=False)
    subprocess.run(["mount", "-o", "loop,errors=remount-ro", str(image), str(mount)], capture_output=True, check=True)


@pytest.mark.parametrize("sync", ["always", None])
def test_what_a_power_cut_keeps_of_the_acknowledged_messages(nats_binary, start_server, flash, sync):
    binary, version = nats_binary
    if sync and _version(version) < SYNC_SINCE:
        pytest.skip("nats-server %s takes no sync_interval" % version)
    mount, image, trigger = flash
    port, http = free_port(), free_port()
    url = "nats://127.0.0.1:%d" % port
    conf = 'listen: "127.0.0.1:%d"\nhttp: "127.0.0.1:%d"\njetstream { store_dir: "%s"%s }\n' % (
        port, http, mount / "js", ', sync_interval: "%s"' % sync if sync else "")
    server = start_server(binary, conf, "edge", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    with NatsClient({"servers": [url], "timeout": 2.0}) as client:
        JetStream(client).call("STREAM.CREATE.TELEMETRY", {"name": "TELEMETRY", "subjects": ["t.>"], "storage": "file"})
    os.sync()  # the stream itself is on the device, as a stream made long before the cut would be

    stop, acked = threading.Event(), []
    writer = threading.Thread(target=_publish_until, args=(url, stop, acked))
    writer.start()
    deadline = time.monotonic() + 20
    while len(acked) < 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    _cut(server, trigger, mount, image)
    stop.set()
    writer.join(10)
    assert len(acked) >= 200, len(acked)

    server = start_server(binary, conf, "edge-after", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    with NatsClient({"servers": [url], "timeout": 2.0}) as client:
        js = JetStream(client)
        state = js.call("STREAM.INFO.TELEMETRY")["state"]
        kept, lost = state["messages"], len(acked) - state["messages"]
        print("sync_interval %s: acknowledged %d, kept %d, lost %d" % (sync or "default", len(acked), kept, lost))
        if sync == "always":
            assert state["last_seq"] >= acked[-1] and lost <= 0, (state, len(acked))
        else:
            # nothing was synced since the stream was made: every acknowledged message is gone
            assert kept < len(acked), (state, len(acked))
        # the stream comes back and takes new messages
        reply = json.loads(client.request("t.reading", b"after").decode())
        assert reply["seq"] == state["last_seq"] + 1, reply
