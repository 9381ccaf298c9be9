"""The fleet collector's cost (monitoring/, nats_edge_monitor) at 10, 30 and 100 sites.

Per size, starts on loopback a hub server (JetStream domain hub, client port on TLS with a CA made for the run,
a stream ``orders`` with a consumer) and one leaf server per site (domain site-N, a stream ``readings`` with a
consumer), each joining the hub through a leaf link that binds the system account and one for APP (accounts in
the server configs). Then, in a fresh Python process each:

  collector   the exporter's registry (collect.py + metrics.py, the config a fleet would have): a collection of
              VARZ, JSZ, LEAFZ and HEALTHZ from every server through the system account, turned into the
              Prometheus text, per scrape
  ping        reference: the bare $SYS.REQ.SERVER.PING fan-out, gathered from every server over the same kind of
              connection, per scrape

Both wait until every server answered (``expected``), not for a timeout. Reported per process: median and p90
ms per scrape, CPU seconds per scrape (user + system of that process), peak RSS, and for the collector the
series per site (samples carrying a spoke's site label; the hub's count apart) and the ratios to the reference.

Usage: .venv/bin/python bench/bench_monitor.py [--sites 10,30,100] [--scrapes 20] [--server BINARY]
"""

import argparse
import asyncio
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NATS_SERVER = os.path.join(os.path.dirname(sys.executable), "nats-server")
PASSWORD = "bench-only"


def free_ports(count):
    import socket

    sockets, ports = [], []
    for _number in range(count):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        sockets.append(s)
        ports.append(s.getsockname()[1])
    for s in sockets:
        s.close()
    return ports


ACCOUNTS = ('accounts { SYS: { users: [ { user: sys, password: "%s" } ] }, '
            'APP: { jetstream: enabled, users: [ { user: app, password: "%s" } ] } }\nsystem_account: SYS\n'
            % (PASSWORD, PASSWORD))


def server_conf(name, domain, port, http, store, tls=None, leaf_listen=None, hub_leaf=None, max_file=67108864):
    lines = ['server_name: "%s"' % name, 'listen: "127.0.0.1:%d"' % port, 'http: "127.0.0.1:%d"' % http,
             'jetstream { store_dir: "%s", domain: "%s", max_memory_store: 16777216, max_file_store: %d }'
             % (store, domain, max_file), ACCOUNTS]
    if tls:
        lines.append('tls { cert_file: "%s", key_file: "%s" }' % tls)
    if leaf_listen:
        lines.append('leafnodes { listen: "127.0.0.1:%d" }' % leaf_listen)
    if hub_leaf:
        lines.append('leafnodes { reconnect: 1, remotes: [ '
                     '{ urls: ["nats-leaf://sys:%s@127.0.0.1:%d"], account: SYS }, '
                     '{ urls: ["nats-leaf://app:%s@127.0.0.1:%d"], account: APP } ] }'
                     % (PASSWORD, hub_leaf, PASSWORD, hub_leaf))
    return "\n".join(lines) + "\n"


async def connect(url, ca=None):
    """A connection of the user app (no reconnects), over TLS verified against ``ca`` where one is given."""
    import ssl

    import nats

    options = dict(user="app", password=PASSWORD, allow_reconnect=False, connect_timeout=10)
    if ca:
        options["tls"] = ssl.create_default_context(cafile=ca)
    return await nats.connect(url, **options)


def stop_processes(procs, grace=10):
    """Terminate every (process, log) of ``procs``, then wait for each (killed after ``grace`` s) and close its log."""
    for proc, _log in procs:
        proc.terminate()
    for proc, log in procs:
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


