"""The Spark data source ``jetstream``: a JetStream stream as a table.

Batch reads split the stream's sequence range into partitions read in
parallel. Streaming queries use stream sequences as offsets, so Spark's
checkpoint alone says what was read: exactly once, nothing kept in NATS.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import (BinaryType, BooleanType, DateType, DoubleType, FloatType, IntegerType, LongType,
                               MapType, StringType, StructField, StructType, TimestampType)

from pyspark_jetstream import _options as opts

_SPARK_TYPES = {"string": StringType, "boolean": BooleanType, "int": IntegerType, "long": LongType,
                "float": FloatType, "double": DoubleType, "timestamp": TimestampType, "date": DateType}


def base_schema():
    return StructType([
        StructField("seq", LongType(), False),
        StructField("subject", StringType(), False),
        StructField("timestamp", TimestampType(), False),
        StructField("headers", MapType(StringType(), StringType(), False), True),
        StructField("data", BinaryType(), True),
    ])


def schema_for(options):
    """The table's schema: the message columns, and with ``json_schema`` the
    struct column ``json`` and ``json_error`` (why a payload did not parse)."""
    schema = base_schema()
    if options.json_schema:
        schema = schema.add("json", StructType([StructField(name, _SPARK_TYPES[kind](), True)
                                                for name, kind in options.json_schema]), True)
        schema = schema.add("json_error", StringType(), True)
    return schema


class SequenceRange(InputPartition):
    """Stream sequences ``first``..``last`` (inclusive)."""

    def __init__(self, first, last):
        super().__init__((first, last))
        self.first, self.last = first, last


class Connector(object):
    """How to reach the stream, picklable for the executors. Secrets and TLS
    files are read where the query is planned and travel with the task, so
    executors on other hosts need no copies of them."""

    def __init__(self, options):
        from pyspark_jetstream import _jetstream, _nats

        self.servers = options.servers
        self.api = _jetstream.api_prefix(options.domain, options.api_prefix)
        self.timeout = options.timeout
        self.creds = _nats.read_creds(options.creds) if options.creds else None
        self.nkey_seed = _nats.read_seed(options.nkey_seed) if options.nkey_seed else None
        self.user, self.password, self.token = options.user, options.password, options.token
        self.tls = None
        if options.tls is not None:
            tls = dict(verify=options.tls["verify"], handshake_first=options.tls["handshake_first"])
            for key, path in (("cadata", options.tls["ca"]), ("certdata", options.tls["cert"]),
                              ("keydata", options.tls["key"])):
                if path:
                    tls[key] = _read(path, "tls file")
            self.tls = tls

    def __repr__(self):
        # never the secrets, also not in plans or logs
        return "Connector(servers=%r, api=%r)" % (self.servers, self.api)

    def connect(self):
        from pyspark_jetstream._nats import Connection

        return Connection(self.servers, creds=self.creds, nkey_seed=self.nkey_seed, user=self.user,
                          password=self.password, token=self.token, tls=self.tls, timeout=self.timeout).connect()

    def jetstream(self, conn):
        from pyspark_jetstream._jetstream import JetStream

        return JetStream(conn, self.api, timeout=self.timeout)


def _read(path, what):
    try:
        with open(path) as handle:
            return handle.read()
    except OSError as exc:
        raise opts.OptionError("jetstream: cannot read %s %s: %s" % (what, path, exc.strerror or exc))


class _Reading(object):
    """What batch and streaming readers share: the stream's bounds and reading a range."""

    def __init__(self, options, schema):
        self.options = options
        self.schema = schema
        self.connector = Connector(options)

    def _deliver_subject(self):
        return "%s.probe" % self.options.deliver_prefix

    def bounds(self):
        """(first, last) sequence of the stream now."""
        with self.connector.connect() as conn:
            js = self.connector.jetstream(conn)
            return js.bounds(self.options.stream, self.options.filter_subject, self._deliver_subject())

    def start_seq(self, first, last):
        """Where a new read starts, from ``starting``, ``start_seq`` or ``start_time``."""
        options = self.options
        if options.start_seq:
            return options.start_seq
        if options.start_time:
            with self.connector.connect() as conn:
                js = self.connector.jetstream(conn)
                return js.seq_at_time(options.stream, opts.rfc3339(options.start_time), options.filter_subject,
                                      self._deliver_subject())
        return last + 1 if options.starting == "latest" else first

    def plan(self, first, last):
        return [SequenceRange(a, b) for a, b in opts.split_range(
            first, last, opts.partition_count(self.options, first, last))]

    def read(self, partition):
        import pyarrow as pa  # noqa: F401 (fail early and clearly when it is missing)
        from pyspark.sql.pandas.types import to_arrow_schema

        from pyspark_jetstream._arrow import record_batch
        from pyspark_jetstream._reader import RangeReader

        schema = to_arrow_schema(self.schema, timezone="UTC")
        extra = _json_columns(self.options.json_schema) if self.options.json_schema else None
        options = self.options
        with self.connector.connect() as conn:
            reader = RangeReader(conn, self.connector.api, options.stream, partition.first, partition.last,
                                 filter_subject=options.filter_subject, deliver_prefix=options.deliver_prefix,
                                 batch_rows=options.batch_rows, heartbeat=options.heartbeat,
                                 timeout=options.timeout)
            for chunk in reader.batches():
                yield record_batch(chunk, schema, extra)


