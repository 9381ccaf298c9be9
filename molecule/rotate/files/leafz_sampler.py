"""Samples the hub's /leafz every 0.2 s until STOP exists, then writes per leaf link
(remote server name and account) the longest time it was missing, as JSON to OUT."""
import json
import os
import sys
import time
import urllib.request

URL, STOP, OUT = sys.argv[1], sys.argv[2], sys.argv[3]
seen, first, gaps, samples = {}, None, {}, 0
started = time.monotonic()
while not os.path.exists(STOP) and time.monotonic() - started < 900:
    now = time.monotonic()
    try:
        with urllib.request.urlopen(URL, timeout=1) as reply:
            links = {"%s/%s" % (leaf.get("name"), leaf.get("account")) for leaf in json.load(reply).get("leafs") or []}
    except OSError:
        links = set()
    samples += 1
    if first is None:
        first = sorted(links)
    for link in links:
        gaps[link] = max(gaps.get(link, 0.0), now - seen.get(link, now))
        seen[link] = now
    time.sleep(0.2)
end = time.monotonic()
with open(OUT, "w") as handle:
    json.dump({"samples": samples, "at_start": first or [], "longest_gap": {k: round(v, 2) for k, v in gaps.items()},
               "last_seen_ago": {k: round(end - t, 2) for k, t in seen.items()}}, handle, indent=1)
