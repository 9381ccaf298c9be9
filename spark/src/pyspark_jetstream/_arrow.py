"""Chunks of framed messages to Arrow record batches in Spark's layout."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from pyspark_jetstream._nats import parse_headers

BASE_COLUMNS = ("stream", "seq", "subject", "timestamp", "headers", "data")


def _ack_layout(reply):
    """(splits from the right, index of the stream sequence, index of the timestamp)
    for the reply's ``$JS.ACK`` format (v1: 9 tokens; v2 ends with a random token)."""
    tokens = reply.count(b".") + 1
    if tokens in (9, 11):
        return 5, 2, 4
    return 6, 2, 4


def _headers_array(blocks, map_type):
    offsets, keys, values = [0], [], []
    for block in blocks:
        if block is not None:
            for name, value in parse_headers(block).items():
                keys.append(name)
                values.append(value)
        offsets.append(len(keys))
    return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(keys, pa.string()),
                                   pa.array(values, pa.string()), type=map_type)


def base_arrays(chunk, schema, stream=""):
    """{column: array} of the base columns of a chunk of ``stream``, typed as in ``schema``."""
    splits, seq_at, ts_at = _ack_layout(chunk.replies[0])
    parts = pc.split_pattern(pa.array(chunk.replies, pa.binary()).cast(pa.string()), ".",
                             max_splits=splits, reverse=True)
    seq = pc.list_element(parts, seq_at).cast(pa.int64())
    nanos = pc.list_element(parts, ts_at).cast(pa.int64())
    micros = pc.divide(nanos, pa.scalar(1000, pa.int64()))
    columns = {
        "stream": pa.array([stream] * len(chunk), pa.string()),
        "seq": seq,
        "subject": pa.array(chunk.subjects, pa.binary()).cast(pa.string()),
        "timestamp": micros.cast(schema.field("timestamp").type),
        "data": pa.array(chunk.data, pa.binary()),
    }
    if any(block is not None for block in chunk.headers):
        columns["headers"] = _headers_array(chunk.headers, schema.field("headers").type)
    else:
        empty = pa.array([0] * (len(chunk) + 1), pa.int32())
        columns["headers"] = pa.MapArray.from_arrays(empty, pa.array([], pa.string()), pa.array([], pa.string()),
                                                     type=schema.field("headers").type)
    return columns


def record_batch(chunk, schema, extra=None, stream=""):
    """A RecordBatch of ``schema`` (an Arrow schema) from a chunk of ``stream``; ``extra``
    computes further columns: extra(chunk, columns, schema) -> {name: array}."""
    columns = base_arrays(chunk, schema, stream)
    if extra is not None:
        columns.update(extra(chunk, columns, schema))
    arrays = []
    for field in schema:
        array = columns[field.name]
        if array.type != field.type:
            array = array.cast(field.type)
        arrays.append(array)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
