"""Reading one range of stream sequences, fast, as Arrow record batches.

An ordered push consumer (no acks, flow control, idle heartbeats, memory
storage, one replica) starts at the range's first sequence; the reader stops
at the range's last one, or earlier when the consumer says nothing more is
pending. The protocol is parsed in bulk: the hot loop only frames messages
and keeps slices; sequences, timestamps and pending counts come out of the
``$JS.ACK`` reply subjects with Arrow compute, a chunk at a time.

Gaps in the consumer sequence (a message the server could not deliver) make
the reader start a new consumer after the last message it kept, as ordered
consumers do; the consumer is deleted at the end (or, where the API does not
offer deletion, goes by itself after its inactive threshold).
"""

from __future__ import annotations

import socket
import time

from pyspark_jetstream._jetstream import NANOS, JetStream, consumer_name
from pyspark_jetstream._nats import NatsError, parse_headers

_ACK = b"$JS.ACK."
_STALLED = b"Nats-Consumer-Stalled:"
_LAST_CONSUMER = "Nats-Last-Consumer"


class Chunk(object):
    """Columns of consecutive messages as Python lists (before Arrow)."""

    __slots__ = ("subjects", "replies", "headers", "data")

    def __init__(self):
        self.subjects, self.replies, self.headers, self.data = [], [], [], []

    def __len__(self):
        return len(self.replies)

    def truncate(self, count):
        for column in (self.subjects, self.replies, self.headers, self.data):
            del column[count:]

    def extend(self, other):
        self.subjects += other.subjects
        self.replies += other.replies
        self.headers += other.headers
        self.data += other.data


def ack_fields(reply):
    """(stream seq, consumer seq, timestamp ns, pending) of a ``$JS.ACK`` reply subject
    (v1: 9 tokens; v2 adds domain and account hash up front and a random token at the end)."""
    tokens = reply.split(b".")
    if len(tokens) > 9:
        tokens = tokens[2:-1] if len(tokens) > 11 else tokens[2:]
    return int(tokens[5]), int(tokens[6]), int(tokens[7]), int(tokens[8])


