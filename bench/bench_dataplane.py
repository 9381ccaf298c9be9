"""The data plane at 10, 30 and 100 sites: edge publish -> edge stream -> hub source -> Spark job -> Parquet.

Per size N, starts on loopback a hub server (JetStream domain hub, client port on TLS with a CA made for the run)
and N single-node sites (domain site-N), each a leaf of the hub (as bench_monitor.py does), and a Spark standalone
cluster (a master and a worker from pyspark's own jars, as the spark_cluster role runs them; --master local[2]
runs the job without one). Every site gets a stream ``telemetry-site-N``; the hub gets the streams
nats_fleet_aggregates makes (``_aggregates.streams``: one stream sourcing every site, or --regions R regional
streams and their total), and the collection's Spark job (``jetstream-aggregate``, streaming) reads the
hub's stream into Parquet (trigger_interval --trigger): the one stream or the total, or with --read regions the
regional streams side by side (and no total is made). Then:

  warm-up     every site publishes for --warmup seconds (the job's first micro-batches are not its steady state)
  steady      every site publishes --rate messages a second (JSON telemetry, each awaited until its site's stream
              acknowledged it) for --seconds; once the Parquet output holds all of them, each message's latency is
              the time from its publish (its own timestamp) to the micro-batch that wrote it into Parquet (the job's
              _state.json, polled every 20 ms, against the message's sequence in the hub's stream it was read from)
  cut         every site's leaf link for the data account is removed (a config reload of each site); the sites
              keep publishing at the same rate for --cut minutes, then the links come back (reload) and the run
              counts the backlog, the time until the hub's streams and then the Parquet output hold it, and the rate
  counts      per site: acknowledged at the edge, in the site's stream, in the hub's stream (per subject), and in
              Parquet (the aggregates' count): each exactly the same, so nothing was lost and nothing counted twice
  reference   measured on the same servers after the run: a bare hub stream sourcing every site's stream with
              nothing of this collection's making, until it holds every message (nats-server's own copying rate)

CPU: user + system seconds of each process tree (/proc), during the steady phase, per site: the site servers'
(mean), the hub server's and the Spark processes' (master, worker with its executor, the job's driver) divided by N.

Usage: .venv/bin/python bench/bench_dataplane.py [--sites 10,30,100] [--rate 20] [--seconds 60] [--cut 1]
           [--regions 1] [--read total|regions] [--master standalone|local[2]|spark://...] [--server BINARY]
"""

import argparse
import asyncio
import bisect
import calendar
import json
import logging
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from bench_fleet import busy_cpu_seconds
from bench_monitor import NATS_SERVER, PASSWORD, Fleet, connect, free_ports, stop_processes
from bench_regions import layout, site_consumers

SPARK_CLASS = os.path.join(os.path.dirname(sys.executable), "spark-class")
JOB = os.path.join(os.path.dirname(sys.executable), "jetstream-aggregate")
METRICS = ("temperature", "humidity", "pressure", "voltage")


# -- processes and their CPU ---------------------------------------------------------------------------------------


def _stat(pid):
    with open("/proc/%d/stat" % pid) as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    # fields[1] is the parent; 11..14 utime, stime, cutime, cstime
    return int(fields[1]), sum(int(value) for value in fields[11:15])


