"""Edge telemetry: which messages are valid, the aggregation per site,
metric and time window, and the output on disk.

Spark does the heavy part (reading, parsing, grouping) on the executors; the
aggregates and rejects of a micro-batch are small and come back to the
driver, which merges them into Parquet files partitioned by date. Each file
is replaced atomically and carries the (query, batch) it last took in, so a
micro-batch that Spark replays after a failure is not counted twice.
"""

from __future__ import annotations

import json
import os

TELEMETRY_SCHEMA = "site string, metric string, value double, timestamp timestamp"
REQUIRED = ("site", "metric", "value", "timestamp")
KEYS = ["site", "metric", "window_start"]
MARK_QUERY, MARK_BATCH = b"jetstream.query", b"jetstream.batch"


# --------------------------------------------------------------------------
# Spark side


def classify(df):
    """The batch with ``reason``: null for valid telemetry, else why not."""
    from pyspark.sql import functions as F

    reason = F.when(F.col("json_error").isNotNull(), F.col("json_error"))
    for name in REQUIRED:
        reason = reason.when(F.col("json." + name).isNull(), F.lit("missing field %r" % name))
    for name in ("site", "metric"):
        reason = reason.when(F.length(F.col("json." + name)) == 0, F.lit("empty field %r" % name))
    return df.withColumn("reason", reason)


def aggregate(valid, window_seconds):
    """Partial aggregates of valid telemetry per site, metric and window."""
    from pyspark.sql import functions as F

    width = int(window_seconds * 1000000)
    edge = F.unix_micros(F.col("json.timestamp"))
    lag = (F.unix_micros(F.col("timestamp")) - edge) / F.lit(1e6)
    return (valid
            .select(F.col("json.site").alias("site"), F.col("json.metric").alias("metric"),
                    F.timestamp_micros(F.floor(edge / F.lit(width)).cast("long") * F.lit(width)).alias("window_start"),
                    F.col("json.value").alias("value"), F.length("data").cast("long").alias("bytes"),
                    lag.alias("lag"), F.col("seq"))
            .groupBy(*KEYS)
            .agg(F.count(F.lit(1)).alias("count"), F.sum("value").alias("sum"), F.min("value").alias("min"),
                 F.max("value").alias("max"), F.sum("bytes").alias("bytes"), F.sum("lag").alias("lag_sum"),
                 F.min("lag").alias("lag_min"), F.max("lag").alias("lag_max"),
                 F.min("seq").alias("first_seq"), F.max("seq").alias("last_seq")))


def rejects(df):
    from pyspark.sql import functions as F

    return df.where(F.col("reason").isNotNull()).select("stream", "seq", "subject", "timestamp", "reason", "data")


# --------------------------------------------------------------------------
# driver side: merging partial aggregates into the output


