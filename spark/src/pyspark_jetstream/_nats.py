"""A small blocking NATS client: one socket, no threads, no event loop.

Spark runs ``read()`` in plain worker processes, one partition after another;
an asyncio client there needs a private loop per partition and still tops out
at a fraction of what the server can send. This client speaks the protocol
directly and hands raw frames to the reader, which parses them in bulk.

It supports what the fleet uses: several servers tried in order, TLS (also
``tls://`` URLs and servers that require it), user JWT + nkey signature of the
server's nonce (creds files), nkey seeds, user/password and tokens.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import socket
import ssl
import time
from urllib.parse import unquote, urlsplit

from pyspark_jetstream._options import read_text

__all__ = ["Connection", "NatsError", "NoResponders", "RequestTimeout", "Frame", "parse_headers", "read_creds"]

_CRLF = b"\r\n"
_CREDS_BLOCK = re.compile(r"-{3,}[^\n]*-{3,}\s*\n([^-\s][^\n]*)\n\s*-{3,}[^\n]*END[^\n]*-{3,}", re.MULTILINE)


class NatsError(Exception):
    """Connection, authentication or protocol trouble, worded for the user."""


class NoResponders(NatsError):
    """Nobody listens on the subject of a request (the server's 503 status)."""


class RequestTimeout(NatsError):
    """A request got no reply in time."""


class Frame(object):
    """One MSG or HMSG: ``headers`` is the raw header block (or None)."""

    __slots__ = ("subject", "sid", "reply", "headers", "payload")

    def __init__(self, subject, sid, reply, headers, payload):
        self.subject = subject
        self.sid = sid
        self.reply = reply
        self.headers = headers
        self.payload = payload

    @property
    def status(self):
        """The status code of a status message (``NATS/1.0 503``), else None."""
        if self.headers is None:
            return None
        first = self.headers.split(_CRLF, 1)[0]
        parts = first.split(b" ", 2)
        return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def parse_headers(block):
    """{name: value} of a header block; later values of a repeated name win."""
    headers = {}
    for line in block.split(_CRLF)[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            headers[name.strip().decode("utf-8", "replace")] = value.strip().decode("utf-8", "replace")
    return headers


def read_creds(path):
    """(user JWT, nkey seed) of a creds file."""
    text = read_text(path, NatsError, "creds file")
    blocks = _CREDS_BLOCK.findall(text)
    if len(blocks) < 2:
        raise NatsError("creds file %s has no user JWT and seed" % path)
    return blocks[0].strip(), blocks[1].strip()


def read_seed(path):
    """The nkey seed in a seed file (the first line that is one)."""
    try:
        with open(path) as handle:
            for line in handle:
                if line.strip().startswith("S"):
                    return line.strip()
    except OSError as exc:
        raise NatsError("cannot read nkey seed file %s: %s" % (path, exc.strerror or exc))
    raise NatsError("no nkey seed in %s" % path)


def _load_cert_chain(context, cert_pem, key_pem):
    """ssl loads client certificates from files only: a private directory that lives for one call."""
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="jetstream-tls-")
    try:
        paths = []
        for name, text in (("cert.pem", cert_pem), ("key.pem", key_pem)):
            if text:
                path = os.path.join(folder, name)
                with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
                    handle.write(text)
                paths.append(path)
        context.load_cert_chain(*paths)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _sign(seed, nonce):
    try:
        import nkeys
    except ImportError:
        raise NatsError("the Python library nkeys is needed for creds and nkey authentication (pip install nkeys)")
    keypair = nkeys.from_seed(seed.encode() if isinstance(seed, str) else seed)
    try:
        signature = base64.urlsafe_b64encode(keypair.sign(nonce.encode())).rstrip(b"=").decode()
        return signature, keypair.public_key.decode()
    finally:
        keypair.wipe()


class Connection(object):
    """A connection to the first server of ``servers`` that accepts us.

    ``tls``: None (TLS only when the URL says ``tls://`` or the server
    requires it), or a dict with ``ca``, ``cert``, ``key``, ``verify``
    (default true), ``handshake_first``; any dict turns TLS on.
    """

    def __init__(self, servers, creds=None, nkey_seed=None, user=None, password=None, token=None,
                 tls=None, timeout=5.0, name="pyspark-jetstream"):
        if isinstance(servers, str):
            servers = [s.strip() for s in servers.split(",") if s.strip()]
        self.servers = list(servers) or ["nats://127.0.0.1:4222"]
        self.creds, self.nkey_seed, self.user, self.password, self.token = creds, nkey_seed, user, password, token
        self.tls = tls
        self.timeout = float(timeout)
        self.name = name
        self.sock = None
        self.info = {}
        self.url = None
        self._buf = b""
        self._pos = 0
        self._sid = 0
        self._inbox = None
        self._inbox_sid = None
        self._pending = []

    # -- connecting -------------------------------------------------------------

    def __enter__(self):
        return self.connect()

    def __exit__(self, *exc):
        self.close()

    def connect(self):
        errors = []
        for url in self.servers:
            try:
                self._connect(url)
                return self
            except (OSError, NatsError, ssl.SSLError) as exc:
                self.close()
                errors.append("%s: %s" % (url, exc))
                if isinstance(exc, NatsError) and "uthoriz" in str(exc):
                    break  # the next server of the same cluster says the same
        raise NatsError("cannot connect to NATS (%s)" % "; ".join(errors))

    def _connect(self, url):
        if "://" not in url:
            url = "nats://" + url
        parts = urlsplit(url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 4222
        want_tls = parts.scheme == "tls" or self.tls is not None
        self.url = "%s://%s:%d" % (parts.scheme, host, port)
        sock = socket.create_connection((host, port), timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        self._buf, self._pos = b"", 0
        if want_tls and (self.tls or {}).get("handshake_first"):
            self._wrap(host)
        line = self._readline()
        if not line.startswith(b"INFO "):
            raise NatsError("not a NATS server (%r)" % line[:40])
        self.info = json.loads(line[5:])
        if not isinstance(self.sock, ssl.SSLSocket) and (want_tls or self.info.get("tls_required")):
            if not self.info.get("tls_required") and not self.info.get("tls_available"):
                raise NatsError("TLS was asked for, the server does not offer it")
            self._wrap(host)
        connect = {"verbose": False, "pedantic": False, "lang": "python-spark", "version": "1",
                   "protocol": 1, "headers": True, "no_responders": True, "name": self.name,
                   "tls_required": isinstance(self.sock, ssl.SSLSocket)}
        user = unquote(parts.username) if parts.username else self.user
        password = unquote(parts.password) if parts.password else self.password
        if self.creds:
            jwt, seed = read_creds(self.creds) if isinstance(self.creds, str) else self.creds
            connect["jwt"] = jwt
            connect["sig"], _public = _sign(seed, self.info.get("nonce", ""))
        elif self.nkey_seed:
            seed = read_seed(self.nkey_seed) if not self.nkey_seed.startswith("SU") else self.nkey_seed
            connect["sig"], connect["nkey"] = _sign(seed, self.info.get("nonce", ""))
        elif self.token or (user and not password):
            connect["auth_token"] = self.token or user
        elif user:
            connect["user"], connect["pass"] = user, password
        self.sock.sendall(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
        while True:
            line = self._readline()
            if line == b"PONG":
                break
            if line.startswith(b"-ERR"):
                raise NatsError("server %s refused the connection: %s" % (self.url, line[5:].decode().strip(" '")))
            # +OK, PING or INFO updates before the first PONG
            if line == b"PING":
                self.sock.sendall(b"PONG\r\n")

    def _wrap(self, host):
        tls = self.tls or {}
        context = ssl.create_default_context(cafile=tls.get("ca") or None, cadata=tls.get("cadata") or None)
        if tls.get("cert"):
            context.load_cert_chain(tls["cert"], tls.get("key") or None)
        elif tls.get("certdata"):
            _load_cert_chain(context, tls["certdata"], tls.get("keydata"))
        if tls.get("verify") is False:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        self.sock = context.wrap_socket(self.sock, server_hostname=tls.get("server_name") or host)

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None

    # -- reading ----------------------------------------------------------------

    def recv(self, size=1 << 20):
        """Raw bytes from the socket (at least one), or NatsError when it closed."""
        try:
            data = self.sock.recv(size)
        except socket.timeout:
            raise
        except OSError as exc:
            raise NatsError("connection to %s lost: %s" % (self.url, exc))
        if not data:
            raise NatsError("connection to %s closed by the server" % self.url)
        return data

    def _fill(self):
        data = self.recv()
        self._buf = self._buf[self._pos:] + data if self._pos < len(self._buf) else data
        self._pos = 0

    def _readline(self):
        while True:
            end = self._buf.find(_CRLF, self._pos)
            if end >= 0:
                line = self._buf[self._pos:end]
                self._pos = end + 2
                return line
            self._fill()

    def take_buffer(self):
        """Bytes read but not yet parsed (the reader takes over parsing)."""
        rest = self._buf[self._pos:]
        self._buf, self._pos = b"", 0
        return rest

    def next_frame(self, timeout=None):
        """The next MSG/HMSG (answering PINGs), or RequestTimeout."""
        if self._pending:
            return self._pending.pop(0)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            end = self._buf.find(_CRLF, self._pos)
            if end >= 0:
                frame = self._frame(end)
                if frame is not None:
                    return frame
                continue
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RequestTimeout("no message within %.1fs" % timeout)
                self.sock.settimeout(left)
            try:
                self._fill()
            except socket.timeout:
                raise RequestTimeout("no message within %.1fs" % timeout)
            finally:
                if self.sock is not None:
                    self.sock.settimeout(self.timeout)

    def _frame(self, end):
        """Parse the protocol line ending at ``end``; a Frame, None for control
        lines, or None after reading more bytes for an incomplete message."""
        buf, pos = self._buf, self._pos
        op = buf[pos:pos + 4]
        if op == b"MSG " or op == b"HMSG":
            parts = buf[pos:end].split()
            total = int(parts[-1])
            start = end + 2
            if len(buf) < start + total + 2:
                self._fill_at_least(start + total + 2)
                return None
            headers = None
            if op == b"HMSG":
                hlen = int(parts[-2])
                headers = buf[start:start + hlen]
                reply = parts[3] if len(parts) == 6 else None
                payload = buf[start + hlen:start + total]
            else:
                reply = parts[3] if len(parts) == 5 else None
                payload = buf[start:start + total]
            self._pos = start + total + 2
            return Frame(parts[1], int(parts[2]), reply, headers, payload)
        line = buf[pos:end]
        self._pos = end + 2
        if line == b"PING":
            self.sock.sendall(b"PONG\r\n")
        elif line.startswith(b"-ERR"):
            raise NatsError("server %s: %s" % (self.url, line[5:].decode().strip(" '")))
        return None

    def _fill_at_least(self, size):
        while len(self._buf) < size:
            self._buf += self.recv()

    # -- writing ----------------------------------------------------------------

    def subscribe(self, subject):
        self._sid += 1
        self.sock.sendall(b"SUB %s %d\r\n" % (subject.encode(), self._sid))
        return self._sid

    def unsubscribe(self, sid):
        self.sock.sendall(b"UNSUB %d\r\n" % sid)

    def publish(self, subject, payload=b"", reply=None):
        subject = subject.encode() if isinstance(subject, str) else subject
        reply = reply.encode() if isinstance(reply, str) else reply
        head = b"PUB %s %s%d\r\n" % (subject, reply + b" " if reply else b"", len(payload))
        self.sock.sendall(head + payload + _CRLF)

    def flush(self, timeout=None):
        """Round trip to the server: everything sent before has been processed."""
        self.sock.sendall(b"PING\r\n")
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            end = self._buf.find(_CRLF, self._pos)
            if end >= 0:
                if self._buf[self._pos:end] == b"PONG":
                    self._pos = end + 2
                    return
                frame = self._frame(end)
                if frame is not None:
                    self._pending.append(frame)
                continue
            if time.monotonic() > deadline:
                raise RequestTimeout("no PONG from %s" % self.url)
            self._fill()

    def publish_acked(self, messages, window=256, timeout=None):
        """Publish (subject, payload) pairs to JetStream, ``window`` at a time,
        insisting on an ack for each (bursts without acks make servers drop
        messages). Returns the last ack (dict)."""
        inbox = self.new_inbox()
        sid = self.subscribe(inbox + ".*")
        prefix = inbox.encode() + b"."
        last = None
        try:
            batch = []
            for subject, payload in messages:
                batch.append((subject, payload))
                if len(batch) >= window:
                    last = self._acked_batch(batch, prefix, sid, timeout) or last
                    batch = []
            if batch:
                last = self._acked_batch(batch, prefix, sid, timeout) or last
        finally:
            self.unsubscribe(sid)
        return last

    def _acked_batch(self, batch, prefix, sid, timeout):
        out = []
        for number, (subject, payload) in enumerate(batch):
            subject = subject.encode() if isinstance(subject, str) else subject
            out.append(b"PUB %s %s%d %d\r\n%s\r\n" % (subject, prefix, number, len(payload), payload))
        self.sock.sendall(b"".join(out))
        last = None
        for _message in batch:
            frame = self.next_frame(timeout=timeout or self.timeout)
            while frame.sid != sid:
                frame = self.next_frame(timeout=timeout or self.timeout)
            if frame.status == 503:
                raise NoResponders("no stream takes %s" % batch[0][0])
            ack = json.loads(frame.payload.decode())
            if "error" in ack:
                raise NatsError("publish to %s refused: %s" % (batch[0][0], ack["error"].get("description")))
            last = ack
        return last

    def new_inbox(self):
        return "_INBOX." + binascii.hexlify(os.urandom(11)).decode()

    def request(self, subject, payload=b"", timeout=None):
        """The reply payload to a request; NoResponders, RequestTimeout.
        Frames of other subscriptions that arrive meanwhile are kept for next_frame()."""
        if self._inbox is None:
            self._inbox = self.new_inbox()
            self._inbox_sid = self.subscribe(self._inbox + ".*")
        token = binascii.hexlify(os.urandom(6))
        reply = self._inbox.encode() + b"." + token
        self.publish(subject, payload, reply=reply)
        timeout = timeout or self.timeout
        deadline = time.monotonic() + timeout
        kept = []
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RequestTimeout("no reply to %s within %.1fs" % (subject, timeout))
                frame = self.next_frame(timeout=left)
                if frame.sid == self._inbox_sid and frame.subject == reply:
                    if frame.status == 503:
                        raise NoResponders("no responders on %s" % subject)
                    return frame.payload
                if frame.sid != self._inbox_sid:
                    kept.append(frame)
        except RequestTimeout:
            raise RequestTimeout("no reply to %s within %.1fs" % (subject, timeout))
        finally:
            self._pending.extend(kept)