def tree_cpu(pids):
    """CPU seconds of the processes ``pids`` and every live descendant, with what their reaped children used."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                table[int(entry)] = _stat(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    wanted, total, changed = set(pids), 0, True
    while changed:
        changed = False
        for pid, (parent, _ticks) in table.items():
            if parent in wanted and pid not in wanted:
                wanted.add(pid)
                changed = True
    for pid in wanted:
        total += table.get(pid, (0, 0))[1]
    return total / os.sysconf("SC_CLK_TCK")


def own_cpu():
    """CPU seconds of this process (the publishers), without its children (the servers, Spark)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _get_json(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return json.loads(reply.read().decode())
    except (OSError, ValueError):
        return {}


def wait(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit("%s: not within %d s" % (what, timeout))
        time.sleep(0.1)


class SparkCluster(object):
    """A standalone master and one worker on loopback, started from pyspark's jars (spark-class)."""

    def __init__(self, workdir, cores, memory):
        self.workdir, self.cores, self.memory, self.procs = workdir, cores, memory, []
        self.port, self.ui, self.worker_ui = free_ports(3)
        self.url = "spark://127.0.0.1:%d" % self.port

    def start(self):
        env = dict(os.environ, SPARK_LOG_DIR=self.workdir, SPARK_LOCAL_IP="127.0.0.1")
        self._spawn("master", [SPARK_CLASS, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(self.port), "--webui-port", str(self.ui)], env)
        work = os.path.join(self.workdir, "work")
        os.makedirs(work, exist_ok=True)
        self._spawn("worker", [SPARK_CLASS, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                               "--webui-port", str(self.worker_ui), "--work-dir", work, "--cores", str(self.cores),
                               "--memory", self.memory, self.url], env)
        wait(lambda: _get_json("http://127.0.0.1:%d/json/" % self.ui).get("aliveworkers", 0) >= 1, 120,
             "the Spark worker registering with the master")

    def _spawn(self, name, command, env):
        log = open(os.path.join(self.workdir, name + ".log"), "w")
        self.procs.append((subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env), log))

    def pids(self):
        return [proc.pid for proc, _log in self.procs]

    def stop(self):
        stop_processes(self.procs, grace=20)


# -- the fleet's streams -----------------------------------------------------------------------------------------


async def api(nc, subject, body=None):
    reply = json.loads((await nc.request("$JS.API." + subject, json.dumps(body or {}).encode() if body is not None
                                         else b"", timeout=10)).data)
    if "error" in reply:
        raise SystemExit("%s: %s" % (subject, reply["error"]))
    return reply


async def at_site(port, subject, body=None):
    """The answer of a site's JetStream API to one request."""
    nc = await connect("nats://127.0.0.1:%d" % port)
    try:
        return await api(nc, subject, body)
    finally:
        await nc.close()


async def hub_counts(fleet, streams):
    """Messages per site (from the subjects) in the hub's ``streams``."""
    nc = await connect("tls://127.0.0.1:%d" % fleet.hub_port, fleet.ca.path)
    per_site = {}
    try:
        for stream in streams:
            await _count_subjects(nc, stream, per_site)
        return per_site
    finally:
        await nc.close()


async def _count_subjects(nc, stream, per_site):
    offset = 0
    while True:
        info = await api(nc, "STREAM.INFO." + stream, {"subjects_filter": ">", "offset": offset})
        subjects = info["state"].get("subjects") or {}
        for subject, count in subjects.items():
            site = subject.split(".")[1]
            per_site[site] = per_site.get(site, 0) + count
        offset += len(subjects)
        if not subjects or offset >= info["state"].get("num_subjects", 0):
            return


async def catch_up(fleet, streams, job, before, total, restored, timeout):
    """Seconds from ``restored`` until the hub's ``streams`` grew past ``before`` messages (their sources resumed),
    until they held ``total``, and until the job's Parquet output held ``total``."""
    nc = await connect("tls://127.0.0.1:%d" % fleet.hub_port, fleet.ca.path)
    resumed = sourced = None
    try:
        while True:
            now = time.monotonic() - restored
            if sourced is None:
                held = 0
                for stream in streams:
                    held += (await api(nc, "STREAM.INFO." + stream))["state"]["messages"]
                if resumed is None and held > before:
                    resumed = now
                if held >= total:
                    sourced = now
            if sourced is not None and job.messages() >= total:
                return resumed, sourced, now
            if now > timeout:
                raise SystemExit("%d of %d messages in Parquet %d s after the links came back"
                                 % (job.messages(), total, timeout))
            await asyncio.sleep(0.02)
    finally:
        await nc.close()


# -- publishing ---------------------------------------------------------------------------------------------------


async def publish(fleet, rate, seconds, acked, errors):
    """Every site publishes ``rate`` messages a second for ``seconds``, each awaited until acknowledged."""
    conns = []
    try:
        for _name, domain, port, _http in fleet.edges:
            conns.append((domain, await connect("nats://127.0.0.1:%d" % port)))
        began = time.monotonic() + 0.5

        async def one(index, domain, nc):
            js = nc.jetstream()
            number = 0
            start = began + index / float(rate * len(conns))  # spread the sites' publishes over the interval
            while True:
                due = start + number / float(rate)
                if due - began >= seconds:
                    return
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                metric = METRICS[number % len(METRICS)]
                now = time.time()
                body = json.dumps({"site": domain, "metric": metric, "value": (number % 500) * 0.1,
                                   "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) +
                                   ".%06dZ" % int((now % 1) * 1e6)}).encode()
                try:
                    await js.publish("tel.%s.%s" % (domain, metric), body, timeout=10)
                    acked[domain] = acked.get(domain, 0) + 1
                except Exception as exc:  # counted, the run goes on: publishers see what they see
                    errors.append("%s: %s" % (domain, exc))
                number += 1
        await asyncio.gather(*[one(index, domain, nc) for index, (domain, nc) in enumerate(conns)])
    finally:
        for _domain, nc in conns:
            await nc.close()


def publish_time(body):
    """The epoch seconds a message was published at (its UTC timestamp, written by publish())."""
    text = json.loads(body)["timestamp"]
    return calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")) + float("0" + text[19:-1])


# -- the job ----------------------------------------------------------------------------------------------------------


class Job(object):
    """The collection's Spark job (jetstream-aggregate) on the hub's streams, and a watch on its state file."""

    def __init__(self, workdir, fleet, streams, master, trigger):
        self.output = os.path.join(workdir, "output")
        self.config = os.path.join(workdir, "job.json")
        self.log_path = os.path.join(workdir, "job.log")
        self.progress = []  # (epoch seconds, totals.messages, totals.streams: each stream's last sequence), in order
        self._stop = threading.Event()
        config = {"mode": "streaming", "trigger_interval": "%ds" % trigger, "window": "1m", "output": self.output,
                  "checkpoint": os.path.join(workdir, "checkpoint"),
                  "source": {"servers": "tls://127.0.0.1:%d" % fleet.hub_port, "stream": streams, "user": "app",
                             "password": PASSWORD, "tls_ca": fleet.ca.path},
                  "spark": {"master": master, "app_name": "bench-dataplane",
                            "conf": {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                                     "spark.ui.enabled": "false", "spark.executor.memory": "1g",
                                     "spark.pyspark.python": sys.executable}}}
        with open(self.config, "w") as handle:
            json.dump(config, handle)
        os.chmod(self.config, 0o600)

    def start(self):
        self.log = open(self.log_path, "w")
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
        self.proc = subprocess.Popen([JOB, "--config", self.config], stdout=self.log, stderr=subprocess.STDOUT,
                                     env=env, start_new_session=True)
        state = os.path.join(self.output, "_state.json")
        wait(lambda: os.path.exists(state) or self.proc.poll() is not None, 300, "the Spark job starting")
        if self.proc.poll() is not None:
            raise SystemExit("the Spark job ended (%s):\n%s" % (self.proc.returncode, self.tail()))
        self.thread = threading.Thread(target=self._watch, args=(state,), daemon=True)
        self.thread.start()

    def _watch(self, path):
        last = None
        while not self._stop.is_set():
            try:
                stamp = os.stat(path).st_mtime_ns
                if stamp != last:
                    with open(path) as handle:
                        totals = json.load(handle)["totals"]
                    seen = time.time()
                    last = stamp
                    if not self.progress or self.progress[-1][1] != totals["messages"]:
                        self.progress.append((seen, totals["messages"], dict(totals.get("streams") or {})))
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.02)

    def messages(self):
        return self.progress[-1][1] if self.progress else 0

    def written_at(self, messages):
        """For each (stream, sequence) of ``messages``, when the micro-batch that took it into Parquet was seen done."""
        progress = list(self.progress)
        through = {}
        for stream in set(stream for stream, _seq in messages):
            through[stream] = [entry[2].get(stream, 0) for entry in progress]
        return [progress[bisect.bisect_left(through[stream], seq)][0] for stream, seq in messages]

    def per_site(self):
        import pyarrow.parquet as pq

        grouped = pq.read_table(os.path.join(self.output, "aggregates")).group_by("site").aggregate([("count", "sum")])
        return dict(zip(grouped["site"].to_pylist(), [int(v) for v in grouped["count_sum"].to_pylist()]))

    def tail(self):
        with open(self.log_path) as handle:
            return "".join(handle.readlines()[-30:])

    def cpu_pids(self):
        return [self.proc.pid]

    def stop(self):
        self._stop.set()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


