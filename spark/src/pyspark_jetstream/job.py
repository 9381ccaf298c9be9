"""jetstream-aggregate: edge telemetry from JetStream streams, aggregated per
site, metric and time window into Parquet.

    jetstream-aggregate --config /etc/jetstream-aggregate/job.yml
    spark-submit --master spark://master:7077 launcher.py --config job.yml
    jetstream-aggregate --check-config job.yml
    jetstream-aggregate --show /var/lib/jetstream-aggregate/output

Input: JSON messages {"site", "metric", "value", "timestamp"}. Invalid ones are
counted and kept in ``<output>/rejects`` with their stream, sequence, subject and the
reason. Aggregates (count, sum, min, max, avg, bytes, and the lag between edge
time and arrival in the stream read, in seconds) go to
``<output>/aggregates/date=YYYY-MM-DD/``. ``mode: batch`` reads what is new
and stops (a timer runs it), ``mode: streaming`` keeps running; both keep
their position in the checkpoint directory, so every message counts once.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import re
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
    try:
        text = opts.read_text(path, ConfigError)
    except UnicodeDecodeError as exc:
        raise ConfigError("%s is not a text file (UTF-8): %s" % (path, exc))
    try:
        import yaml

        data = yaml.safe_load(text)
    except Exception as exc:  # YAML's own errors say where
        raise ConfigError("%s is not YAML or JSON: %s" % (path, exc))
    return check_config(data, path)


def _unknown(section, allowed, where):
    extra = sorted(set(str(key) for key in section) - set(allowed))
    if extra:
        raise ConfigError("%s: unknown key(s) %s; known: %s" % (where, ", ".join(extra), ", ".join(allowed)))


def check_config(data, where="config"):
    """The configuration the run uses, each key checked with the rules the run applies to it; a ConfigError
    naming the key otherwise."""
    try:
        return _check_config(data, where)
    except opts.OptionError as exc:
        raise ConfigError(str(exc))


def _unset(value):
    return value is None or value == ""


def _shown(value):
    """How a message shows a value of the file: as YAML writes it, in brief."""
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _path(data, key, where):
    value = data[key]
    if not isinstance(value, str) or not value.strip():
        raise ConfigError("%s: %s: %s is not a directory path: give one, such as /var/lib/jetstream-aggregate/%s"
                          % (where, key, _shown(value), key))
    return value


def _duration(data, key, default, where):
    value = data.get(key)
    if _unset(value):
        value = default
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ConfigError("%s: %s: %s is not a duration (like 30s, 5m, 1h)" % (where, key, _shown(value)))
    seconds = opts.parse_duration(value, "%s: %s" % (where, key))
    # the aggregation counts windows in microseconds, Spark's trigger in milliseconds, both as 64-bit numbers
    if seconds * 1e6 < 1 or seconds * 1e6 >= 2 ** 63:
        raise ConfigError("%s: %s: %s is out of range (from 1 microsecond to thousands of years)"
                          % (where, key, _shown(value)))
    return seconds


def _whole(value, where, minimum=1):
    if isinstance(value, bool) or isinstance(value, float) and not value.is_integer():
        number = None
    else:
        try:
            number = int(str(value).strip()) if isinstance(value, (str, int, float)) else None
        except ValueError:
            number = None
    if number is None or number < minimum:
        raise ConfigError("%s: %s is not a whole number from %d" % (where, _shown(value), minimum))
    return number


def _flag(value, where):
    """'true' or 'false' (as the run reads the text) of a boolean option."""
    text = str(value).strip().lower()
    if text in ("true", "yes", "1", "on"):
        return "true"
    if text in ("false", "no", "0", "off"):
        return "false"
    raise ConfigError("%s: %s is not true or false" % (where, _shown(value)))


def _text(value, where, what="a single value"):
    """A single value of a section: text, or a number written as text."""
    if isinstance(value, bool):
        raise ConfigError("%s: %s is true or false to YAML, not %s (quote a word such as yes, no, on or off)"
                          % (where, _shown(value), what))
    if not isinstance(value, (str, int, float)):
        raise ConfigError("%s: %s is not %s" % (where, _shown(value), what))
    return str(value)


def _servers(value, where):
    """NATS URLs as the comma-separated text the run hands over, each checked as the connection reads it."""
    listed = value if isinstance(value, (list, tuple)) else [value]
    urls = []
    for i, url in enumerate(listed):
        label = "%s[%d]" % (where, i) if isinstance(value, (list, tuple)) else where
        for part in _text(url, label, "a NATS URL").split(","):
            if part.strip():
                urls.append(opts.check_server_url(part, label))
    if not urls:
        raise ConfigError("%s: %s names no server" % (where, _shown(value)))
    return ",".join(urls)


# data source options whose value is true or false; every other option takes one value (servers: a list too)
_FLAGS = ("tls_verify", "tls_handshake_first")


def _source_value(key, value, where):
    label = "%s: source: %s" % (where, key)
    if key == "servers":
        return _servers(value, label)
    if key == "stream" and isinstance(value, (list, tuple)):
        # regional streams read side by side
        return ",".join(_text(name, "%s[%d]" % (label, i), "a stream name") for i, name in enumerate(value))
    if key in _FLAGS:
        return _flag(value, label)
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()  # a time YAML read (start_time)
    return _text(value, label)


def source_options(source, where="config"):
    """Data source options (strings) of the ``source`` section, checked by the source itself."""
    options = {}
    for key, value in source.items():
        if key == "options":
            if _unset(value):
                continue
            if not isinstance(value, dict):
                raise ConfigError("%s: source: options: %s is not a mapping of data source options"
                                  % (where, _shown(value)))
            for name, item in value.items():
                if str(name).lower() == "json_schema":
                    raise ConfigError("%s: source: options: json_schema: the job reads its payloads as telemetry (%s)"
                                      % (where, telemetry.TELEMETRY_SCHEMA))
                if not _unset(item):
                    options[str(name)] = _source_value(str(name).lower(), item, where + ": source: options")
        elif not _unset(value):
            options[key] = _source_value(key, value, where)
    options["json_schema"] = telemetry.TELEMETRY_SCHEMA
    try:
        checked = opts.ReadOptions(options)
    except opts.OptionError as exc:
        raise ConfigError("%s: source: %s" % (where, exc))
    # the summary names the streams and falls back on the source's servers: as the reader takes them
    options["stream"] = ",".join(checked.streams)
    if not any(str(key).lower() == "servers" for key in options):
        options["servers"] = ",".join(checked.servers)
    return options


def _summary(value, source, where):
    if _unset(value) or value == {}:
        return {}
    where = where + ": summary"
    if not isinstance(value, dict):
        raise ConfigError("%s: %s is not a mapping: give at least the subject, such as {subject: analytics.summary}"
                          % (where, _shown(value)))
    _unknown(value, SUMMARY_KEYS, where)
    if _unset(value.get("subject")):
        raise ConfigError("%s needs a subject (where each micro-batch's summary is published)" % where)
    summary = {"subject": opts.check_subject(_text(value["subject"], where + ": subject", "a subject"),
                                             where + ": subject")}
    for key in ("creds", "nkey_seed", "user", "password", "token", "tls_ca", "tls_cert", "tls_key"):
        if not _unset(value.get(key)):
            summary[key] = _text(value[key], "%s: %s" % (where, key))
    if not _unset(value.get("servers")):
        summary["servers"] = _servers(value["servers"], where + ": servers")
    methods = [key for key in ("creds", "nkey_seed", "user", "token") if key in summary]
    if len(methods) > 1:
        raise ConfigError("%s: %s exclude each other" % (where, " and ".join(repr(m) for m in methods)))
    if "tls_key" in summary and "tls_cert" not in summary:
        raise ConfigError("%s: tls_key needs tls_cert" % where)
    if not _unset(value.get("tls_verify")):
        summary["tls_verify"] = _flag(value["tls_verify"], where + ": tls_verify")
    # the summary connects with TLS options only when a CA is given (here or in the source)
    ignored = [key for key in ("tls_cert", "tls_key", "tls_verify") if key in summary]
    if ignored and not summary.get("tls_ca") and not source.get("tls_ca"):
        raise ConfigError("%s: %s: TLS options take effect with a tls_ca (here, or in source)" % (where, ignored[0]))
    if not _unset(value.get("max_windows")):
        summary["max_windows"] = _whole(value["max_windows"], where + ": max_windows")
    return summary


# Spark's master URLs (SparkContext): local, local[N], local[*], local[N,F], local-cluster[N,C,M], spark://...,
# yarn, or another cluster manager's scheme://...
_MASTER = re.compile(r"^(local|yarn|local\[(\d+|\*)\]|local\[(\d+|\*)\s*,\s*\d+\]|"
                     r"local-cluster\[\s*\d+\s*,\s*\d+\s*,\s*\d+\s*\]|[a-z][a-z0-9+.-]*://\S+)$")


def _spark(value, where):
    if _unset(value) or value == {}:
        return {}
    where = where + ": spark"
    if not isinstance(value, dict):
        raise ConfigError("%s: %s is not a mapping of master, app_name and conf" % (where, _shown(value)))
    _unknown(value, SPARK_KEYS, where)
    spark = {}
    if not _unset(value.get("master")):
        master = _text(value["master"], where + ": master", "a master URL").strip()
        if not _MASTER.match(master):
            raise ConfigError("%s: master: %s is not a Spark master URL (like local[*], local[2] or "
                              "spark://master:7077)" % (where, _shown(value["master"])))
        spark["master"] = master
    if not _unset(value.get("app_name")):
        spark["app_name"] = _text(value["app_name"], where + ": app_name")
    conf = value.get("conf")
    if not _unset(conf) and conf != {}:
        if not isinstance(conf, dict):
            raise ConfigError("%s: conf: %s is not a mapping of Spark settings (such as {spark.executor.memory: 2g})"
                              % (where, _shown(conf)))
        spark["conf"] = {}
        for key, item in conf.items():
            if not isinstance(key, str) or not key.strip() or re.search(r"\s", key):
                raise ConfigError("%s: conf: %s is not the name of a Spark setting" % (where, _shown(key)))
            label = "%s: conf: %s" % (where, key)
            spark["conf"][key] = _flag(item, label) if isinstance(item, bool) else _text(item, label)
    return spark


def _check_config(data, where):
    if not isinstance(data, dict):
        raise ConfigError("%s: must be a mapping with source, output and checkpoint" % where)
    _unknown(data, TOP_KEYS, where)
    for key in ("source", "output", "checkpoint"):
        if _unset(data.get(key)):
            raise ConfigError("%s: %r is required" % (where, key))
    source = data["source"]
    if not isinstance(source, dict):
        raise ConfigError("%s: source must be a mapping (the stream to read and how), not %s" % (where, _shown(source)))
    _unknown(source, SOURCE_KEYS, where + ": source")
    mode = data.get("mode")
    mode = "batch" if _unset(mode) else mode
    if mode not in ("batch", "streaming"):
        raise ConfigError("%s: mode must be batch or streaming, not %s" % (where, _shown(mode)))
    config = {
        "output": _path(data, "output", where), "checkpoint": _path(data, "checkpoint", where), "mode": mode,
        "window": _duration(data, "window", "1m", where),
        "trigger_interval": _duration(data, "trigger_interval", "30s", where),
    }
    config["source_options"] = source_options(source, where)
    config["summary"] = _summary(data.get("summary"), config["source_options"], where)
    config["spark"] = _spark(data.get("spark"), where)
    return config


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
            per_stream = classified.groupBy("stream").agg(F.count(F.lit(1)).alias("messages"),
                                                          F.count("reason").alias("rejected"),
                                                          F.max("seq").alias("last_seq")).collect()
            counts = {"messages": sum(row["messages"] for row in per_stream),
                      "rejected": sum(row["rejected"] for row in per_stream),
                      "last_seq": max([row["last_seq"] for row in per_stream] or [0]),
                      "streams": {row["stream"]: row["last_seq"] for row in per_stream}}
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
        LOG.warning("batch %d: %d messages, %d rejected, through %s, %d windows updated in %.1fs",
                    batch_id, counts["messages"], counts["rejected"], through(counts["streams"]),
                    0 if touched is None else touched.num_rows, time.monotonic() - started)
        if self.config["summary"]:
            publish_summary(self.config, batch_id, counts, state, touched)


def through(streams):
    """How far a micro-batch read: 'sequence N' of one stream, 'a N, b M' of several."""
    if len(streams) == 1:
        return "sequence %d" % list(streams.values())[0]
    return ", ".join("%s %d" % (name, seq) for name, seq in sorted(streams.items()))


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
            "rejected": counts["rejected"], "through_seq": counts["last_seq"], "through": counts["streams"],
            "totals": state.get("totals"),
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