class Fleet(object):
    def __init__(self, binary, sites, workdir, max_file=67108864):
        sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
        from pki import CA  # pylint: disable=import-outside-toplevel

        self.binary, self.sites, self.workdir, self.procs, self.max_file = binary, sites, workdir, [], max_file
        self.ca = CA(workdir)
        self.hub_tls = self.ca.issue("hub-1", usages=("server",))
        ports = free_ports(3 + 2 * sites)
        self.hub_port, self.hub_http, self.leaf_port = ports[:3]
        self.edges = [("site%d-1" % n, "site-%d" % n, ports[3 + 2 * (n - 1)], ports[4 + 2 * (n - 1)])
                      for n in range(1, sites + 1)]

    def start(self):
        self._spawn("hub-1", server_conf("hub-1", "hub", self.hub_port, self.hub_http,
                                         os.path.join(self.workdir, "hub-1"), tls=self.hub_tls,
                                         leaf_listen=self.leaf_port, max_file=self.max_file))
        self._wait(lambda: self._get(self.hub_http, "healthz").get("status") == "ok", 30)
        for name, domain, port, http in self.edges:
            self._spawn(name, server_conf(name, domain, port, http, os.path.join(self.workdir, name),
                                          hub_leaf=self.leaf_port, max_file=self.max_file))
        # every edge linked for both accounts (under a start of 100 servers on 2 cores an edge may connect twice:
        # the hub then lists the stale connection too until it times out)
        want = set(name for name, _domain, _port, _http in self.edges)
        self._wait(lambda: all(set(self._linked(account)) >= want for account in ("SYS", "APP")), 180)
        for _name, _domain, _port, http in self.edges:
            self._wait(lambda http=http: self._get(http, "healthz").get("status") == "ok", 60)

    def _spawn(self, name, conf):
        path = os.path.join(self.workdir, name + ".conf")
        with open(path, "w") as handle:
            handle.write(conf)
        log = open(path + ".log", "w")
        self.procs.append((subprocess.Popen([self.binary, "-c", path], stdout=log, stderr=subprocess.STDOUT), log))

    def _linked(self, account):
        return [leaf.get("name") for leaf in self._get(self.hub_http, "leafz").get("leafs") or []
                if leaf.get("account") == account]

    @staticmethod
    def _get(http, endpoint):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/%s" % (http, endpoint), timeout=2) as reply:
                return json.loads(reply.read().decode())
        except (OSError, ValueError):
            return {}

    @staticmethod
    def _wait(predicate, timeout):
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise SystemExit("the fleet did not come up in %ss" % timeout)
            time.sleep(0.1)

    async def _streams_at(self, url, stream, ca=None):
        nc = await connect(url, ca)
        try:
            body = {"name": stream, "subjects": [stream + ".>"], "storage": "file", "max_msgs": 1000}
            await nc.request("$JS.API.STREAM.CREATE." + stream, json.dumps(body).encode(), timeout=10)
            for number in range(10):
                await nc.request(stream + ".x", b"reading %d" % number, timeout=10)
            consumer = {"stream_name": stream, "config": {"durable_name": "worker", "ack_policy": "explicit"}}
            await nc.request("$JS.API.CONSUMER.DURABLE.CREATE.%s.worker" % stream, json.dumps(consumer).encode(),
                             timeout=10)
        finally:
            await nc.close()

    async def at_each_site(self, work):
        """``await work(domain, client port)`` for every site, 20 at a time: {domain: what it returned}."""
        results = {}
        for start in range(0, len(self.edges), 20):
            batch = self.edges[start:start + 20]
            answers = await asyncio.gather(*[work(domain, port) for _name, domain, port, _http in batch])
            results.update(zip([domain for _name, domain, _port, _http in batch], answers))
        return results

    def streams(self):
        async def everywhere():
            await self._streams_at("tls://127.0.0.1:%d" % self.hub_port, "orders", self.ca.path)
            await self.at_each_site(lambda _domain, port: self._streams_at("nats://127.0.0.1:%d" % port, "readings"))
        asyncio.run(everywhere())

    def exporter_config(self):
        return {
            "listen": {"address": "127.0.0.1", "port": 0, "plaintext": True},
            "nats": {"servers": ["tls://sys:%s@127.0.0.1:%d" % (PASSWORD, self.hub_port)], "ca": self.ca.path,
                     "timeout": 5.0},
            "servers": [{"server": "hub-1", "site": "hub"}] + [
                {"server": name, "site": domain} for name, domain, _port, _http in self.edges],
            "collector_site": "hub",
            "leaf_links": [{"server": name, "site": domain, "account": account}
                           for name, domain, _port, _http in self.edges for account in ("SYS", "APP")],
            "accounts": {},
            "thresholds": dict(("%s/APP/readings" % domain, {"max_age_seconds": 600})
                               for _name, domain, _port, _http in self.edges),
        }

    def stop(self):
        stop_processes(self.procs)


# -- the measured process ----------------------------------------------------------------------------


def _cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def worker(mode, config_path, scrapes):
    """One process: a kept connection, a warm-up scrape, then ``scrapes`` timed ones; JSON on stdout."""
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from nats_edge_monitor import collect
    from nats_edge_monitor._config import load_config
    from nats_edge_monitor.exporter import build

    config = load_config(config_path)
    expected = set(entry["server"] for entry in config["servers"])
    if mode == "collector":
        registry, collector = build(config)

        def scrape():
            return generate_latest(registry).decode()
    else:
        collector = collect.Collector(config["nats"], expected)

        async def ping():
            nc = await collector.connection()
            return await collect.ping_fanout(nc, expected, config["nats"]["timeout"])

        def scrape():
            return collector.run(ping(), 30)
    last = scrape()
    times, answered = [], []
    cpu = _cpu()
    for _number in range(scrapes):
        began = time.perf_counter()
        last = scrape()
        times.append(time.perf_counter() - began)
        if mode == "ping":
            answered.append(len(last))
    cpu = _cpu() - cpu
    out = {"times": times, "cpu": cpu / scrapes, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}
    if mode == "collector":
        per_site, total = {}, 0
        for family in text_string_to_metric_families(last):
            for sample in family.samples:
                total += 1
                site = sample.labels.get("site")
                if site:
                    per_site[site] = per_site.get(site, 0) + 1
                if sample.name == "nats_fleet_servers_answered":
                    answered.append(int(sample.value))
        out.update(series=total, per_site=per_site)
    out["answered"] = answered
    collector.close()
    print(json.dumps(out))