def read_publish_times(fleet, streams):
    """{(stream, sequence): (publish time, time the hub's stream stored it)} of every message in the hub's
    ``streams``, read with the data source's own reader."""
    from pyspark_jetstream._nats import Connection
    from pyspark_jetstream._reader import RangeReader, ack_fields

    times = {}
    with Connection(["tls://127.0.0.1:%d" % fleet.hub_port], user="app", password=PASSWORD,
                    tls={"ca": fleet.ca.path, "verify": True}, timeout=30) as conn:
        for stream in streams:
            for chunk in RangeReader(conn, "$JS.API", stream, 1, 10 ** 12).batches():
                for reply, data in zip(chunk.replies, chunk.data):
                    seq, _delivered, stored, _pending = ack_fields(reply)
                    times[stream, seq] = (publish_time(data), stored / 1e9)
    return times


# -- cutting the sites' links -------------------------------------------------------------------------------------------

_APP_REMOTE = re.compile(r', \{ urls: \["nats-leaf://app:[^"]*"\], account: APP \}')


def cut_links(fleet, cut):
    """Remove (or restore) every site's leaf remote for the data account, by a config reload of each site."""
    for (proc, _log), (name, _domain, _port, _http) in zip(fleet.procs[1:], fleet.edges):
        path = os.path.join(fleet.workdir, name + ".conf")
        with open(path) as handle:
            text = handle.read()
        kept = path + ".linked"
        if cut:
            shutil.copy(path, kept)
            text = _APP_REMOTE.sub("", text)
        else:
            with open(kept) as handle:
                text = handle.read()
        with open(path, "w") as handle:
            handle.write(text)
        proc.send_signal(signal.SIGHUP)


