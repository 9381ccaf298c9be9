"""Edge telemetry for the spark scenario: messages from
pyspark_jetstream.reference.sample, each published at its own site's server
(--edges SITE=URL,...) with the writers' creds; waits until the hub stream has
sourced them all and (--report) until the job's summary says they are in the
Parquet output, and writes the timings."""

import argparse
import json
import sys
import time

from pyspark_jetstream import reference
from pyspark_jetstream._jetstream import JetStream
from pyspark_jetstream._nats import Connection

HUB_STREAM = "telemetry"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hub", required=True, help="a hub server's URL")
    parser.add_argument("--edges", required=True, help="SITE=URL of each site's server, comma separated")
    parser.add_argument("--creds", required=True, help="creds of a user of the writers' account")
    parser.add_argument("--ca", help="the CA to verify the servers with")
    parser.add_argument("--reader-creds", help="creds of the job's user, to hear its summary")
    parser.add_argument("--summary", default="analytics.summary")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--report", help="wait for the job's summary and write the timing here (JSON)")
    args = parser.parse_args()
    tls = {"ca": args.ca} if args.ca else None
    edges = dict(edge.split("=", 1) for edge in args.edges.split(","))
    messages = {site: [] for site in edges}
    for subject, payload in reference.sample(args.count, args.start, sites=tuple(sorted(edges))):
        messages[subject.split(".")[1]].append((subject, payload))

    with Connection([args.hub], creds=args.creds, timeout=10, tls=tls) as hub:
        def hub_count():
            return JetStream(hub).stream_info(HUB_STREAM)["state"]["messages"]

        expected = hub_count() + args.count
        listener = None
        if args.report:
            listener = Connection([args.hub], creds=args.reader_creds, timeout=10, tls=tls).connect()
            inbox = listener.subscribe(args.summary)
            listener.flush()
        started = time.time()
        for site, url in sorted(edges.items()):
            with Connection([url], creds=args.creds, timeout=10, tls=tls) as edge:
                edge.publish_acked(messages[site])
        published = time.time()
        deadline = time.monotonic() + 180
        while hub_count() < expected:
            if time.monotonic() > deadline:
                sys.exit("the hub stream did not source all messages (%d of %d)" % (hub_count(), expected))
            time.sleep(0.05)
        sourced = time.time()
    result = {"messages": args.count, "publish_s": round(published - started, 3),
              "sourced_after_last_publish_s": round(sourced - published, 3)}
    if listener is not None:
        try:  # not `with`: entering connects anew, without the subscription
            while True:
                frame = listener.next_frame(timeout=max(1, deadline - time.monotonic()))
                if frame.sid == inbox and json.loads(frame.payload)["totals"]["messages"] >= expected:
                    break
        finally:
            listener.close()
        done = time.time()
        result.update(parquet_after_last_publish_s=round(done - published, 3),
                      parquet_after_first_publish_s=round(done - started, 3))
        with open(args.report, "w") as handle:
            json.dump(result, handle)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
