"""Key-value entries and objects with jetstream_kv and jetstream_object_store, against a real
nats-server, each beside a reference measured in the same run on the same server.

  kv no-op   1,000 entries already in place, the task again
  kv floor   a module start-up, a connect and one pass reading the last value of every key
             (one consumer delivering the last message per subject), as a module run the same way
  kv write   the 1,000 entries written into an empty bucket by the module
  kv raw     nats-py putting the same 1,000 entries in a loop, each awaited (in one process)
  obj upload a 50 MiB object uploaded by the module
  obj raw    nats-py's object_store().put of the same data (in one process)
  obj no-op  the upload task again: bytes the server sent during it (no chunk may be among them)

Usage: .venv/bin/python bench/bench_kv_objects.py [--keys 1000] [--mib 50] [--repeat 5] [--server PATH]
"""

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import nats

from bench_streams import COLLECTIONS, NATS_SERVER, free_port, run

KV = "ansible_collections.nats_edge.fleet.plugins.modules.jetstream_kv"
OBJ = "ansible_collections.nats_edge.fleet.plugins.modules.jetstream_object_store"

FLOOR_MODULE = """\
from ansible.module_utils.basic import AnsibleModule
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import NatsClient


def main():
    module = AnsibleModule(argument_spec=dict(servers=dict(type="list", elements="str"), bucket=dict(type="str")))
    with NatsClient(module.params) as client:
        found = client.last_per_subject("$JS.API", "KV_" + module.params["bucket"],
                                        "$KV.%s.>" % module.params["bucket"])
    module.exit_json(changed=False, keys=len(found))


if __name__ == "__main__":
    main()
"""


def start(workdir, binary):
    port, http = free_port(), free_port()
    conf = os.path.join(workdir, "bench.conf")
    with open(conf, "w") as handle:
        handle.write('listen: "127.0.0.1:%d"\nhttp: "127.0.0.1:%d"\njetstream { store_dir: "%s", '
                     'max_memory_store: 268435456, max_file_store: 8589934592 }\nmax_payload: 8MB\n'
                     % (port, http, os.path.join(workdir, "js")))
    proc = subprocess.Popen([binary, "-c", conf], stdout=open(conf + ".log", "w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/healthz" % http, timeout=1).read()
            return proc, "nats://127.0.0.1:%d" % port, http
        except OSError:
            time.sleep(0.05)
    proc.terminate()
    raise SystemExit("nats-server did not start; see %s.log" % conf)


def out_bytes(http):
    with urllib.request.urlopen("http://127.0.0.1:%d/varz" % http, timeout=2) as reply:
        return json.loads(reply.read())["out_bytes"]


def raw_puts(url, bucket, entries):
    async def go():
        nc = await nats.connect(url)
        try:
            store = await nc.jetstream().create_key_value(bucket=bucket)
            started = time.perf_counter()
            for key, value in entries.items():
                await store.put(key, value.encode())
            return time.perf_counter() - started
        finally:
            await nc.close()
    return asyncio.run(go())


def raw_object_put(url, bucket, data):
    async def go():
        nc = await nats.connect(url, max_outstanding_pings=10)
        try:
            store = await nc.jetstream().create_object_store(bucket=bucket)
            started = time.perf_counter()
            await store.put("blob", data)
            return time.perf_counter() - started
        finally:
            await nc.close()
    return asyncio.run(go())


def delete_stream(url, name):
    async def go():
        nc = await nats.connect(url)
        try:
            await nc.request("$JS.API.STREAM.DELETE.%s" % name, b"", timeout=10)
        finally:
            await nc.close()
    asyncio.run(go())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--server", default=NATS_SERVER)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--mib", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="bench-kv-")
    env = dict(os.environ, PYTHONPATH=COLLECTIONS + os.pathsep + workdir)
    with open(os.path.join(workdir, "kv_floor.py"), "w") as handle:
        handle.write(FLOOR_MODULE)
    proc, url, http = start(workdir, options.server)
    times = {name: [] for name in ("kv no-op", "kv floor", "kv write", "kv raw", "obj upload", "obj raw")}
    noop_bytes = []
    entries = dict(("site.%04d.setting" % i, "value-%d-%s" % (i, "x" * 40)) for i in range(options.keys))
    blob = os.urandom(options.mib * 1024 * 1024)
    blob_path = os.path.join(workdir, "blob.bin")
    with open(blob_path, "wb") as handle:
        handle.write(blob)
    try:
        for round_ in range(options.repeat):
            bucket = "bench%d" % round_
            elapsed, result = run(KV, dict(servers=[url], name=bucket, entries=entries, timeout=30), workdir, env)
            assert len(result.get("put", [])) == options.keys, result
            times["kv write"].append(elapsed)
            elapsed, result = run(KV, dict(servers=[url], name=bucket, entries=entries, timeout=30), workdir, env)
            assert not result["changed"], result
            times["kv no-op"].append(elapsed)
            elapsed, result = run("kv_floor", dict(servers=[url], bucket=bucket), workdir, env)
            assert result.get("keys") == options.keys, result
            times["kv floor"].append(elapsed)
            times["kv raw"].append(raw_puts(url, "raw%d" % round_, entries))

            task = dict(servers=[url], name="obj%d" % round_, objects=[{"name": "blob", "src": blob_path}],
                        timeout=60)
            elapsed, result = run(OBJ, task, workdir, env)
            assert result.get("uploaded") == ["blob"], result
            times["obj upload"].append(elapsed)
            before = out_bytes(http)
            elapsed, result = run(OBJ, task, workdir, env)
            assert not result["changed"], result
            noop_bytes.append(out_bytes(http) - before)
            times["obj raw"].append(raw_object_put(url, "objraw%d" % round_, blob))
            for name in ("OBJ_obj%d" % round_, "OBJ_objraw%d" % round_):
                delete_stream(url, name)
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)
    version = subprocess.run([options.server, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    med = dict((name, statistics.median(values)) for name, values in times.items())
    mib = options.mib
    print("nats-server %s, %d keys, %d MiB object, median of %d" % (
        version.rsplit("v", 1)[-1], options.keys, mib, options.repeat))
    for name, value in med.items():
        print("  %-10s %8.3f s   runs: %s" % (name, value, " ".join("%.3f" % v for v in times[name])))
    print("kv no-op / floor      %.2fx (aim: at most 2x)" % (med["kv no-op"] / med["kv floor"]))
    print("kv write / raw loop   %.2fx (aim: at most 3x)" % (med["kv write"] / med["kv raw"]))
    print("object upload         %.1f MiB/s vs nats-py %.1f MiB/s = %.2fx (aim: at least 0.5x)" % (
        mib / med["obj upload"], mib / med["obj raw"], med["obj raw"] / med["obj upload"]))
    print("object no-op          %d bytes sent by the server at most (the object is %d)" % (
        max(noop_bytes), len(blob)))


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