def _json_columns(fields):
    def extra(chunk, columns, schema):
        import pyarrow as pa

        values, errors = opts.parse_json_rows(chunk.data, fields)
        struct_type = schema.field("json").type
        children = [pa.array(values[f.name], f.type if f.type.id != pa.timestamp("us").id else pa.int64())
                    .cast(f.type) for f in struct_type]
        mask = pa.array([e is not None for e in errors], pa.bool_())
        return {"json": pa.StructArray.from_arrays(children, fields=list(struct_type), mask=mask),
                "json_error": pa.array(errors, pa.string())}
    return extra


class JetStreamBatchReader(_Reading, DataSourceReader):
    def partitions(self):
        first, last = self.bounds()
        start = max(first, self.start_seq(first, last))
        end = min(last, self.options.end_seq) if self.options.end_seq else last
        return self.plan(start, end)


class JetStreamStreamReader(_Reading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are {"stream": name, "seq": next sequence to read}."""

    def __init__(self, options, schema):
        super().__init__(options, schema)
        self.cap = None

    def initialOffset(self):
        first, last = self.bounds()
        return opts.offset(self.options.stream, max(first, self.start_seq(first, last)))

    def getDefaultReadLimit(self):
        if self.options.max_messages_per_trigger:
            return ReadMaxRows(self.options.max_messages_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self):
        # what is there now, and not what arrives while the query catches up
        self.cap = self.bounds()[1] + 1

    def latestOffset(self, start, limit):
        next_seq = opts.offset_seq(start, self.options.stream)
        _first, last = self.bounds()
        most = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return opts.offset(self.options.stream, opts.end_offset(next_seq, last, most, self.cap))

    def reportLatestOffset(self):
        return opts.offset(self.options.stream, self.bounds()[1] + 1)

    def partitions(self, start, end):
        first = opts.offset_seq(start, self.options.stream)
        stop = opts.offset_seq(end, self.options.stream)
        return self.plan(first, stop - 1)

    def commit(self, end):
        """Nothing to do: the position lives in Spark's checkpoint, not in NATS."""


class JetStreamDataSource(DataSource):
    """``spark.read.format("jetstream")`` and ``spark.readStream.format("jetstream")``."""

    @classmethod
    def name(cls):
        return "jetstream"

    def _options(self):
        return opts.ReadOptions(self.options)

    def schema(self):
        return schema_for(self._options())

    def reader(self, schema):
        return JetStreamBatchReader(self._options(), schema)

    def streamReader(self, schema):
        return JetStreamStreamReader(self._options(), schema)
