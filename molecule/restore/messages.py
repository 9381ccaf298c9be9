# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Publish a site's readings and count what a stream holds, for the disaster-recovery run.

    messages.py publish --url URL --ca CA --subject SUBJECT --count N --text TEXT
    messages.py count   --url URL --ca CA --domain DOMAIN --stream STREAM [--expect N] [--timeout S]

``publish`` sends N messages ("TEXT <i>") through JetStream, each acknowledged before the next.
``count`` waits until the stream holds --expect messages (or the timeout passes, or holds any when
--expect is not given), waits two seconds more to see that nothing else comes, and prints
{"messages": n, "texts": {TEXT: how many}} as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import time


async def connect(url, ca):
    import nats

    return await nats.connect(servers=[url], connect_timeout=5, tls=ssl.create_default_context(cafile=ca),
                              name="dr-run")


async def publish(args):
    nc = await connect(args.url, args.ca)
    js = nc.jetstream()
    for i in range(args.count):
        await js.publish(args.subject, ("%s %d" % (args.text, i)).encode(), timeout=10)
    await nc.close()
    print(json.dumps({"published": args.count}))


async def count(args):
    nc = await connect(args.url, args.ca)
    js = nc.jetstream(domain=args.domain)
    deadline = time.monotonic() + args.timeout
    while True:
        info = await js.stream_info(args.stream)
        held = info.state.messages
        if (held == args.expect if args.expect is not None else held > 0) or time.monotonic() > deadline:
            break
        await asyncio.sleep(1)
    await asyncio.sleep(2)
    info = await js.stream_info(args.stream)
    texts = {}
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        try:
            msg = await js.get_msg(args.stream, seq)
        except Exception:  # a deleted sequence
            continue
        text = msg.data.decode().rsplit(" ", 1)[0]
        texts[text] = texts.get(text, 0) + 1
    await nc.close()
    print(json.dumps({"messages": info.state.messages, "last_seq": info.state.last_seq, "texts": texts}))


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("publish")
    p.add_argument("--url", required=True)
    p.add_argument("--ca", required=True)
    p.add_argument("--subject", required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--text", required=True)
    c = sub.add_parser("count")
    c.add_argument("--url", required=True)
    c.add_argument("--ca", required=True)
    c.add_argument("--domain", required=True)
    c.add_argument("--stream", required=True)
    c.add_argument("--expect", type=int)
    c.add_argument("--timeout", type=float, default=90)
    args = parser.parse_args()
    asyncio.run(publish(args) if args.command == "publish" else count(args))


if __name__ == "__main__":
    main()
