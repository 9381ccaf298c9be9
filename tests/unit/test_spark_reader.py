"""The range reader's framing, end and gap logic, and its Arrow layout, on
wire bytes made here (the real server is in tests/integration)."""

import pyarrow as pa
import pytest

from pyspark_jetstream import _reader
from pyspark_jetstream._arrow import record_batch
from pyspark_jetstream._reader import Chunk, RangeReader, ack_fields

SCHEMA = pa.schema([
    pa.field("stream", pa.string(), False), pa.field("seq", pa.int64(), False), pa.field("subject", pa.string(), False),
    pa.field("timestamp", pa.timestamp("us", tz="UTC"), False),
    pa.field("headers", pa.map_(pa.field("key", pa.string(), False), pa.field("value", pa.string(), False)), True),
    pa.field("data", pa.binary(), True)])


def ack(sseq, cseq, pending, ts=1795428000123456789, stream=b"tele", consumer=b"c"):
    return b"$JS.ACK.%s.%s.1.%d.%d.%d.%d" % (stream, consumer, sseq, cseq, ts, pending)


def msg(sid, sseq, cseq, pending, subject=b"t.a", data=b"x", headers=None):
    reply = ack(sseq, cseq, pending)
    if headers is None:
        return b"MSG %s %d %s %d\r\n%s\r\n" % (subject, sid, reply, len(data), data)
    sizes = (len(headers), len(headers) + len(data))
    return b"HMSG %s %d %s %d %d\r\n%s%s\r\n" % ((subject, sid, reply) + sizes + (headers, data))


def status(sid, text, reply=None, extra=b""):
    block = b"NATS/1.0 100 " + text + b"\r\n" + extra + b"\r\n"
    return b"HMSG deliver %d %s%d %d\r\n%s\r\n" % (sid, reply + b" " if reply else b"", len(block), len(block), block)


class FakeConn(object):
    """Hands out prepared wire bytes; records what the reader sends."""

    url = "nats://fake"

    def __init__(self, chunks_per_consumer):
        self.plans = list(chunks_per_consumer)
        self.chunks = []
        self.sent = []
        self._pending = []
        self.sock = self
        self.sids = 0

    def settimeout(self, value):
        pass

    def subscribe(self, subject):
        self.sids += 1
        self.chunks = list(self.plans.pop(0)(self.sids))
        return self.sids

    def unsubscribe(self, sid):
        self.sent.append(("unsub", sid))

    def take_buffer(self):
        return b""

    def recv(self):
        if not self.chunks:
            raise AssertionError("the reader asked for more than the server sent")
        return self.chunks.pop(0)

    def publish(self, subject, payload):
        self.sent.append(("pub", subject))

    def sendall(self, data):
        self.sent.append(("raw", data))


class FakeJS(object):
    def __init__(self):
        self.created, self.deleted = [], []

    def create_consumer(self, stream, config):
        self.created.append(config)
        return {"num_pending": 10}

    def delete_consumer(self, stream, name):
        self.deleted.append(name)


def read(conn, first, last, batch_rows=65536):
    reader = RangeReader(conn, "$JS.API", "tele", first, last, batch_rows=batch_rows)
    reader.js = FakeJS()
    chunks = list(reader.batches())
    return reader, [s for c in chunks for s in (ack_fields(r)[0] for r in c.replies)], chunks


def test_ack_fields_v1_and_v2():
    assert ack_fields(ack(7, 3, 2)) == (7, 3, 1795428000123456789, 2)
    v2 = b"$JS.ACK.hub.ACCHASH.tele.c.1.7.3.1795428000123456789.2.rnd"
    assert ack_fields(v2) == (7, 3, 1795428000123456789, 2)


def test_stops_at_the_last_sequence_and_drops_what_follows():
    def wire(sid):
        frames = b"".join(msg(sid, s, s, 100 - s) for s in range(1, 8))
        # a frame split over two reads, and flow control in between
        return [frames[:37], frames[37:] + status(sid, b"FlowControl Request", reply=b"$JS.FC.tele.c.1")]
    reader, seqs, _chunks = read(FakeConn([wire]), 1, 5)
    assert seqs == [1, 2, 3, 4, 5] and reader.last_seq == 5
    assert reader.js.deleted == [reader.js.created[0]["name"]]
    config = reader.js.created[0]
    assert config["opt_start_seq"] == 1 and config["ack_policy"] == "none" and config["flow_control"]
    assert config["deliver_subject"].startswith("_INBOX.") and config["mem_storage"]


