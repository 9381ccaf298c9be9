# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Steady acknowledged publish load through a rollout, and the check afterwards.

    acked_load.py run   --dir DIR --publisher NAME=URL[,URL...] ... [--rate 20]
    acked_load.py check --dir DIR --report ROLLOUT.json ... [--out RESULT.json]

``run`` creates one R1/R3 stream per publisher (``LOAD_<NAME>`` on ``load.<name>``)
and publishes to it, one message at a time, each with its own ``Nats-Msg-Id``,
retrying the same id until the stream acknowledges it, until DIR/stop exists.
Every acknowledged id goes to DIR/<name>.acked (id, first attempt, ack time,
attempts) as it arrives.

While DIR/pause exists, no message is published (one being retried waits too).

``check`` reads every message back from each stream and compares by id: an
acknowledged id missing from the stream is lost, an id stored twice is
duplicated. For each node a rollout report lists, it gives the longest gap
between two acknowledgements of each publisher while that node had its turn.
It exits 1 when anything was lost or duplicated.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time


def parse_publisher(spec):
    name, sep, urls = spec.partition("=")
    if not sep or not name or not urls:
        raise argparse.ArgumentTypeError("expected NAME=URL[,URL...], got %r" % spec)
    replicas = 1
    if ":" in name:
        name, replicas = name.split(":", 1)
    return {"name": name, "urls": urls.split(","), "replicas": int(replicas)}


# the CA the servers are verified with (run --ca)
CA = None


async def connect(urls):
    import ssl

    import nats

    return await nats.connect(servers=urls, max_reconnect_attempts=-1, reconnect_time_wait=0.2,
                              connect_timeout=2, allow_reconnect=True, name="acked-load",
                              tls=ssl.create_default_context(cafile=CA) if CA else None)


async def ensure_stream(js, name, replicas):
    from nats.js.api import StreamConfig

    config = StreamConfig(name="LOAD_" + name.upper(), subjects=["load.%s" % name], num_replicas=replicas,
                          storage="file", duplicate_window=300.0)
    for _attempt in range(60):
        try:
            await js.add_stream(config)
            return
        except Exception:  # pylint: disable=broad-except
            await asyncio.sleep(1)
    await js.add_stream(config)


async def publish(publisher, directory, interval):
    name = publisher["name"]
    nc = await connect(publisher["urls"])
    js = nc.jetstream()
    await ensure_stream(js, name, publisher["replicas"])
    stop, pause = os.path.join(directory, "stop"), os.path.join(directory, "pause")
    seq = 0
    with open(os.path.join(directory, name + ".acked"), "a", buffering=1, encoding="utf-8") as out:
        while not os.path.exists(stop):
            seq += 1
            msgid = "%s-%d" % (name, seq)
            first, attempts = time.time(), 0
            while True:
                while os.path.exists(pause):
                    await asyncio.sleep(0.1)
                attempts += 1
                try:
                    await js.publish("load.%s" % name, msgid.encode(), timeout=1.0, headers={"Nats-Msg-Id": msgid})
                    break
                except Exception:  # pylint: disable=broad-except
                    # timeouts, no responders, a connection being replaced: the same id again
                    await asyncio.sleep(0.05)
            out.write("%s %.3f %.3f %d\n" % (msgid, first, time.time(), attempts))
            await asyncio.sleep(interval)
    await nc.close()


async def run(args):
    os.makedirs(args.dir, exist_ok=True)
    with open(os.path.join(args.dir, "publishers.json"), "w", encoding="utf-8") as handle:
        json.dump(args.publisher, handle)
    await asyncio.gather(*(publish(p, args.dir, 1.0 / args.rate) for p in args.publisher))


async def stored_ids(publisher):
    """Every Nats-Msg-Id the publisher's stream holds, read by sequence."""
    nc = await connect(publisher["urls"])
    js = nc.jetstream()
    stream = "LOAD_" + publisher["name"].upper()
    info = await js.stream_info(stream)
    ids = []
    sub = await js.subscribe("load.%s" % publisher["name"], ordered_consumer=True)
    while len(ids) < info.state.messages:
        msg = await sub.next_msg(timeout=10)
        ids.append((msg.headers or {}).get("Nats-Msg-Id") or msg.data.decode())
    await sub.unsubscribe()
    await nc.close()
    return ids


def read_acked(path):
    rows = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            msgid, first, acked, attempts = line.split()
            rows.append((msgid, float(first), float(acked), int(attempts)))
    return rows


def longest_gap(acks, began, ended):
    """Longest time without an acknowledgement inside [began, ended]."""
    inside = [began] + [t for t in acks if began < t < ended] + [ended]
    return max(b - a for a, b in zip(inside, inside[1:]))


def check(args):
    with open(os.path.join(args.dir, "publishers.json"), encoding="utf-8") as handle:
        publishers = json.load(handle)
    result = {"publishers": {}, "nodes": []}
    acks = {}
    for publisher in publishers:
        name = publisher["name"]
        rows = read_acked(os.path.join(args.dir, name + ".acked"))
        acked = [row[0] for row in rows]
        stored = asyncio.run(asyncio.wait_for(stored_ids(publisher), 180))  # a server that refuses: fail, not hang
        counts = {}
        for msgid in stored:
            counts[msgid] = counts.get(msgid, 0) + 1
        acks[name] = [row[2] for row in rows]
        result["publishers"][name] = {
            "acked": len(acked), "stored": len(stored),
            "lost": sorted(set(acked) - set(counts)), "duplicated": sorted(k for k, n in counts.items() if n > 1),
            "retried": sum(1 for row in rows if row[3] > 1), "max_attempts": max((row[3] for row in rows), default=0),
            "longest_publish_s": round(max((row[2] - row[1] for row in rows), default=0.0), 3),
        }
    for path in args.report:
        with open(path, encoding="utf-8") as handle:
            report = json.load(handle)
        for node in report.get("nodes") or []:
            if not node.get("restarted"):
                continue
            began, ended = float(node["began"]), float(node["ended"])
            result["nodes"].append({
                "host": node["host"], "before": node["before"], "after": node["after"], "turn_s": round(ended - began, 1),
                "stall_s": {name: round(longest_gap(times, began, ended), 2) for name, times in acks.items()
                            if any(began < t < ended for t in times) or times and times[0] < began and times[-1] > ended},
            })
    lost = sum(len(p["lost"]) for p in result["publishers"].values())
    duplicated = sum(len(p["duplicated"]) for p in result["publishers"].values())
    result.update(lost=lost, duplicated=duplicated)
    text = json.dumps(result, indent=2)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
    print(text)
    return 1 if lost or duplicated else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run")
    p.add_argument("--dir", required=True)
    p.add_argument("--publisher", action="append", type=parse_publisher, required=True,
                   help="NAME[:REPLICAS]=URL[,URL...]")
    p.add_argument("--rate", type=float, default=20.0, help="messages a second per publisher")
    p.add_argument("--ca", help="the CA to verify the servers with")
    p = sub.add_parser("check")
    p.add_argument("--dir", required=True)
    p.add_argument("--ca", help="the CA to verify the servers with")
    p.add_argument("--report", action="append", default=[], help="a rollout's JSON record")
    p.add_argument("--out")
    args = parser.parse_args()
    global CA  # pylint: disable=global-statement
    CA = args.ca
    if args.command == "run":
        asyncio.run(run(args))
        return 0
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
