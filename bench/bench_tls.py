"""TLS against plaintext on a hub cluster and an edge site, side by side in one run.

For each variant (tls: the collection's default, TLS on every listener and link; plaintext:
nats_server_insecure_plaintext: [all]) the configs come from the collection's config model
(``_server_config.build_config``, pruned for the server's version, rendered with ``render``) the way
the nats_server role builds them:

  hub      3 servers, cluster ``hub`` (mutual TLS and the route password), JetStream domain ``hub``,
           a leafnodes listener each
  spoke-1  1 server, JetStream domain ``spoke-1``, a leaf remote to the three hub leafnode ports,
           account APP on both sides; a small device (GOMEMLIMIT 256MiB, 512 MB of RAM for the profile)

Both variants authenticate the same way (static account APP, users ``app`` and ``leaf`` with passwords;
routes with the cluster password), so only TLS differs. Stream ``test`` (subjects test.>, R1) is created
at the spoke over $JS.spoke-1.API, stream ``aggregate`` (R3 by default) at the hub over $JS.hub.API,
sourcing ``test`` from domain spoke-1. Each round measures both variants in turn (the order alternates
from round to round), each on a fresh network that first takes --warmup untimed publishes:

  publish   acked JetStream publishes of N messages of 128 B at the spoke, at most --window
            outstanding (nats-py publish_async): msg/s
  catch-up  the 3 hub servers stopped, M messages published at the spoke, the hubs started again
            --outage seconds after they stopped (the same outage in both variants):
            time from the hubs' start until ``aggregate`` holds every message (drain time: the
            time the hub stored the last one, polled /jsz confirming), the leaf link's return, the
            hubs' health and the first copied message on the way; then every message in
            ``aggregate`` is read back and checked by its id (lost, duplicated)
  spoke     the spoke server's peak VmRSS (/proc/<pid>/status, sampled every 50 ms) and its CPU
            seconds (utime + stime, /proc/<pid>/stat) per 10k messages during each phase: publish from
            the first publish until ``aggregate`` holds them, catch-up from the hubs' stop
            until it holds all; the hubs' CPU and the publishing client's for context

and prints a table per round, then medians, the ratio TLS / plaintext of the medians and the ratios
of each round.

Usage: .venv/bin/python bench/bench_tls.py [--rounds 3] [--messages 20000] [--backlog 10000] [--outage 5]
                                          [--warmup 2000] [--window 256] [--replicas 3] [--server PATH]
                                          [--json FILE]
"""

import argparse
import asyncio
import json
import math
import logging
import os
import random
import secrets
import shutil
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import nats
from nats.js.api import AckPolicy, ConsumerConfig, ExternalStream, StorageType, StreamConfig, StreamSource

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, ".collections")
if not os.path.isdir(os.path.join(COLLECTIONS, "ansible_collections", "nats_edge", "fleet")):
    raise SystemExit("run `make venv` first: %s is missing" % COLLECTIONS)
sys.path.insert(0, COLLECTIONS)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _server_config as sc  # noqa: E402
from pki import CA  # noqa: E402

NATS_SERVER = os.path.join(os.path.dirname(sys.executable), "nats-server")
VARIANTS = ("tls", "plaintext")
HUBS = ("hub-1", "hub-2", "hub-3")
SPOKE = "spoke-1"
SUBJECTS = 16
PAYLOAD = 128
CLK_TCK = os.sysconf("SC_CLK_TCK")

