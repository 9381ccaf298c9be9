"""Regional aggregation (nats_fleet_aggregates): how fast the hub sources a backlog from every site, by regions.

Starts on loopback a hub server (JetStream domain hub) and one leaf server per site (domain site-N), as
bench_monitor.py does, and fills a stream ``tel-site-N`` at every site with the same backlog (JSON telemetry of
about 120 bytes a message): what the sites wrote while cut off. Then, per layout, the hub sources the whole backlog
and the run counts the time until every message is in:

  1 region    one hub stream sourcing every site: the reference, nats-server's own single-stream path (one
              copying goroutine per target stream) with nothing of this collection's making
  R regions   the streams nats_fleet_aggregates makes for R regions (_aggregates.streams, the sites split evenly),
              each a stream of its own sourcing its region's sites

The hub's streams of a layout are deleted before the next; each layout runs --rounds times, in turns. Reported per
layout: median seconds to source the backlog, messages per second, the ratio to 1 region, the hub server's CPU
seconds, and every site's count in the hub (each exactly the backlog: nothing lost, nothing twice).

Usage: .venv/bin/python bench/bench_regions.py [--sites 8] [--messages 150000] [--regions 1,2,4] [--rounds 3]
"""

import argparse
import asyncio
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench_monitor import NATS_SERVER, ROOT, Fleet, connect


def cpu_seconds(pid):
    """User + system CPU seconds of process ``pid``."""
    with open("/proc/%d/stat" % pid) as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def layout(regions, domains, name="tel", total=False, durable=False):
    """The hub streams of the aggregate ``name`` (sourcing ``<name>-<site>``) over ``regions`` regions, the sites
    split evenly, as the collection makes them (with ``total``, the last sources the regions; with ``durable``, each
    site through a consumer of its stream), in the server's API form."""
    items = _aggregates().streams([aggregate(name, _spread(regions, domains), total, durable)], domains, "hub")

    def api_of(source):  # a site's stream is read through its domain's API, a region's in the hub's own
        return {"external": {"api": "$JS.%s.API" % source["domain"]}} if source.get("domain") else {}

    return [{"name": item["name"], "storage": "file",
             "sources": [dict({"name": source["name"]}, **api_of(source),
                              **({"consumer": source["consumer"]} if "consumer" in source else {}))
                         for source in item["sources"]]}
            for item in items]


def _aggregates():
    """The collection's _aggregates, from this checkout."""
    sys.path.insert(0, os.path.join(ROOT, ".collections"))
    from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _aggregates as aggregates  # pylint: disable=import-error
    return aggregates