class RangeReader(object):
    """Messages with sequences ``first``..``last`` (inclusive) of ``stream``.

    ``batches()`` yields Chunk objects of up to ``batch_rows`` messages;
    ``to_arrow`` (see _columns) turns them into record batches."""

    def __init__(self, conn, api, stream, first, last, filter_subject=None, deliver_prefix="_INBOX",
                 batch_rows=65536, heartbeat=1.0, timeout=None):
        self.conn = conn
        self.js = JetStream(conn, api, timeout=timeout)
        self.stream = stream
        self.first, self.last = int(first), int(last)
        self.filter_subject = filter_subject
        self.deliver_prefix = (deliver_prefix or "_INBOX").rstrip(".")
        self.batch_rows = int(batch_rows)
        self.heartbeat = float(heartbeat)
        self.last_seq = self.first - 1  # the last sequence handed out
        self.restarts = 0
        self._kept = 0  # messages of the current chunk already checked
        self._carry = None  # bytes to parse after a consumer restart

    # -- the consumer ----------------------------------------------------------------

    def _start(self, start_seq):
        self.name = consumer_name()
        self.deliver = "%s.%s" % (self.deliver_prefix, self.name)
        self.sid = self.conn.subscribe(self.deliver)
        self.sid_token = b"%d" % self.sid
        config = dict(name=self.name, deliver_subject=self.deliver, deliver_policy="by_start_sequence",
                      opt_start_seq=start_seq, ack_policy="none", replay_policy="instant", flow_control=True,
                      idle_heartbeat=int(self.heartbeat * NANOS), inactive_threshold=5 * NANOS,
                      mem_storage=True, num_replicas=1)
        if self.filter_subject:
            config["filter_subject"] = self.filter_subject
        info = self.js.create_consumer(self.stream, config)
        self.expect_cseq = 1
        self.heard = False
        return int(info.get("num_pending", 0))

    def _stop(self):
        self.conn.unsubscribe(self.sid)
        self.js.delete_consumer(self.stream, self.name)

    # -- reading ----------------------------------------------------------------------

    def batches(self):
        if self.last < self.first:
            return
        pending = self._start(self.first)
        try:
            if pending == 0:
                return
            yield from self._chunks()
        finally:
            try:
                self._stop()
            except (NatsError, OSError):
                pass

    def _chunks(self):
        conn = self.conn
        out = Chunk()
        buf = self._adopt()
        self.heard = bool(buf)
        quiet_since = time.monotonic()
        while True:
            status = []
            buf = self._parse(buf, out, status)
            done = False
            if len(out):
                done = self._check(out)
                quiet_since = time.monotonic()
            for kind, frame_reply, headers in status:
                if kind == "fc":
                    conn.publish(frame_reply, b"")
                elif headers is not None and _STALLED in headers:
                    stalled = parse_headers(headers).get("Nats-Consumer-Stalled")
                    if stalled:
                        conn.publish(stalled, b"")
                elif headers is not None:
                    # an idle heartbeat: nothing left to deliver, unless we missed some
                    last_cseq = int(parse_headers(headers).get(_LAST_CONSUMER) or 0)
                    if last_cseq > self.expect_cseq - 1:
                        self._restart()
                    else:
                        done = True
            if self._carry is not None:
                buf, self._carry = self._carry, None
            if done:
                if len(out):
                    yield out
                return
            if len(out) >= self.batch_rows:
                yield out
                out = Chunk()
                self._kept = 0
            try:
                conn.sock.settimeout(self.heartbeat * 3)
                data = conn.recv()
            except socket.timeout:
                if not self.heard:
                    raise NatsError("stream %r: the consumer was created, but nothing arrives on %s: may this "
                                    "account receive there (deliver_prefix of the shared stream)?"
                                    % (self.stream, self.deliver))
                # no heartbeat either: the consumer is gone (stream deleted, server restarted)
                if time.monotonic() - quiet_since > self.heartbeat * 3:
                    self._restart()
                    quiet_since = time.monotonic()
                if self._carry is not None:
                    buf, self._carry = self._carry, None
                continue
            self.heard = True
            buf = buf + data if buf else data

    def _restart(self):
        """A new consumer after the last message kept (ordered-consumer recovery)."""
        self.restarts += 1
        if self.restarts > 20:
            raise NatsError("stream %r: gave up after %d consumer restarts at sequence %d"
                            % (self.stream, self.restarts, self.last_seq + 1))
        try:
            self._stop()
        except (NatsError, OSError):
            pass
        self.conn.take_buffer()
        self.conn._pending = []
        self._start(self.last_seq + 1)
        self._carry = self._adopt()
        self.heard = bool(self._carry)

    def _adopt(self):
        """What the connection read while the consumer was being created, in wire form."""
        early, self.conn._pending = self.conn._pending, []
        return b"".join(_reframe(frame) for frame in early) + self.conn.take_buffer()

    def _parse(self, buf, out, status):
        """Frame every complete message in ``buf`` into ``out``; control
        messages go to ``status``. Returns the unparsed rest."""
        find = buf.find
        size = len(buf)
        pos = 0
        sid = self.sid_token
        subjects, replies, headers, data = out.subjects, out.replies, out.headers, out.data
        while True:
            nl = find(b"\r\n", pos)
            if nl < 0:
                break
            op = buf[pos]
            if op == 77:  # MSG subject sid [reply] size
                parts = buf[pos + 4:nl].split(b" ")
                start = nl + 2
                stop = start + int(parts[-1])
                if stop + 2 > size:
                    break
                if parts[1] == sid and len(parts) == 4:
                    subjects.append(parts[0])
                    replies.append(parts[2])
                    headers.append(None)
                    data.append(buf[start:stop])
                pos = stop + 2
            elif op == 72:  # HMSG subject sid [reply] header-size total-size
                parts = buf[pos + 5:nl].split(b" ")
                start = nl + 2
                stop = start + int(parts[-1])
                if stop + 2 > size:
                    break
                if parts[1] == sid:
                    hstop = start + int(parts[-2])
                    if len(parts) == 5 and parts[2].startswith(_ACK):
                        subjects.append(parts[0])
                        replies.append(parts[2])
                        headers.append(buf[start:hstop])
                        data.append(buf[hstop:stop])
                    elif b" 100 " in buf[start:hstop].split(b"\r\n", 1)[0] + b" ":
                        block = buf[start:hstop]
                        if len(parts) == 5 and b"FlowControl" in block:
                            status.append(("fc", parts[2], None))
                        else:
                            status.append(("hb", None, block))
                pos = stop + 2
            else:
                line = buf[pos:nl]
                pos = nl + 2
                if line == b"PING":
                    self.conn.sock.sendall(b"PONG\r\n")
                elif line.startswith(b"-ERR"):
                    raise NatsError("server %s: %s" % (self.conn.url, line[5:].decode().strip(" '")))
        return buf[pos:]

    def _check(self, out):
        """Keep what belongs to the range; True when the range is done."""
        n = len(out)
        if n == self._kept:
            return False
        last_sseq, last_cseq, _ts, pending = ack_fields(out.replies[-1])
        if last_cseq - self.expect_cseq + 1 != n - self._kept:
            return self._repair(out)
        self.expect_cseq = last_cseq + 1
        if last_sseq > self.last:
            # sequences only grow: cut at the first one past the range
            low, high = self._kept, n - 1
            while low < high:
                middle = (low + high) // 2
                if ack_fields(out.replies[middle])[0] > self.last:
                    high = middle
                else:
                    low = middle + 1
            out.truncate(low)
        self._kept = len(out)
        if last_sseq >= self.last:
            self.last_seq = self.last
            return True
        self.last_seq = last_sseq
        return pending == 0

    def _repair(self, out):
        """Consumer sequences jumped: keep up to the gap, start again after it."""
        index = self._kept
        while index < len(out):
            sseq, cseq, _ts, _pending = ack_fields(out.replies[index])
            if cseq != self.expect_cseq or sseq > self.last:
                break
            self.expect_cseq += 1
            self.last_seq = sseq
            index += 1
        out.truncate(index)
        self._kept = index
        if self.last_seq >= self.last:
            return True
        self._restart()
        return False


def _reframe(frame):
    """A parsed Frame back into wire form, so early frames join the fast path."""
    reply = frame.reply + b" " if frame.reply else b""
    if frame.headers is None:
        return b"MSG %s %d %s%d\r\n%s\r\n" % (frame.subject, frame.sid, reply, len(frame.payload), frame.payload)
    sizes = (len(frame.headers), len(frame.headers) + len(frame.payload))
    return b"HMSG %s %d %s%d %d\r\n%s%s\r\n" % ((frame.subject, frame.sid, reply) + sizes + (frame.headers, frame.payload))