# figure -> (label, unit, format); the order of the tables
FIGURES = [
    ("pub_rate", "publish", "msg/s", "%.0f"),
    ("pub_spoke_cpu", "spoke CPU, publish phase", "s/10k", "%.3f"),
    ("pub_spoke_rss", "spoke RSS peak, publish phase", "MiB", "%.1f"),
    ("pub_hubs_cpu", "hubs' CPU, publish phase", "s/10k", "%.3f"),
    ("pub_client_cpu", "client CPU, publish", "s/10k", "%.3f"),
    ("backlog_rate", "publish, hubs down", "msg/s", "%.0f"),
    ("link_s", "hubs' start -> leaf link up", "s", "%.2f"),
    ("healthy_s", "hubs' start -> all 3 hubs healthy", "s", "%.2f"),
    ("first_s", "hubs' start -> first message copied", "s", "%.2f"),
    ("drain_s", "drain time (hubs' start -> all)", "s", "%.2f"),
    ("drain_rate", "drain rate (backlog / drain time)", "msg/s", "%.0f"),
    ("copy_s", "copy time (first copied -> all)", "s", "%.3f"),
    ("copy_rate", "copy rate (first copied -> all)", "msg/s", "%.0f"),
    ("p2_spoke_cpu", "spoke CPU, catch-up phase", "s/10k", "%.3f"),
    ("p2_spoke_cpu_drain", "  of it while draining", "s/10k", "%.3f"),
    ("p2_spoke_rss", "spoke RSS peak, catch-up phase", "MiB", "%.1f"),
    ("drain_hubs_cpu", "hubs' CPU, start -> all", "s/10k", "%.3f"),
]
# the ratios the summary names first: what TLS costs
HEADLINE = [("pub_rate", "throughput"), ("drain_s", "drain time"), ("pub_spoke_rss", "RSS, publish"),
            ("p2_spoke_rss", "RSS, catch-up"), ("pub_spoke_cpu", "CPU per message, publish"),
            ("p2_spoke_cpu", "CPU per message, catch-up")]


# -- ports, processes, /proc -------------------------------------------------------------------------


_HANDED_OUT = set()


