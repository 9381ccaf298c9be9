"""What a JetStream store's sync_interval costs and protects on an edge device: acknowledged publishes per second,
writes and bytes that reach the device per second, and the acknowledged messages a power cut can take (those
published since the last sync), for several settings, beside a reference measured in the same run.

The store lives on an ext4 file system of its own (a loop device), so the device's own counters
(/sys/block/<loop>/stat) count what reaches the "flash": completed writes and sectors written.

  reference  the same publishes into a memory stream (no store at all)
  2m         nats-server's default (sync every two minutes)
  10s, 1s    shorter intervals
  always     a sync before every acknowledgement

After each file-stream run, a power cut at the device (ext4's own error trigger: nothing more reaches the device,
what the kernel had not written back is gone; the server killed; the file system checked and mounted again) and
the acknowledged messages the stream no longer holds.

At risk: a power cut loses what was acknowledged and is not on the device yet - at the worst moment the messages of
the last min(interval, kernel writeback) seconds, where the kernel writes dirty pages back by itself once they are
vm.dirty_expire_centisecs old (checked every vm.dirty_writeback_centisecs; 30 s and 5 s by default), without the
order a sync keeps; with ``always``, nothing. (A process kill loses nothing of it: the kernel still holds the
writes.)

Usage (root, loop devices): .venv/bin/python bench/bench_sync_interval.py [--seconds 10] [--size 256]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from bench_streams import COLLECTIONS, NATS_SERVER, free_port

sys.path.insert(0, COLLECTIONS)
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import JetStream, NatsClient  # noqa: E402

SETTINGS = [("reference", None), ("2m", "2m"), ("10s", "10s"), ("1s", "1s"), ("always", "always")]


def device_counters(device):
    """(writes completed, sectors written) of a block device."""
    fields = open("/sys/block/%s/stat" % os.path.basename(device)).read().split()
    return int(fields[4]), int(fields[6])


def measure(workdir, mount, device, setting, seconds, size, binary):
    port = free_port()
    store = os.path.join(mount, "js-%s" % setting[0])
    conf = os.path.join(workdir, "%s.conf" % setting[0])
    sync = 'sync_interval: "%s", ' % setting[1] if setting[1] else ""
    with open(conf, "w") as handle:
        handle.write('listen: "127.0.0.1:%d"\njetstream { %sstore_dir: "%s", max_file_store: 1073741824 }\n'
                     % (port, sync, store))
    proc = subprocess.Popen([binary, "-c", conf], stdout=open(conf + ".log", "w"), stderr=subprocess.STDOUT)
    try:
        url = "nats://127.0.0.1:%d" % port
        deadline = time.monotonic() + 10
        while True:
            try:
                client = NatsClient({"servers": [url], "timeout": 10.0})
                client.__enter__()
                break
            except Exception:  # not listening yet
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        try:
            JetStream(client).call("STREAM.CREATE.READINGS", {
                "name": "READINGS", "subjects": ["r.>"], "storage": "memory" if setting[1] is None else "file",
                "max_bytes": 512 * 1024 * 1024, "discard": "old"})
            payload = b"x" * size
            os.sync()
            writes0, sectors0 = device_counters(device)
            started, acked = time.monotonic(), 0
            while time.monotonic() - started < seconds:
                batch = (("r.sensor", payload, None) for _number in range(1000))
                replies = client.request_many(batch, in_flight=256)
                acked += sum(1 for reply in replies if b'"seq"' in reply.data)
            elapsed = time.monotonic() - started
            writes1, sectors1 = device_counters(device)
        finally:
            client.__exit__(None, None, None)
        if setting[1] is not None:
            # the power cut: nothing more reaches the device, the server dies, the file system is checked and
            # mounted again; what the stream kept of what was acknowledged
            with open("/sys/fs/ext4/%s/trigger_fs_error" % os.path.basename(device), "w") as handle:
                handle.write("power cut\n")
            proc.kill()
            proc.wait(10)
            subprocess.run(["umount", mount], check=True)
            subprocess.run(["e2fsck", "-f", "-y", device], capture_output=True, check=False)
            subprocess.run(["mount", "-o", "errors=remount-ro", device, mount], check=True)
            proc = subprocess.Popen([binary, "-c", conf], stdout=open(conf + ".log", "a"), stderr=subprocess.STDOUT)
            kept = stream_messages(url)
    finally:
        proc.terminate()
        proc.wait(10)
    rate = acked / elapsed
    interval = {"2m": 120.0, "10s": 10.0, "1s": 1.0}.get(setting[1])
    return dict(setting=setting[0], rate=rate, acked=acked, lost=acked - kept if setting[1] else 0,
                writes=(writes1 - writes0) / elapsed,
                kib=(sectors1 - sectors0) * 512 / 1024.0 / elapsed,
                at_risk=0 if setting[1] in (None, "always") else rate * min(interval, kernel_writeback()))


def stream_messages(url):
    deadline = time.monotonic() + 30
    while True:
        try:
            with NatsClient({"servers": [url], "timeout": 5.0}) as client:
                return JetStream(client).call("STREAM.INFO.READINGS")["state"]["messages"]
        except Exception:  # starting up, or JetStream recovering the store
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def kernel_writeback():
    """Seconds after which the kernel has written a dirty page back by itself (expiry plus one writeback period)."""
    def centis(name):
        return int(open("/proc/sys/vm/%s" % name).read()) / 100.0
    return centis("dirty_expire_centisecs") + centis("dirty_writeback_centisecs")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--size", type=int, default=256, help="bytes per message")
    parser.add_argument("--server", default=NATS_SERVER)
    args = parser.parse_args()
    if os.geteuid() != 0 or not os.path.exists("/dev/loop-control"):
        sys.exit("needs root and loop devices")
    workdir = tempfile.mkdtemp(prefix="bench-sync-")
    image, mount = os.path.join(workdir, "flash.img"), os.path.join(workdir, "flash")
    with open(image, "wb") as handle:
        handle.truncate(2 * 1024 ** 3)
    subprocess.run(["mkfs.ext4", "-q", "-F", image], check=True)
    os.makedirs(mount)
    device = subprocess.run(["losetup", "--find", "--show", image], check=True, capture_output=True,
                            text=True).stdout.strip()
    subprocess.run(["mount", "-o", "errors=remount-ro", device, mount], check=True)
    try:
        version = subprocess.run([args.server, "--version"], capture_output=True, text=True,
                                 check=False).stdout.strip()
        print("%s, %d-byte messages, %gs each, store on ext4 on %s, kernel writeback after %gs" % (
            version, args.size, args.seconds, device, kernel_writeback()))
        rows = [measure(workdir, mount, device, setting, args.seconds, args.size, args.server) for setting in SETTINGS]
    finally:
        subprocess.run(["umount", mount], check=False)
        subprocess.run(["losetup", "-d", device], check=False)
        shutil.rmtree(workdir, ignore_errors=True)
    reference = rows[0]["rate"]
    print("%-10s %12s %8s %14s %12s %20s %18s" % (
        "setting", "acked msg/s", "ratio", "dev writes/s", "dev KiB/s", "acked at risk (max)", "lost at the cut"))
    for row in rows:
        print("%-10s %12.0f %8.2f %14.1f %12.0f %20s %18s" % (
            row["setting"], row["rate"], row["rate"] / reference, row["writes"], row["kib"],
            "0" if not row["at_risk"] else "%.0f" % row["at_risk"],
            "-" if row["setting"] == "reference" else "%d of %d" % (row["lost"], row["acked"])))
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
