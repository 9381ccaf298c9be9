"""jetstream-aggregate: edge telemetry from a JetStream stream, aggregated per
site, metric and time window into Parquet.

    jetstream-aggregate --config /etc/jetstream-aggregate/job.yml
    spark-submit --master spark://master:7077 launcher.py --config job.yml
    jetstream-aggregate --check-config job.yml
    jetstream-aggregate --show /var/lib/jetstream-aggregate/output

Input: JSON messages {"site", "metric", "value", "timestamp"}. Invalid ones are
counted and kept in ``<output>/rejects`` with their sequence, subject and the
reason. Aggregates (count, sum, min, max, avg, bytes, and the lag between edge
time and arrival in the stream read, in seconds) go to
``<output>/aggregates/date=YYYY-MM-DD/``. ``mode: batch`` reads what is new
and stops (a timer runs it), ``mode: streaming`` keeps running; both keep
their position in the checkpoint directory, so every message counts once.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

from pyspark_jetstream import _options as opts
from pyspark_jetstream import telemetry

LOG = logging.getLogger("jetstream-aggregate")

SOURCE_KEYS = ("servers", "stream", "domain", "api_prefix", "deliver_prefix", "filter_subject", "starting",
               "start_seq", "start_time", "partitions", "max_messages_per_trigger", "creds", "nkey_seed", "user",
               "password", "token", "tls_ca", "tls_cert", "tls_key", "tls_verify", "timeout", "options")
TOP_KEYS = ("source", "output", "checkpoint", "mode", "window", "trigger_interval", "summary", "spark")
SUMMARY_KEYS = ("subject", "servers", "creds", "nkey_seed", "user", "password", "token", "tls_ca", "tls_cert",
                "tls_key", "tls_verify", "max_windows")
SPARK_KEYS = ("master", "app_name", "conf")


class ConfigError(ValueError):
    """A bad job configuration, naming the key."""


def load_config(path):
    """The checked configuration of a YAML or JSON file."""
    text = opts.read_text(path, ConfigError)
    try:
        import yaml

        data = yaml.safe_load(text)
    except Exception as exc:  # YAML's own errors say where
        raise ConfigError("%s is not YAML or JSON: %s" % (path, exc))
    return check_config(data, path)


def _unknown(section, allowed, where):
    extra = sorted(set(section) - set(allowed))
    if extra:
        raise ConfigError("%s: unknown key(s) %s; known: %s" % (where, ", ".join(extra), ", ".join(allowed)))


def check_config(data, where="config"):
    try:
        return _check_config(data, where)
    except opts.OptionError as exc:
        raise ConfigError(str(exc))


def _check_config(data, where):
    if not isinstance(data, dict):
        raise ConfigError("%s: must be a mapping with source, output and checkpoint" % where)
    _unknown(data, TOP_KEYS, where)
    for key in ("source", "output", "checkpoint"):
        if not data.get(key):
            raise ConfigError("%s: %r is required" % (where, key))
    source = data["source"]
    if not isinstance(source, dict):
        raise ConfigError("%s: source must be a mapping" % where)
    _unknown(source, SOURCE_KEYS, where + ": source")
    config = {
        "output": str(data["output"]), "checkpoint": str(data["checkpoint"]),
        "mode": str(data.get("mode") or "batch"),
        "window": opts.parse_duration(data.get("window") or "1m", "%s: window" % where),
        "trigger_interval": opts.parse_duration(data.get("trigger_interval") or "30s", "%s: trigger_interval" % where),
        "summary": dict(data.get("summary") or {}), "spark": dict(data.get("spark") or {}),
    }
    if config["mode"] not in ("batch", "streaming"):
        raise ConfigError("%s: mode must be batch or streaming, not %r" % (where, config["mode"]))
    _unknown(config["summary"], SUMMARY_KEYS, where + ": summary")
    if config["summary"] and not config["summary"].get("subject"):
        raise ConfigError("%s: summary needs a subject" % where)
    _unknown(config["spark"], SPARK_KEYS, where + ": spark")
    config["source_options"] = source_options(source, where)
    return config


def source_options(source, where="config"):
    """Data source options (strings) of the ``source`` section, checked by the source itself."""
    options = {}
    for key, value in source.items():
        if key == "options":
            options.update({str(k): v for k, v in (value or {}).items()})
        elif value is not None and value != "":
            options[key] = value
    options = {k: ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v).lower()
               if isinstance(v, bool) else str(v) for k, v in options.items()}
    options["json_schema"] = telemetry.TELEMETRY_SCHEMA
    try:
        opts.ReadOptions(options)
    except opts.OptionError as exc:
        raise ConfigError("%s: source: %s" % (where, exc))
    return options


# --------------------------------------------------------------------------
# running


def session(config):
    from pyspark.sql import SparkSession

    spark_conf = config["spark"]
    builder = SparkSession.builder.appName(spark_conf.get("app_name") or "jetstream-aggregate")
    # under spark-submit (which starts the JVM and says so in PYSPARK_GATEWAY_PORT) its --master rules
    if spark_conf.get("master") and "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = builder.master(spark_conf["master"])
    # aggregates are small: Spark's 200 shuffle partitions (adaptive execution is off in streaming) cost seconds
    builder = (builder.config("spark.sql.session.timeZone", "UTC").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4"))
    for key, value in (spark_conf.get("conf") or {}).items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


class BatchWriter(object):
    """foreachBatch: classify, aggregate, merge into the output, publish the summary."""

    def __init__(self, config):
        self.config = config
        self.output = config["output"]
        self._query = None

    def query_id(self):
        if self._query is None:
            with open(os.path.join(self.config["checkpoint"], "metadata")) as handle:
                self._query = json.load(handle)["id"]
        return self._query

    def __call__(self, df, batch_id):
        from pyspark.sql import functions as F

        started = time.monotonic()
        query = self.query_id()
        classified = telemetry.classify(df).persist()
        try:
            counts_row = classified.agg(F.count(F.lit(1)).alias("messages"),
                                        F.count("reason").alias("rejected"),
                                        F.max("seq").alias("last_seq")).collect()[0]
            counts = {"messages": counts_row["messages"], "rejected": counts_row["rejected"],
                      "last_seq": counts_row["last_seq"] or 0}
            if not counts["messages"]:
                return
            partial = telemetry.aggregate(classified.where(F.col("reason").isNull()), self.config["window"]).toArrow()
            rejected = telemetry.rejects(classified).toArrow() if counts["rejected"] else None
        finally:
            classified.unpersist()
        telemetry.apply_rejects(self.output, rejected, query, batch_id)
        touched = telemetry.apply_aggregates(self.output, partial, self.config["window"], query, batch_id)
        counts["valid"] = counts["messages"] - counts["rejected"]
        state = telemetry.update_state(self.output, query, batch_id, counts)
        LOG.warning("batch %d: %d messages, %d rejected, through sequence %d, %d windows updated in %.1fs",
                    batch_id, counts["messages"], counts["rejected"], counts["last_seq"],
                    0 if touched is None else touched.num_rows, time.monotonic() - started)
        if self.config["summary"]:
            publish_summary(self.config, batch_id, counts, state, touched)


def summary_message(config, batch_id, counts, state, touched):
    """The JSON summary of one micro-batch."""
    limit = int(config["summary"].get("max_windows") or 500)
    windows = []
    if touched is not None:
        for row in touched.slice(0, limit).to_pylist():
            windows.append({"site": row["site"], "metric": row["metric"],
                            "window_start": opts.rfc3339(row["window_start"]), "count": row["count"],
                            "min": row["min"], "max": row["max"], "avg": row["avg"], "bytes": row["bytes"],
                            "lag_avg_s": row["lag_avg"], "lag_max_s": row["lag_max"]})
    return {"stream": config["source_options"]["stream"], "batch": batch_id, "messages": counts["messages"],
            "rejected": counts["rejected"], "through_seq": counts["last_seq"], "totals": state.get("totals"),
            "windows": windows, "windows_truncated": touched is not None and touched.num_rows > limit}


def publish_summary(config, batch_id, counts, state, touched):
    from pyspark_jetstream._nats import Connection, NatsError

    summary = config["summary"]
    source = config["source_options"]
    tls = None
    if summary.get("tls_ca") or source.get("tls_ca"):
        tls = {"ca": summary.get("tls_ca") or source.get("tls_ca"), "cert": summary.get("tls_cert") or source.get(
            "tls_cert"), "key": summary.get("tls_key") or source.get("tls_key"),
            "verify": str(summary.get("tls_verify", source.get("tls_verify", "true"))).lower() != "false"}
    auth = {k: summary.get(k) for k in ("creds", "nkey_seed", "user", "password", "token") if summary.get(k)}
    if not auth:
        auth = {k: source.get(k) for k in ("creds", "nkey_seed", "user", "password", "token") if source.get(k)}
    payload = json.dumps(summary_message(config, batch_id, counts, state, touched)).encode()
    try:
        with Connection(summary.get("servers") or source["servers"], tls=tls, **auth) as conn:
            conn.publish(summary["subject"], payload)
            conn.flush()
    except NatsError as exc:
        # the output is written; a summary that did not go out is reported, not fatal
        LOG.error("summary of batch %d not published to %s: %s", batch_id, summary["subject"], exc)


def run(config, once=False, spark=None):
    """Run the query until it ends (batch) or forever (streaming). A given
    ``spark`` session is used and left running."""
    own = spark is None
    spark = spark or session(config)
    reader = spark.readStream.format("jetstream")
    for key, value in config["source_options"].items():
        reader = reader.option(key, value)
    writer = (reader.load().writeStream.foreachBatch(BatchWriter(config))
              .option("checkpointLocation", config["checkpoint"]).queryName("jetstream_aggregate"))
    if config["mode"] == "batch" or once:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime="%d seconds" % max(1, int(config["trigger_interval"])))
    query = writer.start()
    try:
        # once the first trigger is done (or the query is), a state file says the job
        # runs, also when the stream had nothing to read
        while not query.awaitTermination(1) and query.lastProgress is None:
            pass
        telemetry.mark_started(config["output"], query.id)
        query.awaitTermination()
    finally:
        if query.isActive:
            query.stop()
        if own:
            spark.stop()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="jetstream-aggregate", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--config", help="the job's YAML or JSON configuration")
    parser.add_argument("--check-config", metavar="FILE", help="check a configuration file and exit")
    parser.add_argument("--once", action="store_true", help="streaming mode too: read what is there, then stop")
    parser.add_argument("--show", metavar="OUTPUT", help="print the aggregates of an output directory per site and "
                        "metric (no Spark needed) and exit")
    args = parser.parse_args(argv)
    if args.show:
        print(telemetry.format_report(*telemetry.report(args.show)))
        return 0
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    try:
        if args.check_config:
            load_config(args.check_config)
            print("%s: ok" % args.check_config)
            return 0
        if not args.config:
            parser.error("--config is required")
        config = load_config(args.config)
    except ConfigError as exc:
        print("jetstream-aggregate: %s" % exc, file=sys.stderr)
        return 2
    run(config, once=args.once)
    return 0


if __name__ == "__main__":
    sys.exit(main())