def free_port():
    """A loopback port below the kernel's ephemeral range (the hubs restart on theirs, and client
    connections take their local ports from that range), not handed out before in this run."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as handle:
            low = int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _attempt in range(500):
        port = random.randint(10000, max(10001, low - 1))
        if port in _HANDED_OUT:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    raise SystemExit("no free port found")


def proc_cpu(pid):
    """utime + stime of a process, seconds."""
    with open("/proc/%d/stat" % pid) as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / float(CLK_TCK)


def proc_status(pid, key):
    """A /proc/<pid>/status field in bytes (VmRSS, VmHWM)."""
    with open("/proc/%d/status" % pid) as handle:
        for line in handle:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


class Sampler(object):
    """The peak VmRSS of one process, sampled every 50 ms in a thread between start() and stop()."""

    def __init__(self, pid):
        self.pid, self.peak, self._stop, self._thread = pid, 0, threading.Event(), None

    def start(self):
        self.peak = proc_status(self.pid, "VmRSS")
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.wait(0.05):
            try:
                self.peak = max(self.peak, proc_status(self.pid, "VmRSS"))
            except OSError:
                return

    def stop(self):
        self._stop.set()
        self._thread.join(2)
        try:
            self.peak = max(self.peak, proc_status(self.pid, "VmRSS"))
        except OSError:
            pass
        return self.peak


class Server(object):
    """One nats-server: its rendered config, its environment (GOMEMLIMIT), its process."""

    def __init__(self, name, binary, workdir):
        self.name, self.binary, self.workdir = name, binary, workdir
        self.port, self.http = free_port(), free_port()
        self.cluster_port, self.leaf_port = free_port(), free_port()
        self.conf_path = os.path.join(workdir, "%s.conf" % name)
        self.env, self.proc, self.log = {}, None, None
        self.dropped = []

    def write(self, conf, profile):
        with open(self.conf_path, "w") as handle:
            handle.write(sc.render(conf, header="bench_tls.py: %s" % self.name))
        self.env = {"GOMEMLIMIT": profile["gomemlimit_env"]} if profile.get("gomemlimit_env") else {}

    def start(self):
        self.log = open(self.conf_path + ".log", "a")
        self.proc = subprocess.Popen([self.binary, "-c", self.conf_path], stdout=self.log, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, **self.env))

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        self.log.close()

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def cpu(self):
        return proc_cpu(self.proc.pid)

    def monitor(self, endpoint):
        with urllib.request.urlopen("http://127.0.0.1:%d/%s" % (self.http, endpoint), timeout=1) as reply:
            return json.loads(reply.read().decode())

    def tail(self):
        try:
            with open(self.conf_path + ".log") as handle:
                return handle.read()[-1500:]
        except OSError:
            return ""


# -- the network, from the collection's config model -----------------------------------------------


class Network(object):
    """The 3-node hub cluster and the spoke of one variant, in a directory of its own."""

    def __init__(self, variant, binary, version, ca, workdir):
        self.variant, self.workdir, self.ca = variant, workdir, ca
        self.hubs = [Server(name, binary, workdir) for name in HUBS]
        self.spoke = Server(SPOKE, binary, workdir)
        self.app_password = secrets.token_hex(16)
        leaf_password = secrets.token_hex(16)
        accounts = {"APP": {"jetstream": "enabled",
                            "users": [{"user": "app", "password": self.app_password},
                                      {"user": "leaf", "password": leaf_password}]}}
        common = {
            "groups": {"hub": list(HUBS), "spokes": [SPOKE]},
            "hostvars": dict((hub.name, {"nats_server_advertise_host": "127.0.0.1",
                                         "nats_server_cluster_port": hub.cluster_port,
                                         "nats_server_leafnodes_port": hub.leaf_port}) for hub in self.hubs),
            "config_dir": workdir, "listen_host": "127.0.0.1", "http_host": "127.0.0.1",
            "jetstream_enabled": True, "accounts": accounts,
            "tls_timeout": 5, "cluster_password": secrets.token_hex(20),
            "insecure_plaintext": ["all"] if variant == "plaintext" else [],
        }
        mounts = [{"mount": "/", "size_total": 64 * 1024 ** 3}]
        for hub in self.hubs:
            store = os.path.join(workdir, hub.name)
            profile = sc.resource_profile(2048, mounts, store, memory_limit="1GiB", max_memory_store="256MiB",
                                          max_file_store="4GiB")
            settings = dict(common, name=hub.name, inventory_hostname=hub.name, port=hub.port, http_port=hub.http,
                            cluster_group="hub", cluster_name="hub", cluster_port=hub.cluster_port,
                            leafnodes_port=hub.leaf_port, leafnodes_advertise="127.0.0.1",
                            jetstream_domain="hub", jetstream_store_dir=store, profile=profile,
                            **self._tls(hub.name))
            conf, hub.dropped = sc.prune_for_version(sc.build_config(settings), version)
            hub.write(conf, profile)
        store = os.path.join(workdir, SPOKE)
        profile = sc.resource_profile(512, mounts, store, memory_limit="256MiB", max_memory_store="64MiB",
                                      max_file_store="2GiB")
        remote = {"urls": ["nats-leaf://leaf:%s@127.0.0.1:%d" % (leaf_password, hub.leaf_port) for hub in self.hubs],
                  "account": "APP"}
        settings = dict(common, name=SPOKE, inventory_hostname=SPOKE, port=self.spoke.port,
                        http_port=self.spoke.http, jetstream_domain=SPOKE, jetstream_store_dir=store,
                        profile=profile, leafnode_remotes=[remote], **self._tls(SPOKE))
        conf, self.spoke.dropped = sc.prune_for_version(sc.build_config(settings), version)
        self.spoke.write(conf, profile)

    def _tls(self, name):
        """The host's certificate, key and CA, as site.yml issues them from the fleet CA."""
        cert, key = self.ca.issue(name, folder=self.workdir)
        return {"tls_cert_file": cert, "tls_key_file": key, "tls_ca_file": self.ca.path}

    # clients

    def client_options(self):
        options = {"user": "app", "password": self.app_password, "allow_reconnect": False, "connect_timeout": 5,
                   "error_cb": _quiet, "disconnected_cb": _quiet_event, "closed_cb": _quiet_event}
        if self.variant == "tls":
            options["tls"] = ssl.create_default_context(cafile=self.ca.path)
        return options

    def spoke_url(self):
        return ["nats://127.0.0.1:%d" % self.spoke.port]

    def hub_urls(self):
        return ["nats://127.0.0.1:%d" % hub.port for hub in self.hubs]

    # processes

    def start_hubs(self):
        for hub in self.hubs:
            hub.start()

    def stop_hubs(self):
        for hub in self.hubs:
            if hub.running():
                hub.proc.terminate()
        for hub in self.hubs:
            hub.stop()

    def stop(self):
        self.spoke.stop()
        self.stop_hubs()

    def check_alive(self):
        for server in self.hubs + [self.spoke]:
            if server.proc is not None and server.proc.poll() is not None:
                raise SystemExit("%s exited (rc %s): %s" % (server.name, server.proc.returncode, server.tail()))

    def wait_ready(self, timeout=60):
        """Every server healthy, the hubs' routes and the spoke's leaf link up."""
        deadline = time.monotonic() + timeout
        pending = list(self.hubs) + [self.spoke]
        while pending and time.monotonic() < deadline:
            self.check_alive()
            for server in list(pending):
                try:
                    if server.monitor("healthz").get("status") != "ok":
                        continue
                    # every peer routed (2.10+ pools several connections to one peer: count the peers)
                    peers = {r["remote_id"] for r in server.monitor("routez").get("routes") or []}
                    if server in self.hubs and len(peers) < len(self.hubs) - 1:
                        continue
                    if server is self.spoke and server.monitor("leafz")["leafnodes"] < 1:
                        continue
                    pending.remove(server)
                except (OSError, ValueError, KeyError):
                    pass
            time.sleep(0.05)
        if pending:
            raise SystemExit("%s: not ready in %ds: %s\n%s" % (self.variant, timeout, ", ".join(
                s.name for s in pending), pending[0].tail()))

    def aggregate_count(self):
        """The most messages any hub server holds in ``aggregate`` (/jsz), or None while none answers."""
        best = None
        for hub in self.hubs:
            try:
                jsz = hub.monitor("jsz?accounts=true&streams=true&acc=APP")
            except (OSError, ValueError):
                continue
            for account in jsz.get("account_details") or []:
                for stream in account.get("stream_detail") or []:
                    if stream.get("name") == "aggregate":
                        count = (stream.get("state") or {}).get("messages", 0)
                        best = count if best is None else max(best, count)
        return best

    def hubs_healthy(self):
        try:
            return all(hub.monitor("healthz").get("status") == "ok" for hub in self.hubs)
        except (OSError, ValueError):
            return False

    def links(self):
        """The compression and TLS of the spoke's leaf link and of the hubs' routes, as the servers report them."""
        found = {}
        try:
            leaf = self.spoke.monitor("leafz")["leafs"][0]
            found["leaf"] = "compression %s" % leaf.get("compression", "-")
            routes = self.hubs[0].monitor("routez")["routes"]
            found["routes"] = "%d, compression %s" % (len(routes), "/".join(sorted(set(
                str(route.get("compression", "-")) for route in routes))))
        except (OSError, ValueError, KeyError, IndexError):
            pass
        return found

    def leaf_links(self):
        try:
            return self.spoke.monitor("leafz")["leafnodes"]
        except (OSError, ValueError, KeyError):
            return 0