def _spread(regions, domains):
    """``domains`` split evenly over ``regions`` regions r1, r2, ..."""
    size = -(-len(domains) // regions)
    return dict(("r%d" % (index + 1), domains[index * size:(index + 1) * size]) for index in range(regions))


def aggregate(name, spread, total=False, durable=False):
    return {"name": name, "origin": name + "-{site}", "regions": spread, "total": total, "durable": durable}


def site_consumers(regions, domains, domain, name="tel"):
    """The consumers of ``domain``'s stream that a durable layout's regions read it through, as the collection makes
    them (``_aggregates.consumers``), in the server's API form: [(stream, config)]."""
    made = _aggregates().consumers({"hub": ([aggregate(name, _spread(regions, domains), durable=True)], "")}, domain,
                                   ["hub"] + domains)
    return [(item["stream"], {"name": item["name"], "durable_name": item["name"], "deliver_subject": item["deliver_subject"],
                              "ack_policy": item["ack_policy"], "flow_control": True, "idle_heartbeat": 10 ** 9})
            for item in made]


async def fill(fleet, messages):
    """Every site's stream with ``messages`` acknowledged telemetry messages."""
    async def one(domain, port):
        nc = await connect("nats://127.0.0.1:%d" % port)
        try:
            js = nc.jetstream()
            await js.add_stream(name="tel-" + domain, subjects=["tel.%s.>" % domain])
            for start in range(0, messages, 500):
                acks = [js.publish("tel.%s.m%d" % (domain, number % 8), json.dumps({
                    "site": domain, "metric": "m%d" % (number % 8), "value": number * 0.5,
                    "timestamp": "2026-11-27T10:00:00.000000Z"}).encode())
                    for number in range(start, min(messages, start + 500))]
                await asyncio.gather(*acks)
        finally:
            await nc.close()
    await asyncio.gather(*[one(domain, port) for _name, domain, port, _http in fleet.edges])


async def source(fleet, streams, total, timeout):
    """Seconds until the hub's ``streams`` hold ``total`` messages, and each site's count in them."""
    nc = await connect("tls://127.0.0.1:%d" % fleet.hub_port, fleet.ca.path)
    try:
        began = time.perf_counter()
        for stream in streams:
            await nc.request("$JS.API.STREAM.CREATE." + stream["name"], json.dumps(stream).encode(), timeout=10)
        while True:
            held = 0
            for stream in streams:
                reply = json.loads((await nc.request("$JS.API.STREAM.INFO." + stream["name"], b"", timeout=10)).data)
                held += reply.get("state", {}).get("messages", 0)
            if held >= total:
                break
            if time.perf_counter() - began > timeout:
                raise SystemExit("the hub held %d of %d messages after %d s" % (held, total, timeout))
            await asyncio.sleep(0.05)
        seconds = time.perf_counter() - began
        counts = {}
        for stream in streams:
            request = {"subjects_filter": ">"}
            reply = json.loads((await nc.request("$JS.API.STREAM.INFO." + stream["name"],
                                                 json.dumps(request).encode(), timeout=10)).data)
            for subject, count in (reply.get("state", {}).get("subjects") or {}).items():
                site = subject.split(".")[1]
                counts[site] = counts.get(site, 0) + count
        for stream in streams:
            await nc.request("$JS.API.STREAM.DELETE." + stream["name"], b"", timeout=10)
        return seconds, counts
    finally:
        await nc.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--server", default=NATS_SERVER, help="nats-server binary (default: the venv's)")
    parser.add_argument("--sites", type=int, default=8)
    parser.add_argument("--messages", type=int, default=150000, help="backlog per site")
    parser.add_argument("--regions", default="1,2,4")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=int, default=900)
    args = parser.parse_args()
    logging.getLogger("asyncio").setLevel(logging.ERROR)  # its note on every TLS connection nats-py closes
    version = subprocess.run([args.server, "--version"], capture_output=True, text=True,
                             check=True).stdout.strip().rsplit("v", 1)[-1]
    workdir = tempfile.mkdtemp(prefix="bench-regions-")
    fleet = Fleet(args.server, args.sites, workdir, max_file=1024 ** 3)
    regions = [int(value) for value in args.regions.split(",")]
    results = dict((count, []) for count in regions)
    total = args.sites * args.messages
    try:
        fleet.start()
        asyncio.run(fill(fleet, args.messages))
        domains = [domain for _name, domain, _port, _http in fleet.edges]
        hub = fleet.procs[0][0].pid
        for round_number in range(args.rounds):
            for count in regions if round_number % 2 == 0 else list(reversed(regions)):
                cpu = cpu_seconds(hub)
                seconds, counts = asyncio.run(source(fleet, layout(count, domains), total, args.timeout))
                results[count].append((seconds, cpu_seconds(hub) - cpu, counts))
                print("round %d, %d region(s): %.1f s" % (round_number + 1, count, seconds), file=sys.stderr)
    finally:
        fleet.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print("\nnats-server %s, %d sites, %d messages each (%d in all), %d round(s), on %d cores" % (
        version, args.sites, args.messages, total, args.rounds, os.cpu_count()))
    print("| regions | hub streams | s to source the backlog | msg/s | ratio to 1 region | hub CPU s | every site "
          "exactly once |")
    print("|---|---|---|---|---|---|---|")
    reference = None
    for count in regions:
        seconds = statistics.median(entry[0] for entry in results[count])
        rate = total / seconds
        reference = reference or rate
        exact = all(entry[2] == dict((domain, args.messages) for domain in
                                     ["site-%d" % n for n in range(1, args.sites + 1)]) for entry in results[count])
        print("| %d | %d | %.1f | %.0f | %.2f | %.1f | %s |" % (
            count, count, seconds, rate, rate / reference, statistics.median(entry[1] for entry in results[count]),
            "yes" if exact else "NO"))


if __name__ == "__main__":
    main()
