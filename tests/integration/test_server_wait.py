"""nats_server_wait against real nats-servers: one module run waits on the host until a gate passes (a server that
starts late, a reload), and fails naming the server and what kept it from passing."""

import os
import signal
import threading
import time

from ansible_collections.nats_edge.fleet.plugins.module_utils._units import epoch_seconds
from conftest import _js_conf, free_port


def _late(start_server, binary, tmp_path, delay):
    """A JetStream server started ``delay`` seconds from now, in a thread; returns (http port, thread)."""
    port, http = free_port(), free_port()
    text = _js_conf("late", port, http, str(tmp_path / "late"), "late")
    started = threading.Timer(delay, start_server, (binary, text, "late", http))
    started.start()
    return http, started


def test_one_run_waits_for_a_server_that_starts_late(nats_binary, start_server, module, tmp_path):
    binary, _version = nats_binary
    http, started = _late(start_server, binary, tmp_path, 3)
    try:
        result = module("nats_server_wait", {"url": "http://127.0.0.1:%d" % http, "endpoint": "healthz",
                                             "name": "late", "timeout": 30, "interval": 0.5})
    finally:
        started.join()
    assert not result.get("failed") and not result["changed"], result
    assert result["json"] == {"status": "ok"} and result["problems"] == []
    # it tried while nothing listened, and went on in the same run
    assert result["attempts"] >= 3 and 2.5 <= result["waited"] < 30, result


def test_a_server_that_never_passes_fails_the_task_naming_it_and_why(nats_binary, start_server, module, tmp_path):
    binary, version = nats_binary
    dead = free_port()
    result = module("nats_server_wait", {"url": "http://127.0.0.1:%d" % dead, "endpoint": "healthz", "name": "edge-7",
                                         "timeout": 2, "interval": 0.5})
    assert result.get("failed") and not result["changed"], result
    assert result["msg"].startswith("edge-7 did not pass within 2s (") and "edge-7: not healthy (no answer)" in result["msg"]
    assert "refused" in result["msg"].lower() and result["json"] is None and result["attempts"] > 1, result

    port, http = free_port(), free_port()
    server = start_server(binary, 'listen: "127.0.0.1:%d"\nhttp: "127.0.0.1:%d"\n' % (port, http), "n1", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    result = module("nats_server_wait", {"url": "http://127.0.0.1:%d" % http, "endpoint": "varz", "name": "n1",
                                         "version": "0.0.1", "timeout": 0})
    assert result.get("failed") and result["attempts"] == 1, result
    assert result["problems"] == ["n1: runs %s, not 0.0.1" % version] and result["json"]["version"] == version


def test_the_wait_for_a_reload_passes_once_the_server_has_loaded_its_config_again(
        nats_binary, start_server, module, tmp_path):
    binary, _version = nats_binary
    port, http = free_port(), free_port()
    server = start_server(binary, 'listen: "127.0.0.1:%d"\nhttp: "127.0.0.1:%d"\n' % (port, http), "n1", http)
    server.wait(lambda: server.get("healthz")["status"] == "ok")
    sent = time.time()
    url = "http://127.0.0.1:%d" % http
    before = module("nats_server_wait", {"url": url, "endpoint": "varz", "loaded_after": sent, "timeout": 0})
    assert before.get("failed") and "still runs the config it loaded at" in before["msg"], before
    # the reload comes while the wait runs (or, on a loaded machine, before its first look: then one attempt)
    hup = []
    threading.Timer(1.5, lambda: (hup.append(time.time()), os.kill(server.proc.pid, signal.SIGHUP))).start()
    after = module("nats_server_wait", {"url": url, "endpoint": "varz", "loaded_after": sent, "timeout": 20,
                                        "interval": 0.25})
    assert not after.get("failed") and after["problems"] == [], after
    loaded = after["json"]["config_load_time"]
    assert hup and epoch_seconds(loaded) > hup[0] - 1, (loaded, hup)  # the signal's load, not an earlier one


def test_check_mode_checks_the_options_and_skips_the_wait(module):
    """What a wait follows (a start, a reload, a rollout step) check mode does not make: waiting for it would fail
    a run that only predicts. The options are still checked."""
    dead = "http://127.0.0.1:%d" % free_port()
    result = module("nats_server_wait", {"url": dead, "endpoint": "varz", "loaded_after": time.time(), "name": "hub1",
                                         "timeout": 30}, check_mode=True)
    assert result.get("skipped") and not result.get("failed") and not result["changed"], result
    assert "attempts" not in result and "hub1" in result["msg"], result
    bad = module("nats_server_wait", {"url": dead, "endpoint": "healthz", "loaded_after": 1.0}, check_mode=True)
    assert bad.get("failed") and "loaded_after" in bad["msg"], bad