async def _quiet(_error):
    pass


async def _quiet_event():
    pass


# -- JetStream over nats-py -----------------------------------------------------------------------------


def payload(ident):
    return struct.pack(">Q", ident) + b"x" * (PAYLOAD - 8)


async def create_streams(net, replicas, timeout=60):
    """``test`` at the spoke over $JS.spoke-1.API, ``aggregate`` at the hub over $JS.hub.API sourcing it."""
    deadline = time.monotonic() + timeout
    spoke = await nats.connect(servers=net.spoke_url(), **net.client_options())
    hub = await nats.connect(servers=net.hub_urls(), **net.client_options())
    try:
        await spoke.jetstream(domain=SPOKE).add_stream(StreamConfig(
            name="test", subjects=["test.>"], storage=StorageType.FILE, num_replicas=1))
        aggregate = StreamConfig(name="aggregate", storage=StorageType.FILE, num_replicas=replicas,
                                 sources=[StreamSource(name="test", external=ExternalStream(api="$JS.%s.API" % SPOKE))])
        while True:  # the hub's meta leader may still be on its way
            try:
                await hub.jetstream(domain="hub", timeout=5).add_stream(aggregate)
                return
            except Exception as exc:  # noqa: BLE001 - retried until the deadline, then shown
                if time.monotonic() > deadline:
                    raise SystemExit("%s: cannot create stream aggregate at the hub: %r" % (net.variant, exc))
                await asyncio.sleep(0.5)
    finally:
        await spoke.close()
        await hub.close()