def test_nothing_pending_ends_the_range_early_and_flow_control_is_answered():
    def wire(sid):
        return [msg(sid, 1, 1, 1) + status(sid, b"FlowControl Request", reply=b"$JS.FC.tele.c.9")
                + msg(sid, 4, 2, 0, headers=b"NATS/1.0\r\nNats-Stream-Source: tele1 4\r\n\r\n")]
    reader, seqs, chunks = read(FakeConn([wire]), 1, 100)
    assert seqs == [1, 4]
    assert ("pub", b"$JS.FC.tele.c.9") in reader.conn.sent
    batch = record_batch(chunks[0], SCHEMA)
    assert batch.column("headers").to_pylist() == [[], [("Nats-Stream-Source", "tele1 4")]]


def test_an_idle_heartbeat_ends_a_range_whose_tail_was_deleted():
    def wire(sid):
        return [msg(sid, 1, 1, 3), status(sid, b"Idle Heartbeat", extra=b"Nats-Last-Consumer: 1\r\n")]
    _reader_, seqs, _chunks = read(FakeConn([wire]), 1, 10)
    assert seqs == [1]


def test_a_gap_in_consumer_sequences_restarts_after_the_last_kept_message():
    def first(sid):
        return [msg(sid, 1, 1, 5) + msg(sid, 2, 2, 4) + msg(sid, 5, 5, 1)]

    def second(sid):
        return [msg(sid, 3, 1, 2) + msg(sid, 4, 2, 1) + msg(sid, 5, 3, 0)]
    reader, seqs, _chunks = read(FakeConn([first, second]), 1, 5)
    assert seqs == [1, 2, 3, 4, 5] and reader.restarts == 1
    assert [c["opt_start_seq"] for c in reader.js.created] == [1, 3]


def test_a_heartbeat_that_reports_more_than_arrived_restarts():
    def first(sid):
        return [msg(sid, 1, 1, 5) + status(sid, b"Idle Heartbeat", extra=b"Nats-Last-Consumer: 3\r\n")]

    def second(sid):
        return [msg(sid, 2, 1, 0)]
    reader, seqs, _chunks = read(FakeConn([first, second]), 1, 9)
    assert seqs == [1, 2] and reader.restarts == 1


def test_batches_of_batch_rows():
    def wire(sid):
        return [msg(sid, s, s, 10 - s) for s in range(1, 11)]
    _reader_, seqs, chunks = read(FakeConn([wire]), 1, 10, batch_rows=4)
    assert seqs == list(range(1, 11)) and [len(c) for c in chunks] == [4, 4, 2]


def test_frames_of_other_subscriptions_are_ignored():
    def wire(sid):
        return [msg(sid + 50, 9, 9, 0) + msg(sid, 1, 1, 0)]
    _reader_, seqs, _chunks = read(FakeConn([wire]), 1, 9)
    assert seqs == [1]


def test_record_batch_layout():
    chunk = Chunk()
    for sseq in (3, 4):
        chunk.subjects.append(b"t.\xc3\xa9")
        chunk.replies.append(ack(sseq, sseq, 0))
        chunk.headers.append(None)
        chunk.data.append(b"{}")
    batch = record_batch(chunk, SCHEMA, stream="telemetry-north")
    assert batch.schema.equals(SCHEMA)
    assert batch.column("stream").to_pylist() == ["telemetry-north", "telemetry-north"]
    assert batch.column("seq").to_pylist() == [3, 4]
    assert batch.column("subject").to_pylist() == ["t.\u00e9", "t.\u00e9"]
    assert batch.column("timestamp")[0].value == 1795428000123456


def test_server_errors_surface():
    def wire(sid):
        return [b"-ERR 'Permissions Violation for Subscription'\r\n"]
    with pytest.raises(_reader.NatsError, match="Permissions Violation"):
        read(FakeConn([wire]), 1, 5)