def measure(mode, config_path, scrapes):
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", mode, "--config", config_path,
                           "--scrapes", str(scrapes)], capture_output=True, text=True, timeout=900, check=False)
    if proc.returncode != 0:
        raise SystemExit("%s worker failed: %s" % (mode, proc.stderr[-3000:]))
    return json.loads(proc.stdout.strip().splitlines()[-1])


def p90(values):
    ordered = sorted(values)
    return ordered[max(0, int(round(0.9 * len(ordered))) - 1)]


def run(binary, sites, scrapes):
    workdir = tempfile.mkdtemp(prefix="bench-monitor-")
    fleet = Fleet(binary, sites, workdir)
    try:
        began = time.perf_counter()
        fleet.start()
        fleet.streams()
        ready = time.perf_counter() - began
        config_path = os.path.join(workdir, "exporter.json")
        with open(config_path, "w") as handle:
            json.dump(fleet.exporter_config(), handle)
        collected = measure("collector", config_path, scrapes)
        pinged = measure("ping", config_path, scrapes)
    finally:
        fleet.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    spokes = [count for site, count in collected["per_site"].items() if site != "hub"]
    row = {
        "sites": sites, "servers": sites + 1, "ready_s": ready,
        "ms": statistics.median(collected["times"]) * 1000, "p90": p90(collected["times"]) * 1000,
        "cpu": collected["cpu"], "rss": collected["rss_mb"],
        "ping_ms": statistics.median(pinged["times"]) * 1000, "ping_p90": p90(pinged["times"]) * 1000,
        "ping_cpu": pinged["cpu"], "ping_rss": pinged["rss_mb"],
        "per_site": statistics.median(spokes) if spokes else 0, "hub_series": collected["per_site"].get("hub", 0),
        "series": collected["series"],
        "answered": "%d-%d" % (min(collected["answered"]), max(collected["answered"])),
        "ping_answered": "%d-%d" % (min(pinged["answered"]), max(pinged["answered"])),
    }
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--server", default=NATS_SERVER, help="nats-server binary (default: the venv's)")
    parser.add_argument("--sites", default="10,30,100")
    parser.add_argument("--scrapes", type=int, default=20)
    parser.add_argument("--worker", choices=["collector", "ping"], help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.config, args.scrapes)
        return
    version = subprocess.run([args.server, "--version"], capture_output=True, text=True,
                             check=True).stdout.strip().rsplit("v", 1)[-1]
    rows = []
    for sites in [int(value) for value in args.sites.split(",")]:
        row = run(args.server, sites, args.scrapes)
        print("%d sites: fleet ready in %.1f s, collector %.1f ms, ping %.1f ms" % (
            sites, row["ready_s"], row["ms"], row["ping_ms"]), file=sys.stderr)
        rows.append(row)
    print("\nnats-server %s, %d scrapes per size after one warm-up, every server expected (no timeout waited)"
          % (version, args.scrapes))
    header = ("sites", "servers", "ms/scrape", "p90", "CPU s/scrape", "RSS MB", "ping ms", "ping p90",
              "ping CPU s", "ping RSS MB", "ms ratio", "CPU ratio", "series/site", "hub series", "series",
              "answered", "ping answered")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    line = "| %d | %d | %.1f | %.1f | %.4f | %.0f | %.1f | %.1f | %.4f | %.0f | %.1f | %.1f | %d | %d | %d | %s | %s |"
    for row in rows:
        cpu_ratio = row["cpu"] / row["ping_cpu"] if row["ping_cpu"] else float("nan")
        print(line % (row["sites"], row["servers"], row["ms"], row["p90"], row["cpu"], row["rss"], row["ping_ms"],
                      row["ping_p90"], row["ping_cpu"], row["ping_rss"], row["ms"] / row["ping_ms"], cpu_ratio,
                      row["per_site"], row["hub_series"], row["series"], row["answered"], row["ping_answered"]))


if __name__ == "__main__":
    main()