async def publish(net, first, count, window):
    """Acked publishes of ids first..first+count-1 at the spoke, at most ``window`` outstanding.
    Returns (seconds, the client's CPU s, errors)."""
    nc = await nats.connect(servers=net.spoke_url(), **net.client_options())
    try:
        js = nc.jetstream(domain=SPOKE, publish_async_max_pending=window)
        client0 = time.process_time()
        began = time.perf_counter()
        futures = []
        for ident in range(first, first + count):
            futures.append(await js.publish_async("test.site.%d" % (ident % SUBJECTS), payload(ident),
                                                  wait_stall=30))
        results = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True),
                                         timeout=max(60, count / 200.0))
        elapsed = time.perf_counter() - began
        client_cpu = time.process_time() - client0
    finally:
        await nc.close()
    errors = [r for r in results if isinstance(r, BaseException) or getattr(r, "stream", None) != "test"]
    return elapsed, client_cpu, errors


async def retried(make, what, net, timeout=60):
    """``await make()`` until it answers: right after a restart a JetStream request may time out or answer
    503 while leaders settle."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await make()
        except (asyncio.TimeoutError, nats.errors.Error) as exc:
            if time.monotonic() > deadline:
                raise SystemExit("%s: %s failed for %ds: %r" % (net.variant, what, timeout, exc))
            await asyncio.sleep(0.5)


async def stream_messages(net, urls, domain, name):
    nc = await nats.connect(servers=urls, **net.client_options())
    try:
        js = nc.jetstream(domain=domain, timeout=5)
        info = await retried(lambda: js.stream_info(name), "STREAM.INFO %s" % name, net)
        return info.state.messages
    finally:
        await nc.close()


async def read_back(net, expected):
    """The ``expected`` messages ``aggregate`` holds (STREAM.INFO's count) as (id, time the hub stored it),
    read through an ephemeral pull consumer at the hub."""
    nc = await nats.connect(servers=net.hub_urls(), **net.client_options())
    found, failures = [], 0
    try:
        js = nc.jetstream(domain="hub", timeout=5)
        sub = await retried(lambda: js.pull_subscribe("test.>", stream="aggregate", config=ConsumerConfig(
            ack_policy=AckPolicy.NONE, inactive_threshold=60.0)), "a consumer on aggregate", net)
        while len(found) < expected and failures <= 10:
            try:
                msgs = await sub.fetch(batch=min(2000, expected - len(found)), timeout=2)
            except (asyncio.TimeoutError, nats.js.errors.APIError):  # 503 while the consumer settles
                failures += 1
                await asyncio.sleep(0.2)
                continue
            found.extend((struct.unpack(">Q", msg.data[:8])[0], msg.metadata.timestamp.timestamp())
                         for msg in msgs)
        await sub.unsubscribe()
    finally:
        await nc.close()
    return found


# -- one variant, one round ----------------------------------------------------------------------------


def wait_until(predicate, timeout, what, net):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        net.check_alive()
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise SystemExit("%s: %s did not happen in %ds" % (net.variant, what, timeout))


def measure(net, options):
    n, m, w = options.messages, options.backlog, options.warmup
    total = w + n + m
    row = {"variant": net.variant}
    began = time.perf_counter()
    net.start_hubs()
    net.spoke.start()
    net.wait_ready()
    asyncio.run(create_streams(net, options.replicas))
    row["ready_s"] = time.perf_counter() - began
    row["links"] = net.links()
    # untimed: the first connections, the stream files, the sourcing under way
    if w:
        _elapsed, _client_cpu, errors = asyncio.run(publish(net, 0, w, options.window))
        if errors:
            raise SystemExit("%s: %d of %d warm-up publishes failed, the first: %r"
                             % (net.variant, len(errors), w, errors[0]))
        wait_until(lambda: net.aggregate_count() == w, 120, "aggregate holding the %d warm-up messages" % w, net)

    # 1. publish at the spoke, the hub sourcing as it goes; the phase's CPU and RSS until aggregate has them all
    sampler = Sampler(net.spoke.proc.pid).start()
    spoke0, hubs0 = net.spoke.cpu(), sum(hub.cpu() for hub in net.hubs)
    elapsed, client_cpu, errors = asyncio.run(publish(net, w, n, options.window))
    if errors:
        raise SystemExit("%s: %d of %d publishes failed, the first: %r" % (net.variant, len(errors), n, errors[0]))
    last_ack = time.time()
    wait_until(lambda: net.aggregate_count() == w + n, 120, "aggregate holding the first %d messages" % (w + n), net)
    spoke_cpu, hubs_cpu = net.spoke.cpu() - spoke0, sum(hub.cpu() for hub in net.hubs) - hubs0
    row["pub_spoke_rss"] = sampler.stop() / 2.0 ** 20
    row.update(pub_s=elapsed, pub_rate=n / elapsed, pub_spoke_cpu=spoke_cpu * 1e4 / n, pub_hubs_cpu=hubs_cpu * 1e4 / n,
               pub_client_cpu=client_cpu * 1e4 / n)

    # 2. the hubs go away, the spoke keeps taking messages, the hubs come back
    sampler = Sampler(net.spoke.proc.pid).start()
    spoke0 = net.spoke.cpu()
    net.stop_hubs()
    down = time.perf_counter()
    wait_until(lambda: net.leaf_links() == 0, 30, "the leaf link going down", net)
    elapsed, _client_cpu, errors = asyncio.run(publish(net, w + n, m, options.window))
    if errors:
        raise SystemExit("%s: %d of %d publishes with the hubs down failed, the first: %r"
                         % (net.variant, len(errors), m, errors[0]))
    row["backlog_rate"] = m / elapsed
    # the same outage in both variants: the spoke retries its remote every second from the moment the link
    # dropped, so the outage's length decides when, after the hubs' start, its next attempt comes
    time.sleep(max(0.0, options.outage - (time.perf_counter() - down)))
    row["outage_s"] = time.perf_counter() - down
    spoke_drain0 = net.spoke.cpu()
    started, started_wall = time.perf_counter(), time.time()
    net.start_hubs()
    link = healthy = first = done = None
    deadline = time.monotonic() + options.drain_timeout
    while time.monotonic() < deadline:
        net.check_alive()
        now = time.perf_counter()
        if link is None and net.leaf_links() >= 1:
            link = now
        if healthy is None and net.hubs_healthy():
            healthy = now
        count = net.aggregate_count()
        if count is not None:
            if first is None and count > w + n:
                first = now
            if count >= total:
                done = now
                break
        time.sleep(0.05)
    if done is None:
        raise SystemExit("%s: aggregate held %s of %d messages %ds after the hubs' start"
                         % (net.variant, net.aggregate_count(), total, options.drain_timeout))
    spoke_end = net.spoke.cpu()
    hubs_cpu = sum(hub.cpu() for hub in net.hubs)
    row["p2_spoke_rss"] = sampler.stop() / 2.0 ** 20
    link = link or done
    healthy = healthy or done
    row.update(link_s=link - started, healthy_s=healthy - started, seen_first_s=(first or done) - started,
               seen_all_s=done - started, p2_spoke_cpu=(spoke_end - spoke0) * 1e4 / m,
               p2_spoke_cpu_drain=(spoke_end - spoke_drain0) * 1e4 / m, drain_hubs_cpu=hubs_cpu * 1e4 / m,
               spoke_hwm=proc_status(net.spoke.proc.pid, "VmHWM") / 2.0 ** 20)

    # every message exactly once, in both streams
    time.sleep(1.0)
    expected = total
    row["test_messages"] = asyncio.run(stream_messages(net, net.spoke_url(), SPOKE, "test"))
    row["aggregate_messages"] = asyncio.run(stream_messages(net, net.hub_urls(), "hub", "aggregate"))
    found = asyncio.run(read_back(net, row["aggregate_messages"]))
    ids = [ident for ident, _stored in found]
    seen = set(ids)
    # when the hub stored them: the last of the first phase, the first and the last of the backlog
    stored = dict(found)
    backlog = [stored[i] for i in range(w + n, expected) if i in stored]
    nan = float("nan")
    row.update(sourced_after=nan, first_s=row["seen_first_s"], drain_s=row["seen_all_s"],
               drain_rate=m / row["seen_all_s"], copy_s=nan, copy_rate=nan)
    if backlog and w + n - 1 in stored:
        first_copy, last_copy = min(backlog), max(backlog)
        drain = last_copy - started_wall
        row.update(sourced_after=max(0.0, stored[w + n - 1] - last_ack), first_s=first_copy - started_wall,
                   drain_s=drain, drain_rate=m / drain, copy_s=last_copy - first_copy,
                   copy_rate=(len(backlog) - 1) / max(last_copy - first_copy, 1e-6))
    row["read_back"] = len(ids)
    row["lost"] = len(set(range(expected)) - seen)
    row["duplicated"] = len(ids) - len(seen)
    row["unknown"] = len(seen - set(range(expected)))
    return row


def run_variant(variant, round_, options, ca, version, base, started):
    workdir = tempfile.mkdtemp(prefix="%s-r%d-" % (variant, round_), dir=base)
    net = Network(variant, options.server, version, ca, workdir)
    started.append(net)
    try:
        row = measure(net, options)
    finally:
        net.stop()
        started.remove(net)
        shutil.rmtree(workdir, ignore_errors=True)
    row["round"] = round_
    row["dropped"] = sorted(set(net.spoke.dropped + [d for hub in net.hubs for d in hub.dropped]))
    return row


# -- reporting -----------------------------------------------------------------------------------------


def plain(value):
    """``value`` with NaN as None, for JSON."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return dict((k, plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def ratio(a, b):
    return a / b if b else float("nan")


def times(value):
    return "-" if math.isnan(value) else "%.2fx" % value


def print_round(round_, rows):
    by = dict((row["variant"], row) for row in rows)
    print("\nround %d (order: %s)" % (round_, ", ".join(row["variant"] for row in rows)))
    print("  %-42s %7s %12s %12s %9s" % ("", "unit", "tls", "plaintext", "tls/plain"))
    for key, label, unit, fmt in FIGURES:
        a, b = by["tls"][key], by["plaintext"][key]
        print("  %-42s %7s %12s %12s %9s" % (label, unit, fmt % a, fmt % b, times(ratio(a, b))))
    for variant in VARIANTS:
        row = by[variant]
        print("  %-9s ready in %.1f s; hubs down %.2f s; test %d, aggregate %d, read back %d: %d lost, %d duplicated, "
              "%d unknown; the hub stored the publish phase's last message %.2f s after its ack; spoke VmHWM %.1f MiB; "
              "leaf link %s, routes %s" % (
                  variant, row["ready_s"], row["outage_s"], row["test_messages"], row["aggregate_messages"],
                  row["read_back"], row["lost"], row["duplicated"], row["unknown"], row["sourced_after"],
                  row["spoke_hwm"],
                  row["links"].get("leaf", "?"), row["links"].get("routes", "?")))


def summarize(rows, rounds):
    summary = {"median": {}, "ratio_of_medians": {}, "ratios_per_round": {}, "median_of_ratios": {}}
    for key, _label, _unit, _fmt in FIGURES:
        med = dict((v, statistics.median(r[key] for r in rows if r["variant"] == v)) for v in VARIANTS)
        summary["median"][key] = med
        summary["ratio_of_medians"][key] = ratio(med["tls"], med["plaintext"])
        per_round = []
        for round_ in range(1, rounds + 1):
            by = dict((r["variant"], r) for r in rows if r["round"] == round_)
            per_round.append(ratio(by["tls"][key], by["plaintext"][key]))
        summary["ratios_per_round"][key] = per_round
        valid = [r for r in per_round if not math.isnan(r)]
        summary["median_of_ratios"][key] = statistics.median(valid) if valid else float("nan")
    return summary


def print_summary(summary, rows, options, version, seconds, loads):
    print("\nnats-server %s, %d rounds, %d + %d messages of %d B, window %d, aggregate R%d; %.0f s; load %s"
          % (version, options.rounds, options.messages, options.backlog, PAYLOAD, options.window, options.replicas,
             seconds, " -> ".join("%.2f" % load for load in loads)))
    print("  %-42s %7s %12s %12s %9s  %-16s %s" % ("median", "unit", "tls", "plaintext", "tls/plain",
                                                   "(median ratio)", "per round"))
    for key, label, unit, fmt in FIGURES:
        med = summary["median"][key]
        print("  %-42s %7s %12s %12s %9s  %-16s %s" % (
            label, unit, fmt % med["tls"], fmt % med["plaintext"], times(summary["ratio_of_medians"][key]),
            "(%s)" % times(summary["median_of_ratios"][key]),
            " ".join(times(r).rstrip("x") for r in summary["ratios_per_round"][key])))
    headline = ["%s %s (%s)" % (label, times(summary["ratio_of_medians"][key]), times(summary["median_of_ratios"][key]))
                for key, label in HEADLINE]
    print("TLS / plaintext, of the medians (median of the rounds' ratios): " + ", ".join(headline))
    expected = options.warmup + options.messages + options.backlog
    bad = [r for r in rows if r["lost"] or r["duplicated"] or r["unknown"] or r["test_messages"] != expected
           or r["aggregate_messages"] != expected or r["read_back"] != expected]
    longer = [r for r in rows if r["outage_s"] > options.outage + 0.5]
    if longer:
        print("the backlog outlasted --outage in %d runs (up to %.2f s): the outages differ"
              % (len(longer), max(r["outage_s"] for r in longer)))
    print("every round: %s" % ("0 lost, 0 duplicated in both streams" if not bad
                               else "%d runs with lost or duplicated messages" % len(bad)))
    dropped = sorted(set(d for r in rows for d in r["dropped"]))
    if dropped:
        print("left out of the configs for this version: %s" % ", ".join(dropped))
    return not bad


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--server", default=NATS_SERVER, help="nats-server binary (default: the virtualenv's)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=20000, help="acked publishes in the publish phase")
    parser.add_argument("--warmup", type=int, default=2000,
                        help="untimed publishes on each fresh network before the publish phase")
    parser.add_argument("--backlog", type=int, default=10000, help="messages published while the hubs are down")
    parser.add_argument("--window", type=int, default=256, help="outstanding publishes at most")
    parser.add_argument("--replicas", type=int, default=3, choices=(1, 3), help="replicas of aggregate")
    parser.add_argument("--outage", type=float, default=5.0,
                        help="seconds the hubs stay down (at least; longer if the backlog takes longer)")
    parser.add_argument("--drain-timeout", type=int, default=120, help="seconds the catch-up may take")
    parser.add_argument("--json", metavar="FILE", help="write the rows and the summary here")
    options = parser.parse_args()
    # nats-py closing a TLS connection: asyncio's "returning true from eof_received() has no effect"
    logging.getLogger("asyncio").setLevel(logging.ERROR)
    if options.rounds < 1 or options.messages < 1 or options.backlog < 1 or options.window < 1 or options.warmup < 0:
        parser.error("--rounds, --messages, --backlog and --window must be positive")
    version_text = subprocess.run([options.server, "--version"], capture_output=True, text=True,
                                  check=True).stdout.strip()
    version = ".".join(str(part) for part in sc.parse_version(version_text))
    loads = [os.getloadavg()[0]]
    began = time.perf_counter()
    base = tempfile.mkdtemp(prefix="bench-tls-")
    started, rows = [], []
    try:
        ca = CA(base)
        for round_ in range(1, options.rounds + 1):
            order = VARIANTS if round_ % 2 else tuple(reversed(VARIANTS))
            done = [run_variant(variant, round_, options, ca, version, base, started) for variant in order]
            rows.extend(done)
            print_round(round_, done)
            sys.stdout.flush()
    finally:
        for net in started:
            net.stop()
        shutil.rmtree(base, ignore_errors=True)
    seconds = time.perf_counter() - began
    loads.append(os.getloadavg()[0])
    summary = summarize(rows, options.rounds)
    ok = print_summary(summary, rows, options, version, seconds, loads)
    if options.json:
        with open(options.json, "w") as handle:
            json.dump(plain({"server": options.server, "version": version, "cores": os.cpu_count(),
                             "seconds": seconds, "load": loads, "options": vars(options), "payload": PAYLOAD,
                             "rows": rows, "summary": summary}), handle, indent=1, sort_keys=True, allow_nan=False)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
