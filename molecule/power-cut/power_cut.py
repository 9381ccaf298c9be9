# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A power cut at an edge site, on a lab host whose JetStream store is a device of its own.

    power_cut.py flash-up   --dir DIR                    an ext4 image on a loop device, mounted at DIR/flash
    power_cut.py flash-down --dir DIR
    power_cut.py consume    --dir DIR --url URL --stream S --durable D [--ca CA]
    power_cut.py cut        --dir DIR --flash-dir DIR --container C --lab-cmd FLEETLAB --lab L --host H
    power_cut.py check      --dir DIR --url URL --hub URL --hub-stream S [--ca CA] [--out FILE]

The store is ext4 mounted with errors=remount-ro. ``cut`` cuts it off its device with ext4's own error trigger
(nothing more reaches the device; what the kernel had not written back is gone when it is unmounted) and SIGKILLs
the host's container at once: what a power cut does to a device, which a container kill alone does not (the
machine's kernel would keep the writes). Then the file system is checked, mounted again and the host booted.

``consume`` pulls from a durable consumer at the site and acknowledges each message, writing
``<id> <time>`` to DIR/<durable>.got, until DIR/stop exists; while DIR/pause exists it waits.

``check`` compares what the publisher (molecule/rollout/acked_load.py) had acknowledged with what the site's
stream kept, what the hub's stream sourced and what the consumer received, by message id: the loss window (the
acknowledgement times of the lost ids, relative to the cut), duplicates at each place, ids the hub has that the
site lost, ids the site kept that the hub lacks, and how long each part took to resume.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "rollout"))

import acked_load  # noqa: E402 pylint: disable=wrong-import-position


def sh(*argv, check=True):
    return subprocess.run(list(argv), capture_output=True, text=True, check=check, timeout=120)


def mount_point(directory):
    return os.path.join(directory, "flash")


def device_of(mount):
    for line in open("/proc/mounts", encoding="utf-8"):
        fields = line.split()
        if fields[1] == mount:
            return fields[0]
    return None


def flash_up(args):
    image, mount = os.path.join(args.dir, "flash.img"), mount_point(args.dir)
    os.makedirs(mount, exist_ok=True)
    if device_of(mount):
        return
    with open(image, "wb") as handle:
        handle.truncate(args.size_mib * 1024 * 1024)
    sh("mkfs.ext4", "-q", "-F", image)
    sh("mount", "-o", "loop,errors=remount-ro", image, mount)


def flash_down(args):
    mount = mount_point(args.dir)
    if device_of(mount):
        sh("umount", "-l", mount)
    for name in ("flash.img",):
        path = os.path.join(args.dir, name)
        if os.path.exists(path):
            os.unlink(path)