def app_links(fleet):
    return len(fleet._linked("APP"))  # pylint: disable=protected-access


# -- one size ---------------------------------------------------------------------------------------------------------


def percentile(values, share):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def run_size(args, sites, master_url, cluster):
    workdir = tempfile.mkdtemp(prefix="bench-dataplane-%d-" % sites)
    fleet = Fleet(args.server, sites, workdir, max_file=4 * 1024 ** 3)
    job = None
    result = {"sites": sites}
    acked, errors = {}, []
    try:
        fleet.start()
        domains = [domain for _name, domain, _port, _http in fleet.edges]
        # the job reads the last: the one stream, or the regions' total; or the regions side by side
        side_by_side = args.read == "regions"
        streams = layout(args.regions, domains, "telemetry", total=args.regions > 1 and not side_by_side,
                         durable=args.durable)
        read = [stream["name"] for stream in streams] if side_by_side else [streams[-1]["name"]]

        async def setup():
            await fleet.at_each_site(lambda domain, port: at_site(port, "STREAM.CREATE.telemetry-" + domain, {
                "name": "telemetry-" + domain, "subjects": ["tel.%s.>" % domain], "storage": "file"}))
            if args.durable:  # each region reads each site through a consumer the site has first
                async def consumers(domain, port):
                    for stream, config in site_consumers(args.regions, domains, domain, "telemetry"):
                        await at_site(port, "CONSUMER.CREATE.%s.%s" % (stream, config["name"]),
                                      {"stream_name": stream, "config": config})
                await fleet.at_each_site(consumers)
            nc = await connect("tls://127.0.0.1:%d" % fleet.hub_port, fleet.ca.path)
            try:
                for stream in streams:
                    await api(nc, "STREAM.CREATE." + stream["name"], stream)
            finally:
                await nc.close()
        asyncio.run(setup())
        job = Job(workdir, fleet, read, master_url, args.trigger)
        job.start()
        log("%d sites: servers, streams and the job up" % sites)

        # warm-up: the first micro-batches of a fresh job (JIT, connections) are not the steady state
        asyncio.run(publish(fleet, args.rate, args.warmup, acked, errors))
        warm = sum(acked.values())
        steady_began = time.time()
        wait(lambda: job.messages() >= warm, args.timeout, "the warm-up's messages in Parquet")

        # steady
        hub, site_pids = fleet.procs[0][0].pid, [proc.pid for proc, _log in fleet.procs[1:]]
        spark_pids = job.cpu_pids() + (cluster.pids() if cluster else [])

        def cpu_now():
            return (tree_cpu(site_pids), tree_cpu([hub]), tree_cpu(spark_pids), time.monotonic(), busy_cpu_seconds(),
                    own_cpu())
        before = cpu_now()
        asyncio.run(publish(fleet, args.rate, args.seconds, acked, errors))
        after = cpu_now()
        steady = sum(acked.values())
        wait(lambda: job.messages() >= steady, args.timeout, "the steady phase's messages in Parquet")
        wall = after[3] - before[3]
        result.update(offered=sites * args.rate, steady=steady - warm, steady_seconds=wall,
                      site_cpu=(after[0] - before[0]) / wall / sites, hub_cpu=(after[1] - before[1]) / wall / sites,
                      spark_cpu=(after[2] - before[2]) / wall / sites,
                      busy=(after[4] - before[4]) / wall / os.cpu_count(), publisher_cpu=(after[5] - before[5]) / wall)
        times = read_publish_times(fleet, read)
        measured = [(key, published, stored) for key, (published, stored) in times.items() if published >= steady_began]
        written = job.written_at([key for key, _published, _stored in measured])
        latencies = [at - published for at, (_seq, published, _stored) in zip(written, measured)]
        to_hub = [stored - published for _seq, published, stored in measured]
        # whether the job keeps up: the latency of the first and of the last 10 s of the phase
        began = min(published for _seq, published, _stored in measured)
        ended = max(published for _seq, published, _stored in measured)
        first_part = [late for late, (_s, published, _t) in zip(latencies, measured) if published < began + 10]
        last_part = [late for late, (_s, published, _t) in zip(latencies, measured) if published > ended - 10]
        result.update(p50_first=percentile(first_part, 0.5), p50_last=percentile(last_part, 0.5))
        result.update(p50=percentile(latencies, 0.5), p99=percentile(latencies, 0.99), max=max(latencies),
                      hub_p50=percentile(to_hub, 0.5), hub_p99=percentile(to_hub, 0.99),
                      e2e_rate=len(measured) / (max(written) - began))
        log("%d sites: steady %d messages, p50 %.2f s, p99 %.2f s" % (sites, steady, result["p50"], result["p99"]))

        # cut
        cut_links(fleet, True)
        wait(lambda: app_links(fleet) == 0, 60, "every site's data link cut")
        asyncio.run(publish(fleet, args.rate, args.cut * 60, acked, errors))
        total = sum(acked.values())
        backlog = total - steady
        restored = time.monotonic()
        cut_links(fleet, False)
        resumed, sourced, drained = asyncio.run(catch_up(fleet, read, job, steady, total, restored, args.timeout))
        result.update(backlog=backlog, resumed=resumed, sourced=sourced, drained=drained,
                      hub_drain_rate=backlog / max(sourced - resumed, 1e-3))
        log("%d sites: backlog %d; the hub resumed copying after %.1f s, held it after %.1f s, Parquet after %.1f s"
            % (sites, backlog, resumed, sourced, drained))

        # counts
        at_sites = dict((domain, answer["state"]["messages"]) for domain, answer in asyncio.run(fleet.at_each_site(
            lambda domain, port: at_site(port, "STREAM.INFO.telemetry-" + domain))).items())
        at_hub = asyncio.run(hub_counts(fleet, read))
        in_parquet = job.per_site()
        lost = sum(max(0, acked.get(d, 0) - in_parquet.get(d, 0)) for d in domains)
        twice = sum(max(0, in_parquet.get(d, 0) - acked.get(d, 0)) for d in domains)
        exact = all(acked.get(d, 0) == at_sites.get(d) == at_hub.get(d) == in_parquet.get(d) for d in domains)
        result.update(total=total, lost=lost, twice=twice, exact=exact, errors=len(errors))
        job.stop()
        job = None

        # reference: a bare stream sourcing every site, on the same servers, nothing of this collection's
        async def reference():
            nc = await connect("tls://127.0.0.1:%d" % fleet.hub_port, fleet.ca.path)
            try:
                began = time.monotonic()
                await api(nc, "STREAM.CREATE.raw", {"name": "raw", "sources": [
                    {"name": "telemetry-" + d, "external": {"api": "$JS.%s.API" % d}} for d in domains]})
                while (await api(nc, "STREAM.INFO.raw"))["state"]["messages"] < total:
                    if time.monotonic() - began > args.timeout:
                        raise SystemExit("the reference stream did not fill")
                    await asyncio.sleep(0.02)
                return time.monotonic() - began
            finally:
                await nc.close()
        seconds = asyncio.run(reference())
        result.update(raw_seconds=seconds, raw_rate=total / seconds)
        log("%d sites: reference sourced %d in %.1f s" % (sites, total, seconds))
    except BaseException:
        if job is not None:
            print(job.tail(), file=sys.stderr)
        raise
    finally:
        if job is not None:
            job.stop()
        fleet.stop()
        if errors:
            print("%d publish errors, the first: %s" % (len(errors), errors[0]), file=sys.stderr)
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return result