def merge(parts, window_seconds):
    """One row per site, metric and window from partial aggregates (Arrow tables)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = pa.concat_tables([p.select(_PARTIAL) for p in parts if p is not None and p.num_rows],
                             promote_options="permissive") if any(
        p is not None and p.num_rows for p in parts) else None
    if table is None:
        return None
    grouped = table.group_by(KEYS).aggregate([
        ("count", "sum"), ("sum", "sum"), ("min", "min"), ("max", "max"), ("bytes", "sum"),
        ("lag_sum", "sum"), ("lag_min", "min"), ("lag_max", "max"), ("first_seq", "min"), ("last_seq", "max")])
    grouped = grouped.rename_columns([_RENAMES.get(n, n) for n in grouped.column_names])
    count = grouped["count"].cast(pa.float64())
    width = pa.scalar(int(window_seconds * 1000000), pa.int64())
    window_end = pc.add(grouped["window_start"].cast(pa.int64()), width).cast(grouped["window_start"].type)
    result = pa.table({
        "site": grouped["site"], "metric": grouped["metric"], "window_start": grouped["window_start"],
        "window_end": window_end, "count": grouped["count"], "sum": grouped["sum"], "min": grouped["min"],
        "max": grouped["max"], "avg": pc.divide(grouped["sum"], count), "bytes": grouped["bytes"],
        "lag_sum": grouped["lag_sum"], "lag_min": grouped["lag_min"], "lag_max": grouped["lag_max"],
        "lag_avg": pc.divide(grouped["lag_sum"], count), "first_seq": grouped["first_seq"],
        "last_seq": grouped["last_seq"]})
    return result.sort_by([(k, "ascending") for k in KEYS])


_PARTIAL = ["site", "metric", "window_start", "count", "sum", "min", "max", "bytes", "lag_sum", "lag_min",
            "lag_max", "first_seq", "last_seq"]
_RENAMES = {"count_sum": "count", "sum_sum": "sum", "min_min": "min", "max_max": "max", "bytes_sum": "bytes",
            "lag_sum_sum": "lag_sum", "lag_min_min": "lag_min", "lag_max_max": "lag_max",
            "first_seq_min": "first_seq", "last_seq_max": "last_seq"}


def dates_of(table, column):
    """{'YYYY-MM-DD': rows of that UTC date of ``column``}."""
    import pyarrow.compute as pc

    days = pc.strftime(table[column], format="%Y-%m-%d")
    return {day: table.filter(pc.equal(days, day)) for day in sorted(set(days.to_pylist()))}


def _marks(path):
    import pyarrow.parquet as pq

    try:
        meta = pq.read_schema(path).metadata or {}
    except (OSError, ValueError):
        return None, -1
    return meta.get(MARK_QUERY, b"").decode(), int(meta.get(MARK_BATCH, b"-1"))


def taken(path, query, batch):
    """True when the file already holds micro-batch ``batch`` of ``query``.
    Raises ValueError when another query wrote it (output and checkpoint
    belong together)."""
    if not os.path.exists(path):
        return False
    owner, last = _marks(path)
    if owner and owner != query:
        raise ValueError("%s was written by streaming query %s, the checkpoint belongs to query %s: use the output "
                         "with its own checkpoint, or start both anew" % (path, owner, query))
    return last >= batch


def write_atomic(table, path, query, batch):
    """Write a Parquet file next to ``path`` and move it into place."""
    import pyarrow.parquet as pq

    os.makedirs(os.path.dirname(path), exist_ok=True)
    metadata = dict(table.schema.metadata or {})
    metadata.update({MARK_QUERY: query.encode(), MARK_BATCH: str(batch).encode()})
    marked = table.replace_schema_metadata(metadata)
    temporary = "%s.tmp-%d" % (path, os.getpid())
    pq.write_table(marked, temporary)
    os.replace(temporary, path)


def apply_aggregates(output, partial, window_seconds, query, batch):
    """Merge a micro-batch's partial aggregates into ``output``/aggregates/date=*/.
    Returns the merged rows of the windows the batch touched."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    touched = []
    if partial is None or not partial.num_rows:
        return None
    for day, rows in dates_of(partial, "window_start").items():
        path = os.path.join(output, "aggregates", "date=%s" % day, "part-0.parquet")
        if taken(path, query, batch):
            continue
        existing = pq.read_table(path) if os.path.exists(path) else None
        merged = merge([existing, rows], window_seconds)
        write_atomic(merged, path, query, batch)
        keys = set(zip(*(rows[k].to_pylist() for k in KEYS)))
        mask = [key in keys for key in zip(*(merged[k].to_pylist() for k in KEYS))]
        touched.append(merged.filter(pa.array(mask)))
    return pa.concat_tables(touched) if touched else None


def apply_rejects(output, table, query, batch):
    """Rejected messages of a micro-batch, one file per date and batch (a replay rewrites the same file)."""
    if table is None or not table.num_rows:
        return
    for day, rows in dates_of(table, "timestamp").items():
        write_atomic(rows, os.path.join(output, "rejects", "date=%s" % day, "batch-%06d.parquet" % batch),
                     query, batch)


def update_state(output, query, batch, counts):
    """Running totals in ``output``/_state.json (also what deployments wait for)."""
    path = os.path.join(output, "_state.json")
    state = {}
    if os.path.exists(path):
        with open(path) as handle:
            state = json.load(handle)
        if state.get("query") not in (None, query):
            raise ValueError("%s belongs to streaming query %s, the checkpoint to %s: use the output with its own "
                             "checkpoint, or start both anew" % (path, state.get("query"), query))
        if state.get("batch", -1) >= batch:
            return state
    totals = state.get("totals") or {}
    for name, value in counts.items():
        if name == "last_seq":
            totals[name] = max(totals.get(name) or 0, value or 0)
        elif name == "streams":  # the last sequence read of each stream
            seen = totals.get(name) or {}
            totals[name] = dict(seen, **{stream: max(seen.get(stream) or 0, seq or 0) for stream, seq in value.items()})
        else:
            totals[name] = totals.get(name, 0) + value
    state = dict(query=query, batch=batch, totals=totals, last_batch=counts)
    temporary = path + ".tmp"
    with open(temporary, "w") as handle:
        json.dump(state, handle, indent=1, sort_keys=True)
    os.replace(temporary, path)
    return state