def cut(args):
    mount, image = mount_point(args.flash_dir), os.path.join(args.flash_dir, "flash.img")
    device = device_of(mount)
    trigger = "/sys/fs/ext4/%s/trigger_fs_error" % os.path.basename(device)
    record = {"cut_at": time.time()}
    with open(trigger, "w", encoding="utf-8") as handle:
        handle.write("power cut\n")
    sh("podman", "kill", "--signal", "KILL", args.container)
    record["killed_at"] = time.time()
    # the publisher and the consumer wait until the site is repaired (a repair on a server that reports no last
    # activity counts what the stream holds as read before the cut)
    open(os.path.join(args.dir, "pause"), "w", encoding="utf-8").close()
    sh("podman", "wait", args.container, check=False)
    sh("umount", mount)
    fsck = sh("e2fsck", "-f", "-y", image, check=False)
    record["fsck_rc"] = fsck.returncode  # 1: errors corrected
    sh("mount", "-o", "loop,errors=remount-ro", image, mount)
    record["start_at"] = time.time()
    sh(args.lab_cmd, "start", "--lab", args.lab, args.host)
    record["booted_at"] = time.time()
    with open(os.path.join(args.dir, "cut.json"), "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    print(json.dumps(record))


async def consume_loop(args):
    import nats

    stop, pause = os.path.join(args.dir, "stop"), os.path.join(args.dir, "pause")
    nc = await acked_load.connect([args.url])
    js = nc.jetstream()
    sub = None
    with open(os.path.join(args.dir, args.durable + ".got"), "a", buffering=1, encoding="utf-8") as out:
        while not os.path.exists(stop):
            if os.path.exists(pause):
                await asyncio.sleep(0.1)
                continue
            try:
                if sub is None:
                    sub = await js.pull_subscribe_bind(args.durable, args.stream)
                msgs = await sub.fetch(20, timeout=1)
            except (nats.errors.TimeoutError, asyncio.TimeoutError):
                continue
            except Exception:  # pylint: disable=broad-except
                # the site is down, or its consumer is being created again: bind anew
                sub = None
                await asyncio.sleep(0.2)
                continue
            for msg in msgs:
                msgid = (msg.headers or {}).get("Nats-Msg-Id") or msg.data.decode()
                try:
                    await msg.ack()
                except Exception:  # pylint: disable=broad-except
                    continue
                out.write("%s %.3f\n" % (msgid, time.time()))
    await nc.close()


async def stream_ids(url, stream, subject):
    """(id, stored at) of every message of ``stream`` on ``subject``, read by sequence."""
    nc = await acked_load.connect([url])
    js = nc.jetstream()
    info = await js.stream_info(stream)
    found = []
    sub = await js.subscribe(subject, stream=stream, ordered_consumer=True)
    while len(found) < info.state.messages:
        msg = await sub.next_msg(timeout=10)
        found.append(((msg.headers or {}).get("Nats-Msg-Id") or msg.data.decode(), msg.metadata.timestamp.timestamp()))
    await sub.unsubscribe()
    await nc.close()
    return found


def counted(ids):
    counts = {}
    for msgid in ids:
        counts[msgid] = counts.get(msgid, 0) + 1
    return counts


def check(args):
    with open(os.path.join(args.dir, "cut.json"), encoding="utf-8") as handle:
        cut_record = json.load(handle)
    with open(os.path.join(args.dir, "resumed"), encoding="utf-8") as handle:
        resumed_at = float(handle.read())
    acked = acked_load.read_acked(os.path.join(args.dir, args.publisher + ".acked"))
    ack_time = dict((row[0], row[2]) for row in acked)
    subject = "load.%s" % args.publisher
    stream = "LOAD_" + args.publisher.upper()
    site = asyncio.run(asyncio.wait_for(stream_ids(args.url, stream, subject), 120))
    hub = asyncio.run(asyncio.wait_for(stream_ids(args.hub, args.hub_stream, subject), 120))
    got = []
    with open(os.path.join(args.dir, args.durable + ".got"), encoding="utf-8") as handle:
        got = [(line.split()[0], float(line.split()[1])) for line in handle if line.strip()]
    site_ids, hub_ids = counted(i for i, _t in site), counted(i for i, _t in hub)
    got_ids = counted(i for i, _t in got)
    cut_at = cut_record["cut_at"]
    lost = sorted((ack_time[i] - cut_at, i) for i in ack_time if i not in site_ids)
    after = [i for i, _f, acked_at, _n in acked if acked_at >= resumed_at]
    first_after = min((acked_at for _i, _f, acked_at, _n in acked if acked_at >= resumed_at), default=None)
    hub_new = [t for i, t in hub if i in set(after)]
    result = {
        "acked": len(acked), "acked_before_cut": sum(1 for t in ack_time.values() if t < cut_at),
        "acked_after_resume": len(after),
        # kept at the site and acknowledged after the cut, before the writers resumed: a publish in flight at the
        # cut, sent again by the client as it reconnected
        "acked_while_down": sum(1 for i, t in ack_time.items() if cut_at <= t < resumed_at and i in site_ids),
        "site": {"kept": len(site_ids), "lost": len(lost),
                 "loss_window_s": [round(lost[0][0], 1), round(lost[-1][0], 1)] if lost else [],
                 "kept_acked_before_cut": sum(1 for i, t in ack_time.items() if t < cut_at and i in site_ids),
                 # stored since the restart: they took the sequences of the lost ones
                 "stored_after_cut": sum(1 for i in site_ids if ack_time.get(i, cut_at) >= cut_at),
                 "duplicated": len([i for i, n in site_ids.items() if n > 1])},
        "hub": {"stored": len(hub), "duplicated": len([i for i, n in hub_ids.items() if n > 1]),
                "has_what_the_site_lost": sum(1 for _d, i in lost if i in hub_ids),
                "missing_of_the_site": len([i for i in site_ids if i not in hub_ids]),
                "missing_after_resume": len([i for i in after if i not in hub_ids]),
                "resumed_s": round(min(hub_new) - resumed_at, 2) if hub_new else None},
        "consumer": {"received": len(got), "duplicated": len([i for i, n in got_ids.items() if n > 1]),
                     # delivered again because the consumer's own state went back with the cut
                     "duplicated_acked_before_cut": len([i for i, n in got_ids.items()
                                                         if n > 1 and ack_time.get(i, cut_at) < cut_at]),
                     "missing_after_resume": len([i for i in after if i not in got_ids]),
                     "resumed_s": round(min((t for i, t in got if i in set(after)), default=resumed_at) - resumed_at, 2)
                     if any(i in set(after) for i, _t in got) else None},
        "server_down_s": round(cut_record["booted_at"] - cut_at, 1), "fsck_rc": cut_record["fsck_rc"],
        "publisher_resumed_s": round(first_after - resumed_at, 2) if first_after else None,
    }
    text = json.dumps(result, indent=2)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
    print(text)
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("flash-up")
    p.add_argument("--dir", required=True)
    p.add_argument("--size-mib", type=int, default=256)
    p = sub.add_parser("flash-down")
    p.add_argument("--dir", required=True)
    p = sub.add_parser("consume")
    p.add_argument("--dir", required=True)
    p.add_argument("--url", required=True)
    p.add_argument("--stream", required=True)
    p.add_argument("--durable", required=True)
    p.add_argument("--ca")
    p = sub.add_parser("cut")
    p.add_argument("--dir", required=True)
    p.add_argument("--flash-dir", required=True, help="the --dir of flash-up")
    p.add_argument("--container", required=True)
    p.add_argument("--lab-cmd", required=True)
    p.add_argument("--lab", required=True)
    p.add_argument("--host", required=True)
    p = sub.add_parser("check")
    p.add_argument("--dir", required=True)
    p.add_argument("--url", required=True)
    p.add_argument("--hub", required=True)
    p.add_argument("--hub-stream", required=True)
    p.add_argument("--publisher", default="spoke1")
    p.add_argument("--durable", default="worker")
    p.add_argument("--ca")
    p.add_argument("--out")
    args = parser.parse_args()
    acked_load.CA = getattr(args, "ca", None)
    if args.command == "consume":
        asyncio.run(consume_loop(args))
        return 0
    return {"flash-up": flash_up, "flash-down": flash_down, "cut": cut, "check": check}[args.command](args) or 0


if __name__ == "__main__":
    sys.exit(main())
