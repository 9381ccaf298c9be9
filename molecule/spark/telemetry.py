"""Edge telemetry for the spark scenario: the streams (--setup), messages from
pyspark_jetstream.reference.sample, and (--report) the time from publishing
to the job's summary saying the messages are in the Parquet output."""

import argparse
import json
import sys
import time

from pyspark_jetstream import reference
from pyspark_jetstream._jetstream import JetStream
from pyspark_jetstream._nats import Connection

SITES = ("spoke-1", "spoke-2")


def hub_count(conn):
    return JetStream(conn).stream_info("telemetry")["state"]["messages"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--setup", action="store_true")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--report", help="wait for the job's summary and write the timing here (JSON)")
    args = parser.parse_args()
    with Connection([args.url], timeout=10) as conn:
        js = JetStream(conn)
        if args.setup:
            for site in SITES:
                js.call("STREAM.CREATE.%s" % site, {"name": site, "subjects": ["telemetry.%s.>" % site],
                                                     "storage": "file"})
            js.call("STREAM.CREATE.telemetry", {"name": "telemetry", "storage": "file",
                                                 "sources": [{"name": s} for s in SITES]})
        expected = hub_count(conn) + args.count
        if args.report:
            inbox = conn.subscribe("analytics.summary")
            conn.flush()
        started = time.time()
        conn.publish_acked(reference.sample(args.count, args.start, sites=SITES))
        published = time.time()
        deadline = time.monotonic() + 120
        while hub_count(conn) < expected:
            if time.monotonic() > deadline:
                sys.exit("the hub stream did not source all messages")
            time.sleep(0.05)
        sourced = time.time()
        result = {"messages": args.count, "publish_s": round(published - started, 3),
                  "sourced_s": round(sourced - published, 3)}
        if args.report:
            while True:
                frame = conn.next_frame(timeout=max(1, deadline - time.monotonic()))
                if frame.sid == inbox and json.loads(frame.payload)["totals"]["messages"] >= expected:
                    break
            done = time.time()
            result.update(parquet_after_last_publish_s=round(done - published, 3),
                          parquet_after_first_publish_s=round(done - started, 3))
            with open(args.report, "w") as handle:
                json.dump(result, handle)
        print(json.dumps(result))


if __name__ == "__main__":
    main()