def mark_started(output, query):
    """The state of a query that has run but read nothing yet (an empty stream),
    so that a deployment waiting for ``_state.json`` sees the job running. Never
    replaces a state: a micro-batch that wrote one first wins."""
    path = os.path.join(output, "_state.json")
    if os.path.exists(path):
        return False
    os.makedirs(output, exist_ok=True)
    temporary = "%s.%d.tmp" % (path, os.getpid())
    with open(temporary, "w") as handle:
        totals = {"messages": 0, "rejected": 0, "valid": 0, "last_seq": 0, "streams": {}}
        json.dump(dict(query=query, batch=-1, totals=totals, last_batch=None), handle, indent=1, sort_keys=True)
    try:
        os.link(temporary, path)  # fails where update_state got there first
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(temporary)


def _dataset(output, kind):
    import pyarrow.dataset as ds

    path = os.path.join(output, kind)
    if not os.path.isdir(path):
        return None
    return ds.dataset(path, format="parquet", partitioning="hive").to_table()


def read_aggregates(output):
    """Every aggregate row of an output directory (for reports and checks)."""
    return _dataset(output, "aggregates")


def read_rejects(output):
    """Every rejected message of an output directory."""
    return _dataset(output, "rejects")


REPORT_COLUMNS = ("site", "metric", "windows", "count", "min", "max", "avg", "bytes", "lag_avg_s", "lag_max_s")


def report(output):
    """The aggregates of an output directory summed up per site and metric over all their windows (a list of
    dicts, REPORT_COLUMNS), and the job's totals from its state file (or None before the first run)."""
    table = read_aggregates(output)
    rows = {}
    for row in table.to_pylist() if table is not None else []:
        key = (row["site"], row["metric"])
        if key not in rows:
            rows[key] = {"site": row["site"], "metric": row["metric"], "windows": 0, "count": 0, "sum": 0.0,
                         "min": row["min"], "max": row["max"], "bytes": 0, "lag_sum": 0.0, "lag_max_s": row["lag_max"]}
        summed = rows[key]
        summed["windows"] += 1
        summed["count"] += row["count"]
        summed["sum"] += row["sum"]
        summed["bytes"] += row["bytes"]
        summed["lag_sum"] += row["lag_sum"]
        summed["min"] = min(summed["min"], row["min"])
        summed["max"] = max(summed["max"], row["max"])
        summed["lag_max_s"] = max(summed["lag_max_s"], row["lag_max"])
    out = []
    for key in sorted(rows):
        summed = rows[key]
        summed["avg"] = summed.pop("sum") / summed["count"]
        summed["lag_avg_s"] = summed.pop("lag_sum") / summed["count"]
        out.append(summed)
    state = None
    if os.path.exists(os.path.join(output, "_state.json")):
        with open(os.path.join(output, "_state.json")) as handle:
            state = json.load(handle)
    return out, state


def format_report(rows, state):
    """report()'s result as a text table."""
    def cell(value):
        return "%.2f" % value if isinstance(value, float) else str(value)

    lines = [list(REPORT_COLUMNS)] + [[cell(row[name]) for name in REPORT_COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(REPORT_COLUMNS))]
    text = ["  ".join(value.rjust(width) if i > 1 else value.ljust(width) for i, (value, width)
                      in enumerate(zip(line, widths))).rstrip() for line in lines]
    if state is not None and state.get("batch", -1) < 0:
        text.append("messages 0: the job runs and has read nothing yet")
    elif state is not None:
        totals = state.get("totals", {})
        text.append("messages %s, rejected %s (kept in rejects/), after micro-batch %s" % (
            totals.get("messages"), totals.get("rejected"), state.get("batch")))
    elif not rows:
        text.append("no output yet")
    return "\n".join(text)
