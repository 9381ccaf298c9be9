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
        StructField("stream", StringType(), False),
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
    """Sequences ``first``..``last`` (inclusive) of ``stream``."""

    def __init__(self, stream, first, last):
        super().__init__((stream, first, last))
        self.stream, self.first, self.last = stream, first, last


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
    """What batch and streaming readers share: the streams' bounds and reading a range of one."""

    def __init__(self, options, schema):
        self.options = options
        self.schema = schema
        self.connector = Connector(options)

    def _deliver_subject(self):
        return "%s.probe" % self.options.deliver_prefix

    def bounds(self):
        """{stream: (first, last) sequence} of every stream read, now."""
        with self.connector.connect() as conn:
            js = self.connector.jetstream(conn)
            return {stream: js.bounds(stream, self.options.filter_subject, self._deliver_subject())
                    for stream in self.options.streams}

    def start_seqs(self, bounds):
        """{stream: where a new read of it starts}, from ``starting``, ``start_seq`` or ``start_time``, never
        before its first sequence; ``bounds``: {stream: (first, last)}."""
        options = self.options
        if options.start_time:
            with self.connector.connect() as conn:
                js = self.connector.jetstream(conn)
                starts = {stream: js.seq_at_time(stream, opts.rfc3339(options.start_time), options.filter_subject,
                                                 self._deliver_subject()) for stream in bounds}
        elif options.start_seq:
            starts = {stream: options.start_seq for stream in bounds}
        else:
            starts = {stream: last + 1 if options.starting == "latest" else first
                      for stream, (first, last) in bounds.items()}
        return {stream: max(bounds[stream][0], start) for stream, start in starts.items()}

    def plan(self, ranges):
        """Partitions of {stream: (first, last)}: each stream's range split on its own."""
        return [SequenceRange(stream, a, b) for stream, (first, last) in ranges.items()
                for a, b in opts.split_range(first, last, opts.partition_count(self.options, first, last))]

    def read(self, partition):
        import pyarrow as pa  # noqa: F401 (fail early and clearly when it is missing)
        from pyspark.sql.pandas.types import to_arrow_schema

        from pyspark_jetstream._arrow import record_batch
        from pyspark_jetstream._reader import RangeReader

        schema = to_arrow_schema(self.schema, timezone="UTC")
        extra = _json_columns(self.options.json_schema) if self.options.json_schema else None
        options = self.options
        with self.connector.connect() as conn:
            reader = RangeReader(conn, self.connector.api, partition.stream, partition.first, partition.last,
                                 filter_subject=options.filter_subject, deliver_prefix=options.deliver_prefix,
                                 batch_rows=options.batch_rows, heartbeat=options.heartbeat,
                                 timeout=options.timeout)
            for chunk in reader.batches():
                yield record_batch(chunk, schema, extra, partition.stream)


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
        bounds = self.bounds()
        starts = self.start_seqs(bounds)
        end_seq = self.options.end_seq
        return self.plan({stream: (starts[stream], min(last, end_seq) if end_seq else last)
                          for stream, (_first, last) in bounds.items()})


class JetStreamStreamReader(_Reading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are {"streams": {stream: next sequence to read}}."""

    def __init__(self, options, schema):
        super().__init__(options, schema)
        self.caps = None

    def initialOffset(self):
        return opts.offset(self.start_seqs(self.bounds()))

    def getDefaultReadLimit(self):
        if self.options.max_messages_per_trigger:
            return ReadMaxRows(self.options.max_messages_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self):
        # what is there now, and not what arrives while the query catches up
        self.caps = {stream: last + 1 for stream, (_first, last) in self.bounds().items()}

    def latestOffset(self, start, limit):
        starts = opts.offset_seqs(start, self.options.streams)
        bounds = self.bounds()
        lasts = {stream: last for stream, (_first, last) in bounds.items()}
        added = {stream: bounds[stream] for stream in bounds if stream not in starts}
        if added:
            # a stream added to the query since the checkpoint: this batch records where it starts, the next reads
            starts.update(self.start_seqs(added))
            lasts.update((stream, starts[stream] - 1) for stream in added)
        most = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return opts.offset(opts.end_offsets(starts, lasts, most, self.caps))

    def reportLatestOffset(self):
        return opts.offset({stream: last + 1 for stream, (_first, last) in self.bounds().items()})

    def partitions(self, start, end):
        firsts = opts.offset_seqs(start, self.options.streams)
        stops = opts.offset_seqs(end, self.options.streams)
        return self.plan({stream: (firsts.get(stream, stop), stop - 1) for stream, stop in stops.items()})

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