def log(text):
    print(time.strftime("%H:%M:%S ") + text, file=sys.stderr, flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--server", default=NATS_SERVER, help="nats-server binary (default: the venv's)")
    parser.add_argument("--sites", default="10,30,100")
    parser.add_argument("--rate", type=int, default=20, help="messages a second each site publishes")
    parser.add_argument("--seconds", type=int, default=60, help="length of the steady phase")
    parser.add_argument("--warmup", type=int, default=10, help="seconds of publishing before the steady phase")
    parser.add_argument("--cut", type=float, default=1.0, help="minutes every site is cut off from the hub")
    parser.add_argument("--trigger", type=int, default=1, help="the job's trigger_interval, seconds")
    parser.add_argument("--regions", type=int, default=1, help="regional streams at the hub (1: one stream)")
    parser.add_argument("--durable", action="store_true",
                        help="the regions read each site through a durable sourcing consumer (nats_fleet_aggregates' durable)")
    parser.add_argument("--read", choices=("total", "regions"), default="total",
                        help="what the job reads: the one stream or the regions' total, or the regions side by side")
    parser.add_argument("--master", default="standalone",
                        help="standalone (a master and a worker started here), local[N], or a spark:// URL")
    parser.add_argument("--timeout", type=int, default=600)
    parser.add_argument("--keep", action="store_true", help="keep the working directories")
    args = parser.parse_args()
    logging.getLogger("asyncio").setLevel(logging.ERROR)
    version = subprocess.run([args.server, "--version"], capture_output=True, text=True,
                             check=True).stdout.strip().rsplit("v", 1)[-1]
    sizes = [int(value) for value in args.sites.split(",")]
    cluster, workdir = None, tempfile.mkdtemp(prefix="bench-dataplane-spark-")
    results = []
    try:
        if args.master == "standalone":
            cluster = SparkCluster(workdir, cores=os.cpu_count(), memory="2g")
            cluster.start()
        master_url = cluster.url if cluster else args.master
        for sites in sizes:
            results.append(run_size(args, sites, master_url, cluster))
    finally:
        if cluster:
            cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    report(args, version, results)


def report(args, version, results):
    print("\nnats-server %s, %d msg/s per site for %d s, cut %.3g min, %d region(s)%s read as %s, Spark %s, trigger %d s, "
          "%d cores, %s" % (version, args.rate, args.seconds, args.cut, args.regions, " (durable)" if args.durable else "",
                            args.read, args.master,
                            args.trigger, os.cpu_count(), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())))
    print("\nSteady:\n")
    print("| sites | offered msg/s | into Parquet msg/s | to the hub p50 / p99 s | to Parquet p50 / p99 s | p50 first / "
          "last 10 s | CPU per site, % of a core: site / hub / Spark | publishers, % of a core | machine busy |")
    print("|---:|---:|---:|---|---|---|---|---:|---:|")
    for r in results:
        print("| %d | %d | %.0f | %.3f / %.3f | %.2f / %.2f | %.2f / %.2f | %.2f / %.2f / %.2f | %.0f | %.0f%% |" % (
            r["sites"], r["offered"], r["e2e_rate"], r["hub_p50"], r["hub_p99"], r["p50"], r["p99"], r["p50_first"],
            r["p50_last"],
            100 * r["site_cpu"], 100 * r["hub_cpu"], 100 * r["spark_cpu"], 100 * r["publisher_cpu"], 100 * r["busy"]))
    print("\nCut off for %.3g min, then back:\n" % args.cut)
    print("| sites | backlog | copying resumed after s | hub held it after s | hub drain msg/s | raw source msg/s "
          "(reference) | hub / raw | in Parquet after s | lost | twice | every count equal |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        print("| %d | %d | %.1f | %.1f | %.0f | %.0f | %.2f | %.1f | %d | %d | %s |" % (
            r["sites"], r["backlog"], r["resumed"], r["sourced"], r["hub_drain_rate"], r["raw_rate"],
            r["hub_drain_rate"] / r["raw_rate"], r["drained"], r["lost"], r["twice"],
            "yes" if r["exact"] and not r["errors"] else "NO (%d publish errors)" % r["errors"]))
    if len(results) > 1:
        first, last = results[0], results[-1]
        print("\nper site, %d -> %d sites: site CPU %.2fx, hub CPU %.2fx, Spark CPU %.2fx" % (
            first["sites"], last["sites"], last["site_cpu"] / first["site_cpu"], last["hub_cpu"] / first["hub_cpu"],
            last["spark_cpu"] / first["spark_cpu"]))
    print(json.dumps(results))


if __name__ == "__main__":
    socket.setdefaulttimeout(30)
    main()
