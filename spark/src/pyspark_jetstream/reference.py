"""The telemetry aggregation in plain Python (no Spark, no Arrow), to check
what a deployment wrote: ``compute(messages, window_seconds)``.

Messages are (seq, subject, arrival time in microseconds since the epoch,
payload bytes). Returns ({(site, metric, window_start_micros): row}, rejects)
where rejects is [(seq, subject, reason)].
"""

from __future__ import annotations

import datetime as dt
import json
import math

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _edge_micros(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(round(value * 1000000)) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.timezone.utc)
        delta = moment - _EPOCH
        return (delta.days * 86400 + delta.seconds) * 1000000 + delta.microseconds
    return None


def valid(payload):
    """(site, metric, value, edge micros) of valid telemetry, else None."""
    try:
        doc = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    site, metric, value = doc.get("site"), doc.get("metric"), doc.get("value")
    if not isinstance(site, str) or not site or not isinstance(metric, str) or not metric:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    edge = _edge_micros(doc.get("timestamp"))
    if edge is None:
        return None
    return site, metric, float(value), edge


def compute(messages, window_seconds):
    width = int(window_seconds * 1000000)
    rows, rejects = {}, []
    for seq, subject, arrival, payload in messages:
        parsed = valid(payload)
        if parsed is None:
            rejects.append((seq, subject))
            continue
        site, metric, value, edge = parsed
        key = (site, metric, edge // width * width)
        lag = (arrival - edge) / 1e6
        row = rows.setdefault(key, {"count": 0, "sum": 0.0, "min": value, "max": value, "bytes": 0,
                                    "lag_sum": 0.0, "lag_min": lag, "lag_max": lag})
        row["count"] += 1
        row["sum"] += value
        row["min"], row["max"] = min(row["min"], value), max(row["max"], value)
        row["bytes"] += len(payload)
        row["lag_sum"] += lag
        row["lag_min"], row["lag_max"] = min(row["lag_min"], lag), max(row["lag_max"], lag)
    for row in rows.values():
        row["avg"] = row["sum"] / row["count"]
        row["lag_avg"] = row["lag_sum"] / row["count"]
    return rows, rejects


def sample(count, start=0, now=None, sites=("spoke-1", "spoke-2"), spread=300):
    """(subject, payload) of edge telemetry as the edges send it, with a few
    invalid messages mixed in (a string value, a payload that is not JSON, a
    missing timestamp): for tests and demonstrations. Each timestamp is ``now``
    back-dated by up to ``spread`` - 1 seconds, so the messages fall into several
    windows; with ``spread=0`` every timestamp is ``now``, and the lag the job
    reports is the real time from the edge to the hub stream."""
    import time

    now = time.time() if now is None else now
    for number in range(start, start + count):
        site = sites[number % len(sites)]
        if number % 40 == 3:
            payload = json.dumps({"site": site, "metric": "temp", "value": "hot"})
        elif number % 40 == 5:
            payload = "garbage %d" % number
        elif number % 40 == 7:
            payload = json.dumps({"site": site, "metric": "temp", "value": 1.0})
        else:
            payload = json.dumps({"site": site, "metric": ("temp", "humidity")[number % 3 % 2],
                                  "value": (number * 7) % 101 - 20.5,
                                  "timestamp": now - (number % spread if spread else 0)})
        yield "telemetry.%s.m" % site, payload.encode()


def stream_messages(conn, stream, api="$JS.API"):
    """Every message of a stream as compute() takes them, read over an open
    ``_nats.Connection`` (the reference's own input, without Spark)."""
    from pyspark_jetstream._reader import RangeReader, ack_fields

    messages = []
    for chunk in RangeReader(conn, api, stream, 1, 10 ** 9).batches():
        for subject, reply, data in zip(chunk.subjects, chunk.replies, chunk.data):
            seq, _cseq, nanos, _pending = ack_fields(reply)
            messages.append((seq, subject.decode(), nanos // 1000, data))
    return messages
