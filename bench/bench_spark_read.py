"""Read throughput of the Spark data source `jetstream` against the fastest
reader on this machine, measured in the same run.

Fills a stream with --messages messages of ~88 bytes (file storage) on a
nats-server started here (or uses --servers), then, interleaved --repeat
times:
  go-pull      nats.go, ephemeral pull consumer without acks, Fetch(5000)
  go-ordered   nats.go's ordered push consumer
  nats-py      nats-py's ordered push consumer with a callback
  reader       this package's range reader in one process, into Arrow (no Spark)
  spark-N      spark.read.format("jetstream") with N partitions, every column
               materialised (write.format("noop")), Spark started and warm
and prints medians in messages per second and the ratio of each to the
fastest reference (the better of the Go readers).

The Go reader (bench/jetstream_reader.go) is built here at run time from
Debian's golang-go and golang-github-nats-io-go-nats-dev (GOPATH mode).

    .venv/bin/python bench/bench_spark_read.py                      # local[2], 1M messages
    BENCH_DRIVER_HOST=<this host on the lab network> .venv/bin/python bench/bench_spark_read.py \
        --master spark://<master>:7077 --servers nats://<lab host>:4222 [--creds FILE] \
        --executor-python /opt/nats-edge-spark/venv/bin/python [--go-reader BUILT_READER]

bench/README.md shows how to run it on the hub of `make demo`'s lab.
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

HERE = os.path.dirname(os.path.abspath(__file__))
NATS_SERVER = os.path.join(os.path.dirname(sys.executable), "nats-server")
PAYLOAD = b'{"site":"spoke-1","metric":"temperature","value":21.5,"timestamp":"2026-11-23T10:00:00Z"}'[:88]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(workdir):
    port = free_port()
    conf = os.path.join(workdir, "bench.conf")
    with open(conf, "w") as handle:
        handle.write('listen: "127.0.0.1:%d"\njetstream { store_dir: "%s", max_memory_store: 268435456, '
                     'max_file_store: 8589934592 }\n' % (port, os.path.join(workdir, "js")))
    proc = subprocess.Popen([NATS_SERVER, "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = "nats://127.0.0.1:%d" % port
    for _attempt in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, url
        except OSError:
            time.sleep(0.1)
    raise SystemExit("nats-server did not start")


def fill(url, stream, count, creds=None):
    from pyspark_jetstream._jetstream import JetStream
    from pyspark_jetstream._nats import Connection

    with Connection([url], creds=creds, timeout=30) as conn:
        js = JetStream(conn)
        try:
            state = js.stream_info(stream)["state"]
            if state["messages"] == count:
                return
            js.call("STREAM.DELETE.%s" % stream)
        except Exception:
            pass
        js.call("STREAM.CREATE.%s" % stream, {"name": stream, "subjects": [stream + ".>"], "storage": "file"})
        started = time.perf_counter()
        conn.publish_acked(((stream + ".s%d" % (n % 10), PAYLOAD) for n in range(count)), window=1000)
        print("filled %d messages in %.1fs" % (count, time.perf_counter() - started), flush=True)


def build_go(workdir):
    if not shutil.which("go"):
        raise SystemExit("go is missing: apt-get install golang-go golang-github-nats-io-go-nats-dev (make bench does)")
    binary = os.path.join(workdir, "jetstream_reader")
    source = os.path.join(workdir, "jetstream_reader.go")
    shutil.copy(os.path.join(HERE, "jetstream_reader.go"), source)
    env = dict(os.environ, GOPATH="/usr/share/gocode", GO111MODULE="off", GOCACHE=os.path.join(workdir, "gocache"))
    subprocess.run(["go", "build", "-o", binary, source], check=True, env=env, cwd=workdir)
    return binary


def go_reader(binary, url, stream, mode, creds=None):
    out = subprocess.run([binary, "-url", url, "-stream", stream, "-mode", mode] + (["-creds", creds] if creds else []),
                         check=True, capture_output=True, text=True).stdout
    result = json.loads(out)
    return result["messages"], result["seconds"]


def nats_py_reader(url, stream, count, creds=None):
    import nats

    async def run():
        nc = await nats.connect(url, user_credentials=creds)
        js = nc.jetstream()
        done = asyncio.get_running_loop().create_future()
        seen = [0]

        async def on_message(msg):
            seen[0] += 1
            if seen[0] == count and not done.done():
                done.set_result(None)
        started = time.perf_counter()
        sub = await js.subscribe(stream + ".>", cb=on_message, ordered_consumer=True)
        await asyncio.wait_for(done, 300)
        elapsed = time.perf_counter() - started
        await sub.unsubscribe()
        await nc.close()
        return seen[0], elapsed
    return asyncio.run(run())


def own_reader(url, stream, creds=None):
    import pyarrow as pa

    from pyspark_jetstream._arrow import record_batch
    from pyspark_jetstream._nats import Connection
    from pyspark_jetstream._reader import RangeReader
    from pyspark_jetstream.source import base_schema
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(base_schema(), timezone="UTC")
    started = time.perf_counter()
    rows = 0
    with Connection([url], creds=creds) as conn:
        for chunk in RangeReader(conn, "$JS.API", stream, 1, 10 ** 12).batches():
            rows += record_batch(chunk, schema, stream=stream).num_rows
    assert isinstance(schema, pa.Schema)
    return rows, time.perf_counter() - started


def spark_session(master, executor_python=None):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName("bench-jetstream-read").config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    if executor_python:
        # the workers' Python with the data source (the spark_runtime role's virtualenv)
        builder = builder.config("spark.pyspark.python", executor_python).config(
            "spark.pyspark.driver.python", sys.executable)
    if os.environ.get("BENCH_DRIVER_HOST"):
        builder = builder.config("spark.driver.host", os.environ["BENCH_DRIVER_HOST"])
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def spark_reader(spark, url, stream, partitions, creds=None):
    started = time.perf_counter()
    reader = spark.read.format("jetstream").option("servers", url).option("partitions", str(partitions))
    if creds:
        reader = reader.option("creds", creds)
    reader.load(stream).write.format("noop").mode("overwrite").save()
    return None, time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--messages", type=int, default=1000000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--partitions", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--servers", help="use this server (and its stream) instead of starting one")
    parser.add_argument("--executor-python", help="Python of the executors (a cluster's), default this one")
    parser.add_argument("--stream", default="bench")
    parser.add_argument("--creds", help="creds of a user of an account with JetStream (servers in operator mode)")
    parser.add_argument("--go-reader", help="a built bench/jetstream_reader.go (where there is no Go toolchain)")
    parser.add_argument("--skip", nargs="*", default=[], help="readers to leave out (go-pull, nats-py, ...)")
    args = parser.parse_args()

    workdir = tempfile.mkdtemp(prefix="bench-spark-")
    server = None
    try:
        if args.servers:
            url = args.servers
        else:
            server, url = start_server(workdir)
        fill(url, args.stream, args.messages, args.creds)
        readers = {}
        if not {"go-pull", "go-ordered"} <= set(args.skip):
            binary = args.go_reader or build_go(workdir)
            for mode in ("pull", "ordered"):
                if "go-" + mode not in args.skip:
                    readers["go-" + mode] = lambda mode=mode: go_reader(binary, url, args.stream, mode, args.creds)
        if "nats-py" not in args.skip:
            readers["nats-py"] = lambda: nats_py_reader(url, args.stream, args.messages, args.creds)
        if "reader" not in args.skip:
            readers["reader"] = lambda: own_reader(url, args.stream, args.creds)
        spark = spark_session(args.master, args.executor_python)
        spark_reader(spark, url, args.stream, max(args.partitions), args.creds)  # warm: JVM, Python workers, imports
        for partitions in args.partitions:
            readers["spark-%d" % partitions] = lambda p=partitions: spark_reader(spark, url, args.stream, p, args.creds)

        rates = {name: [] for name in readers}
        for round_number in range(args.repeat):
            for name, read in readers.items():
                count, seconds = read()
                if count is not None and count != args.messages:
                    raise SystemExit("%s read %d messages, not %d" % (name, count, args.messages))
                rates[name].append(args.messages / seconds)
            latest = ", ".join("%s %.0fk" % (n, r[-1] / 1000) for n, r in rates.items())
            print("round %d: %s" % (round_number + 1, latest), flush=True)
        spark.stop()
        medians = {name: statistics.median(values) for name, values in rates.items()}
        references = [(medians[n], n) for n in medians if n.startswith("go-")] or [(medians[n], n) for n in medians]
        reference = max(references)
        print("\n%d messages of %d bytes, master %s, median of %d" % (args.messages, len(PAYLOAD), args.master,
                                                                      args.repeat))
        print("%-12s %10s %8s" % ("reader", "msg/s", "ratio"))
        for name, rate in medians.items():
            print("%-12s %10.0f %8.2f" % (name, rate, rate / reference[0]))
        print("ratios against %s (the fastest reference in this run)" % reference[1])
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
