# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one NATS client of the collection's modules. Private to the collection.

Modules never see a coroutine: each module run owns one event loop and one
connection (explicit timeout, no reconnect), makes synchronous requests
through this facade, and the connection is drained when the run ends.
nats-py is imported lazily, so a missing library is a clear module failure,
not an import error.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import time
import traceback

from ansible.module_utils.basic import env_fallback, missing_required_lib

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._module import FleetModule, redact

try:
    import asyncio
except ImportError:  # pragma: no cover - every supported Python has it
    asyncio = None

NATS_PY = "nats-py"
# the first nats-py whose connect() takes tls_handshake_first (TLS before the server's INFO)
TLS_HANDSHAKE_FIRST_NATS_PY = "2.6.0"
# The JetStream API's error codes (err_code) the collection acts on, named once:
# "consumer not found"
JS_CONSUMER_NOT_FOUND = 10014
# "JetStream not enabled for account"
JS_NOT_ENABLED_FOR_ACCOUNT = 10039
# "error creating store for stream" (the cause is only in a server's log) and "stream name already in use"
JS_STREAM_STORE_FAILED = 10049
JS_STREAM_NAME_IN_USE = 10058
# "stream not found"
JS_STREAM_NOT_FOUND = 10059
# measured on 2.9.10 under load: a server that loads the account as the stream is assigned to it
# can fail to make the account's store directory ("could not create storage directory ... no such
# file or directory"); the meta leader then drops the assignment, and the same request a moment
# later creates the stream. While it drops it, the name is still "in use".
STORE_FAILED_RETRIES = (0.5, 1.0, 2.0, 4.0)
# a publish that no stream took (503, no responders) is sent again after each of these: a stream between two
# leaders takes nothing for a moment
NO_STREAM_RETRIES = (0.25, 0.5, 1.0, 2.0)
API = "$JS.API"
nats = None
nats_errors = None
_IMPORT_ERROR = None


def load_nats_py(servers=()):
    """Import nats-py on first use; False when it is missing. Its websocket transport
    imports aiohttp, about a third of a module run's start-up: that is kept out unless
    a server URL is a websocket one."""
    global nats, nats_errors, _IMPORT_ERROR
    if nats is not None:
        return True
    keep_out = not any(str(server).startswith(("ws://", "wss://")) for server in servers or ()) and (
        "aiohttp" not in sys.modules)
    if keep_out:
        sys.modules["aiohttp"] = None  # nats-py then runs without its websocket transport
    try:
        import nats as loaded
        from nats import errors as loaded_errors
    except ImportError:
        _IMPORT_ERROR = traceback.format_exc()
        return False
    finally:
        if keep_out:
            del sys.modules["aiohttp"]
    nats, nats_errors = loaded, loaded_errors
    return True


def _servers_fallback():
    value = env_fallback("NATS_URL")
    return [server.strip() for server in value.split(",") if server.strip()]


CONNECTION_ARGSPEC = dict(
    servers=dict(type="list", elements="str", fallback=(_servers_fallback,), aliases=["server"]),
    creds=dict(type="path", fallback=(env_fallback, ["NATS_CREDS"])),
    nkey_seed=dict(type="path", fallback=(env_fallback, ["NATS_NKEY"])),
    user=dict(type="str", fallback=(env_fallback, ["NATS_USER"])),
    password=dict(type="str", no_log=True, fallback=(env_fallback, ["NATS_PASSWORD"])),
    token=dict(type="str", no_log=True, fallback=(env_fallback, ["NATS_TOKEN"])),
    tls_ca=dict(type="path", fallback=(env_fallback, ["NATS_CA"])),
    tls_cert=dict(type="path", fallback=(env_fallback, ["NATS_CERT"])),
    tls_key=dict(type="path", no_log=False, fallback=(env_fallback, ["NATS_KEY"])),
    timeout=dict(type="float", default=5.0, fallback=(env_fallback, ["NATS_TIMEOUT"])),
    tls_handshake_first=dict(type="bool", default=False),
    creds_data=dict(type="str", no_log=True),
    user_jwt=dict(type="path"),
    tls_ca_data=dict(type="str"),
    tls_cert_data=dict(type="str"),
    tls_key_data=dict(type="str", no_log=True),
    inbox_prefix=dict(type="str"),
    connection_name=dict(type="str", default="ansible nats_edge.fleet"),
)

JETSTREAM_ARGSPEC = dict(
    domain=dict(type="str"),
    api_prefix=dict(type="str"),
)


class NatsClientError(NatsEdgeError):
    """Connection, timeout or protocol trouble, worded for the user."""


def check_inbox_prefix(prefix):
    """``prefix`` when it can lead the subjects replies come back on: tokens of a subject, no wildcard, no
    whitespace; else a NatsClientError naming the option."""
    text = str(prefix)
    tokens = text.split(".")
    if not text or any(not token for token in tokens) or any(c in text for c in " \t\r\n*>"):
        raise NatsClientError("inbox_prefix: %r is not a subject prefix: give tokens separated by '.', without "
                              "wildcards or whitespace, such as _INBOX_fleet (replies come back on "
                              "<inbox_prefix>.<id>)" % text)
    return text


class NoRespondersError(NatsClientError):
    """A request that nothing subscribes to: the server answered at once that nobody listens on the subject."""


class NoReplyError(NatsClientError):
    """Requests that got no reply in time."""


class JetStreamError(NatsClientError):
    """An error reply of the JetStream API."""

    def __init__(self, subject, code, err_code, description):
        self.subject = subject
        self.code = code
        self.err_code = err_code
        self.description = description
        super(JetStreamError, self).__init__("%s (%s %s, on %s)" % (description, code, err_code, subject))


def nats_module(argument_spec, jetstream=True, **kwargs):
    """A FleetModule with the shared connection options merged in."""
    spec = dict(CONNECTION_ARGSPEC)
    if jetstream:
        spec.update(JETSTREAM_ARGSPEC)
    spec.update(argument_spec)
    mutually_exclusive = list(kwargs.pop("mutually_exclusive", []))
    mutually_exclusive += [["creds", "creds_data", "nkey_seed", "user", "token"], ["tls_ca", "tls_ca_data"],
                           ["tls_cert", "tls_cert_data"], ["tls_key", "tls_key_data"]]
    mutually_exclusive += [["user_jwt", other] for other in ("creds", "creds_data", "user", "token")]
    if jetstream:
        mutually_exclusive.append(["domain", "api_prefix"])
    return FleetModule(argument_spec=spec, mutually_exclusive=mutually_exclusive, **kwargs)


def connection_params(params, creds):
    """The task's connection options, with the creds file ``creds`` (another account's user) in place
    of the task's credentials when given."""
    if not creds:
        return params
    return dict(params, creds=creds, creds_data=None, nkey_seed=None, user=None, password=None, token=None)


def require_nats_py(params):
    """Raise NatsClientError, worded as ansible's missing_required_lib with the import's traceback in its result
    (``exception``), when nats-py cannot be imported. ``params``: the task's options (their ``servers`` decide
    whether the websocket transport is loaded)."""
    if not load_nats_py((params or {}).get("servers") or ()):
        raise NatsClientError(missing_required_lib(NATS_PY), exception=_IMPORT_ERROR)


class NatsClient(object):
    """One connection for one module run. Use as a context manager."""

    def __init__(self, params):
        self.params = params
        self.timeout = float(params.get("timeout") or 5.0)
        self.servers = params.get("servers") or ["nats://127.0.0.1:4222"]
        self._loop = None
        self._nc = None

    # -- lifecycle -------------------------------------------------------------

    def __enter__(self):
        if not load_nats_py(self.servers):
            raise NatsClientError(missing_required_lib(NATS_PY))
        self._loop = asyncio.new_event_loop()
        try:
            self._nc = self._run(self._connect())
        except Exception:
            self._loop.close()
            self._forget_private_files()
            raise
        return self

    def __exit__(self, *exc):
        try:
            if self._nc is not None and not self._nc.is_closed:
                self._run(self._nc.drain())
        except Exception:
            pass  # the work is done; a failed drain changes nothing for the user
        finally:
            self._loop.close()
            self._forget_private_files()
        return False

    def _private_file(self, name, text):
        """``text`` in a file only this user reads (0600, in a 0700 directory of its own), for what nats-py and ssl
        read from files only (creds and client certificates given as data); removed when the connection closes."""
        import tempfile

        if getattr(self, "_private_dir", None) is None:
            self._private_dir = tempfile.mkdtemp(prefix="nats-edge-")
        path = os.path.join(self._private_dir, name)
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(handle, "w") as out:
            out.write(text)
        return path

    def _forget_private_files(self):
        import shutil

        if getattr(self, "_private_dir", None):
            shutil.rmtree(self._private_dir, ignore_errors=True)
            self._private_dir = None

    def _run(self, coro):
        return self._loop.run_until_complete(coro)

    def _options(self, servers):
        p = self.params
        options = dict(
            servers=servers,
            connect_timeout=self.timeout,
            allow_reconnect=False,
            max_reconnect_attempts=0,
            name=p.get("connection_name") or "ansible nats_edge.fleet",
        )
        if p.get("inbox_prefix"):
            options["inbox_prefix"] = check_inbox_prefix(p["inbox_prefix"])
        if p.get("creds"):
            check_creds_file(p["creds"])
            options["user_credentials"] = p["creds"]
        if p.get("creds_data"):
            check_creds_data(p["creds_data"])
            options["user_credentials"] = self._private_file("user.creds", p["creds_data"])
        if p.get("nkey_seed"):
            _check_seed_file(p["nkey_seed"])
            options["nkeys_seed"] = p["nkey_seed"]
        if p.get("user_jwt"):
            token, seed = check_user_jwt(p["user_jwt"], p.get("nkey_seed"))
            options.pop("nkeys_seed", None)
            # as one creds file, private to the connection: nats-py reads a seed file given apart byte for byte,
            # and a seed file ends in a newline more often than not
            options["user_credentials"] = self._private_file("user.creds", jwt.creds(token, seed))
        if p.get("user"):
            options["user"] = p["user"]
            options["password"] = p.get("password") or ""
        if p.get("token"):
            options["token"] = p["token"]
        if any(p.get(option) for option in ("tls_ca", "tls_cert", "tls_key", "tls_ca_data", "tls_cert_data",
                                            "tls_key_data")):
            options["tls"] = _tls_context(p, self._private_file)
        if p.get("tls_handshake_first"):
            _check_handshake_first(servers)
            options["tls_handshake_first"] = True
            if "tls" not in options:
                options["tls"] = _tls_context(p, self._private_file)  # the system's CAs

        async def quiet(_exc):
            return None

        options["error_cb"] = quiet
        return options

    async def _open(self, options):
        return await asyncio.wait_for(nats.connect(**options), self.timeout + 1)

    async def _connect(self):
        options = self._options(self.servers)  # a bad creds or seed file is its own error, not a failed connect
        try:
            return await self._open(options)
        except Exception as exc:
            raise NatsClientError("cannot connect to %s: %s%s" % (", ".join(redact(s) for s in self.servers),
                                                                  _describe(exc), _handshake_hint(self.params, exc))
                                  ) from exc

    def register_account_everywhere(self):
        """Connect once to each server in ``servers`` with this run's credentials.

        A server that learns of an account only from its routes (a client of the
        account connected to a peer first) holds a placeholder without the
        account's JWT and without JetStream. When that server is the JetStream
        meta leader, the account's API requests answer 10039 (JetStream not
        enabled for account) until a client of the account connects to it
        directly, which makes it load the JWT. Returns whether any server was
        reached."""
        return self._run(self._register_everywhere())

    async def _register_everywhere(self):
        reached = False
        for server in dict.fromkeys(self.servers):
            try:
                nc = await self._open(self._options([server]))
                await nc.flush(self.timeout)
                await nc.close()
                reached = True
            except Exception:
                pass  # a server that is down has no placeholder to replace; the retry reports what remains
        return reached

    # -- requests --------------------------------------------------------------

    def request(self, subject, data=b"", timeout=None):
        """Reply payload of one request."""
        return self._run(self._request(subject, data, timeout or self.timeout))

    async def _request(self, subject, data, timeout):
        try:
            msg = await self._nc.request(subject, data, timeout=timeout)
        except nats_errors.NoRespondersError as exc:
            raise NoRespondersError("nothing answers on %s" % subject) from exc
        except (nats_errors.TimeoutError, asyncio.TimeoutError) as exc:
            raise NatsClientError("no reply on %s within %ss" % (subject, timeout)) from exc
        return msg.data

    def request_json(self, subject, body=None, timeout=None):
        data = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
        return _json_reply(subject, self.request(subject, data, timeout))

    def gather(self, subject, data=b"", timeout=None, expect=None, idle=None):
        """Every reply to one request until ``expect`` replies arrived, no further
        reply came ``idle`` seconds after the last one, or the time is up: for
        requests many servers answer."""
        return self._run(self._gather(subject, data, timeout or self.timeout, expect, idle))

    async def _gather(self, subject, data, timeout, expect, idle=None):
        inbox = self._nc.new_inbox()
        sub = await self._nc.subscribe(inbox)
        replies = []
        try:
            await self._nc.publish(subject, data, reply=inbox)
            deadline = self._loop.time() + timeout
            while expect is None or len(replies) < expect:
                left = deadline - self._loop.time()
                if replies and idle:
                    left = min(left, idle)
                if left <= 0:
                    break
                try:
                    msg = await sub.next_msg(timeout=left)
                except (nats_errors.TimeoutError, asyncio.TimeoutError):
                    break
                replies.append(msg.data)
        finally:
            await sub.unsubscribe()
        return replies

    def server_infos(self, domain=None, system=False, idle=0.5):
        """What every server of ``domain`` (all servers when None) says about itself:
        the replies to ``$SYS.REQ.SERVER.PING.VARZ`` with system account credentials,
        else to ``$SYS.REQ.ACCOUNT.PING.STATZ``, which every account may send (its
        replies carry the servers' names, clusters, domains and tags, but not the
        JetStream configuration). Waits ``idle`` seconds for a further reply."""
        body = {"include_unused": True}
        if domain is not None:
            body.update(domain=domain, exact_match=True)
        subject = "$SYS.REQ.SERVER.PING.VARZ" if system else "$SYS.REQ.ACCOUNT.PING.STATZ"
        replies = []
        for raw in self.gather(subject, json.dumps(body).encode(), idle=idle):
            try:
                reply = json.loads(raw.decode() or "{}")
            except ValueError:
                continue
            server = reply.get("server") or {}
            if reply.get("error") or (domain is not None and (server.get("domain") or "") != domain):
                continue  # before 2.10 the domain filter matches substrings
            replies.append(reply)
        return replies

    def connected_domain(self):
        """JetStream domain of the server this connection is on ("" for none)."""
        return (getattr(self._nc, "_server_info", None) or {}).get("domain") or ""

    def publish(self, subject, data=b"", headers=None):
        self._run(self._nc.publish(subject, data, headers=headers))

    def request_many(self, messages, timeout=None, in_flight=512):
        """Replies (in order) to many requests ``(subject, data, headers)`` from any iterable,
        sent pipelined with at most ``in_flight`` unanswered: JetStream publishes with their
        acks, without a round trip each and without overrunning the server."""
        return self._run(self._request_many(messages, timeout or self.timeout, in_flight))

    async def _request_many(self, messages, timeout, in_flight):
        prefix = self._nc.new_inbox()
        replies, waiting, subjects = {}, {}, {}
        window = asyncio.Semaphore(in_flight)
        all_sent, done = [False], asyncio.Event()

        async def answer(msg):
            index = waiting.pop(msg.subject, None)
            if index is not None:
                replies[index] = msg
                window.release()
                if all_sent[0] and not waiting:
                    done.set()

        sub = await self._nc.subscribe(prefix + ".*", cb=answer)
        count = 0
        try:
            for count, (subject, data, headers) in enumerate(messages, 1):
                await asyncio.wait_for(window.acquire(), timeout)
                reply = "%s.%d" % (prefix, count)
                waiting[reply] = count
                subjects[count] = subject
                await self._nc.publish(subject, data, reply=reply, headers=headers)
            all_sent[0] = True
            if waiting:
                await asyncio.wait_for(done.wait(), timeout)
        except (asyncio.TimeoutError, nats_errors.TimeoutError) as exc:
            raise NoReplyError("%d requests got no reply within %ss (the first on %s)" % (
                len(waiting), timeout, subjects[min(waiting.values())] if waiting else "?")) from exc
        finally:
            await sub.unsubscribe()
        return [replies[index] for index in range(1, count + 1)]

    def publish_into(self, stream, messages, api_prefix=API, domain=None, what=None):
        """Publish ``(subject, data, headers)`` messages into ``stream`` of the domain (or import) that
        ``api_prefix`` names, each acknowledged; the acks, in order.

        Through a prefix other than the local API, each subject is published under it, as the nats clients
        publish KV and object data (``$JS.<domain>.API.$KV.<bucket>.<key>``): the servers hand it to that domain's
        stream, where the bare subject lands in whichever stream of the connected server's domain listens. An
        ack must name ``stream`` (and ``domain``, when given). A message that no stream takes (503) is sent
        again after each of NO_STREAM_RETRIES when ``messages`` is a list, then refused, as is an error ack;
        ``what`` names what was written in the message."""
        prefix = api_prefix.rstrip(".")
        where = _place(domain, prefix)
        retry = isinstance(messages, list)
        delays = iter(NO_STREAM_RETRIES if retry else ())
        positions = list(range(len(messages))) if retry else None
        batch, acks = messages, {}
        while True:
            subjects = []
            try:
                replies = self.request_many(_under_prefix(batch, prefix, subjects))
            except NoReplyError as exc:
                raise NoReplyError("%sno stream acknowledged the messages for stream %s %s: %s; check that the "
                                   "stream exists there and has a leader" % (
                                       "%s: " % what if what else "", stream, where, exc)) from exc
            refused = []
            for index, (reply, subject) in enumerate(zip(replies, subjects)):
                position = positions[index] if retry else index
                if (reply.headers or {}).get("Status") == "503":
                    refused.append((position, subject))
                else:
                    acks[position] = self._stream_ack(reply, stream, domain, subject, what)
            if not refused:
                return [acks[i] for i in sorted(acks)]
            delay = next(delays, None)
            if delay is None:
                raise NoRespondersError("%sno stream takes %s (%d of the messages for stream %s %s): check that the "
                                        "stream exists there and has a leader" % (
                                            "%s: " % what if what else "", refused[0][1], len(refused), stream, where))
            time.sleep(delay)
            positions = [position for position, _subject in refused]
            batch = [messages[position] for position in positions]

    @staticmethod
    def _stream_ack(reply, stream, domain, subject, what):
        """The JetStream ack of one publish, refused unless ``stream`` (of ``domain``) stored it."""
        prefix = "%s: " % what if what else ""
        try:
            ack = json.loads(reply.data.decode() or "{}")
        except ValueError as exc:
            raise NatsClientError("%snot a JetStream ack on %s: %r" % (prefix, subject, reply.data[:100])) from exc
        error = ack.get("error")
        if error:
            raise JetStreamError(subject or stream, error.get("code"), error.get("err_code"),
                                 prefix + error.get("description", ""))
        if ack.get("stream") != stream or (domain and ack.get("domain") != domain):
            raise NatsClientError("%s%s was stored by stream %r%s, not by %r%s" % (
                prefix, subject or "a message", ack.get("stream"),
                " in domain %r" % ack["domain"] if ack.get("domain") else "", stream,
                " in domain %r" % domain if domain else ""))
        return ack

    def last_per_subject(self, api_prefix, stream, filter_subject, timeout=None):
        """The last message of every subject of ``stream`` matching ``filter_subject``, as
        (subject, headers, data, stream sequence): one ephemeral consumer without acks, read in
        batches, the way a key-value watcher reads a bucket's current values."""
        return self.read_stream(api_prefix, stream, filter_subject, "last_per_subject", timeout)

    def read_stream(self, api_prefix, stream, filter_subject, deliver_policy="all", timeout=None):
        """Every message of ``stream`` on ``filter_subject`` there is now (or the last one per
        subject), in order, through ``api_prefix``: mirrors too, which have no subjects of their own."""
        return self._run(self._read_stream(api_prefix, stream, filter_subject, deliver_policy,
                                           timeout or self.timeout))

    async def _read_stream(self, api_prefix, stream, filter_subject, deliver_policy, timeout):
        config = {"deliver_policy": deliver_policy, "ack_policy": "none", "filter_subject": filter_subject,
                  "mem_storage": True, "inactive_threshold": 10 * 10**9, "max_waiting": 1}
        created = await self._nc.request("%s.CONSUMER.CREATE.%s" % (api_prefix, stream), json.dumps(
            {"stream_name": stream, "config": config}).encode(), timeout=timeout)
        info = _api_reply("%s.CONSUMER.CREATE.%s" % (api_prefix, stream), created.data)
        consumer, expected = info["name"], int(info.get("num_pending") or 0)
        found = []
        try:
            inbox = self._nc.new_inbox()
            sub = await self._nc.subscribe(inbox)
            try:
                while len(found) < expected:
                    await self._nc.publish("%s.CONSUMER.MSG.NEXT.%s.%s" % (api_prefix, stream, consumer), json.dumps(
                        {"batch": min(expected - len(found), 10000), "no_wait": True}).encode(), reply=inbox)
                    while len(found) < expected:
                        msg = await sub.next_msg(timeout=timeout)
                        if msg.headers and msg.headers.get("Status"):
                            break  # this batch is over
                        found.append((msg.subject, dict(msg.headers or {}), msg.data, _stream_sequence(msg.reply)))
            finally:
                await sub.unsubscribe()
        except (nats_errors.TimeoutError, asyncio.TimeoutError) as exc:
            raise NatsClientError("reading %s of stream %s: no message within %ss (%d of %d read)" % (
                filter_subject, stream, timeout, len(found), expected)) from exc
        finally:
            try:
                await self._nc.request("%s.CONSUMER.DELETE.%s.%s" % (api_prefix, stream, consumer), b"",
                                       timeout=timeout)
            except Exception:
                pass  # it goes by itself once inactive
        return found

    def acknowledge_through(self, api_prefix, stream, consumer, last_seq, ack_all=False, before_ns=None,
                            timeout=None):
        """Pull ``consumer`` (a pull consumer of ``stream``) and acknowledge what it is given up to stream sequence
        ``last_seq`` and, with ``before_ns``, stored no later than that (ns since the epoch) (``ack_all``: the last
        of each batch, which acknowledges the ones before); the first message past either is given back at once (a
        NAK) and ends the run. Returns how many messages were acknowledged."""
        return self._run(self._acknowledge_through(api_prefix, stream, consumer, last_seq, ack_all, before_ns,
                                                   timeout or self.timeout))

    async def _acknowledge_through(self, api_prefix, stream, consumer, last_seq, ack_all, before_ns, timeout):
        subject = "%s.CONSUMER.MSG.NEXT.%s.%s" % (api_prefix, stream, consumer)
        inbox = self._nc.new_inbox()
        sub = await self._nc.subscribe(inbox)
        acknowledged = 0
        try:
            while True:
                await self._nc.publish(subject, json.dumps({"batch": 256, "no_wait": True}).encode(), reply=inbox)
                newest, done, given = None, False, 0
                while True:
                    try:
                        msg = await sub.next_msg(timeout=timeout)
                    except (nats_errors.TimeoutError, asyncio.TimeoutError) as exc:
                        raise NatsClientError("acknowledging consumer %s of stream %s: no message within %ss (%d "
                                              "acknowledged)" % (consumer, stream, timeout, acknowledged)) from exc
                    if msg.headers and msg.headers.get("Status"):
                        done = done or given == 0  # no message left (404) or the batch was cut short
                        break
                    given += 1
                    sequence, stored = _stream_sequence(msg.reply), _stored_at(msg.reply)
                    if sequence is None or sequence > last_seq or (before_ns is not None and (
                            stored is None or stored > before_ns)):
                        await self._nc.publish(msg.reply, b"-NAK")
                        done = True
                        continue
                    acknowledged += 1
                    newest = msg.reply
                    if not ack_all:
                        await self._nc.publish(msg.reply, b"+ACK")
                    if given == 256:
                        break
                if ack_all and newest:
                    await self._nc.publish(newest, b"+ACK")
                await self._nc.flush(timeout=timeout)
                if done:
                    return acknowledged
        finally:
            await sub.unsubscribe()

    def flush(self):
        self._run(self._nc.flush(timeout=self.timeout))

    def server_version(self):
        """The version the connected server announced (its INFO), "" when it said none."""
        return str((getattr(self._nc, "_server_info", None) or {}).get("version") or "")

    def snapshot_stream(self, api_prefix, stream, body, handle, timeout=None):
        """Take a snapshot of ``stream`` through ``api_prefix`` ($JS.API.STREAM.SNAPSHOT.<stream>, ``body`` the
        request without its deliver subject) and write its chunks to the binary file object ``handle`` as they
        arrive, acknowledging each (the server sends no more than a window ahead of the acks). Returns the reply
        (the stream's config and state as snapshot) and the number of bytes written; an error reply, or a snapshot
        the server ends with an error status, raises."""
        return self._run(self._snapshot(api_prefix, stream, body, handle, timeout or self.timeout))

    async def _snapshot(self, api_prefix, stream, body, handle, timeout):
        subject = "%s.STREAM.SNAPSHOT.%s" % (api_prefix, stream)
        inbox = self._nc.new_inbox()
        sub = await self._nc.subscribe(inbox)
        size = 0
        try:
            raw = await self._request(subject, json.dumps(dict(body, deliver_subject=inbox)).encode(), timeout)
            reply = _api_reply(subject, raw)
            while True:
                try:
                    msg = await sub.next_msg(timeout=timeout)
                except (nats_errors.TimeoutError, asyncio.TimeoutError) as exc:
                    raise NatsClientError("snapshot of stream %s: no chunk within %ss (%d bytes received)" % (
                        stream, timeout, size)) from exc
                status = (msg.headers or {}).get("Status")
                if not msg.data:  # the end: no status (before 2.10), 204, or the error that ended it
                    if status and status != "204":
                        raise NatsClientError("snapshot of stream %s ended with %s %s after %d bytes" % (
                            stream, status, (msg.headers or {}).get("Description") or "", size))
                    break
                handle.write(msg.data)
                size += len(msg.data)
                if msg.reply:
                    await self._nc.publish(msg.reply, b"")
        finally:
            await sub.unsubscribe()
        return reply, size

    def restore_stream(self, api_prefix, stream, body, chunks, timeout=None, in_flight=8):
        """Restore ``stream`` through ``api_prefix`` ($JS.API.STREAM.RESTORE.<stream>, ``body`` its config and
        state) from the snapshot's ``chunks`` (an iterable of bytes), each acknowledged by the server, at most
        ``in_flight`` unacknowledged. Returns the reply to the end of the upload: the restored stream's info."""
        subject = "%s.STREAM.RESTORE.%s" % (api_prefix, stream)
        reply = _api_reply(subject, self.request(subject, json.dumps(body).encode(), timeout))
        deliver = reply.get("deliver_subject")
        if not deliver:
            raise NatsClientError("the restore of stream %s got no subject to send the snapshot to: %r" % (
                stream, reply))
        for ack in self.request_many(((deliver, chunk, None) for chunk in chunks), timeout, in_flight):
            if ack.data or (ack.headers or {}).get("Status"):
                raise NatsClientError("restore of stream %s: the server refused a chunk: %s" % (
                    stream, (ack.data or b"").decode("utf-8", "replace")[:300] or ack.headers.get("Status")))
        return _api_reply(subject, self.request(deliver, b"", timeout))


class JetStream(object):
    """The JetStream API of one domain or import prefix, with a log of the
    requests a run made (or, in check mode, would make)."""

    def __init__(self, client, domain=None, api_prefix=None):
        self.client = client
        self.domain = domain
        if api_prefix:
            self.prefix = api_prefix.rstrip(".")
        elif domain:
            self.prefix = "$JS.%s.API" % domain
        else:
            self.prefix = API
        self.actions = []
        self._registered = False

    def where(self):
        return _place(self.domain, self.prefix)

    def call(self, name, body=None, timeout=None):
        """Send one API request and return its reply; error replies raise."""
        subject = "%s.%s" % (self.prefix, name)
        try:
            reply = self.client.request_json(subject, body, timeout)
        except NoRespondersError as exc:
            raise NoRespondersError("no JetStream answers on %s (%s): check domain / api_prefix and that "
                                    "JetStream is enabled for the account" % (subject, self.where())) from exc
        error = reply.get("error")
        if error and error.get("err_code") == JS_NOT_ENABLED_FOR_ACCOUNT and not self._registered:
            # see NatsClient.register_account_everywhere: once per API handle, then the same request again
            self._registered = True
            if self.client.register_account_everywhere():
                reply = self._ask_again(subject, body, timeout, (0.2, 0.5, 1.0), (JS_NOT_ENABLED_FOR_ACCOUNT,))
                error = reply.get("error")
        suffix = ""
        if error and error.get("err_code") == JS_STREAM_STORE_FAILED and name.startswith("STREAM.CREATE."):
            store_failed = (JS_STREAM_STORE_FAILED, JS_STREAM_NAME_IN_USE)
            reply = self._ask_again(subject, body, timeout, STORE_FAILED_RETRIES, store_failed)
            error = reply.get("error")
            if error and error.get("err_code") in store_failed:
                suffix = " (%d tries over %gs: a server of the stream's placement could not create its store, " \
                         "and its log says why)" % (len(STORE_FAILED_RETRIES) + 1, sum(STORE_FAILED_RETRIES))
        if error:
            raise JetStreamError(subject, error.get("code"), error.get("err_code"),
                                 error.get("description", "") + suffix)
        return reply

    def every_page(self, name, key):
        """Every item of a paged list request (``STREAM.NAMES`` with key ``streams``, ``CONSUMER.LIST.<stream>``
        with ``consumers``), page after page as the API gives them."""
        found, offset = [], 0
        while True:
            reply = self.call(name, {"offset": offset})
            page = reply.get(key) or []
            found += page
            offset += len(page)
            if not page or offset >= int(reply.get("total") or 0):
                return found

    def lookup(self, name, missing=JS_STREAM_NOT_FOUND):
        """The reply of an INFO request (``STREAM.INFO.<stream>``), None when the API answers that what it
        names does not exist (``missing``: JS_STREAM_NOT_FOUND or JS_CONSUMER_NOT_FOUND); other errors raise."""
        try:
            return self.call(name)
        except JetStreamError as exc:
            if exc.err_code == missing:
                return None
            raise

    def _ask_again(self, subject, body, timeout, delays, err_codes):
        """The same request after each delay until its reply is not one of ``err_codes``; the last reply."""
        for delay in delays:
            time.sleep(delay)
            reply = self.client.request_json(subject, body, timeout)
            if (reply.get("error") or {}).get("err_code") not in err_codes:
                break
        return reply

    def change(self, name, body, check_mode):
        """A request that changes something: logged always, sent unless in check mode."""
        self.actions.append({"subject": "%s.%s" % (self.prefix, name), "body": body})
        if check_mode:
            return None
        return self.call(name, body)


def _place(domain, prefix):
    """Where an API prefix leads, for messages: a domain, an import's prefix, or the connected server's domain."""
    return "in domain %r" % domain if domain else "through %s" % prefix if prefix != API else "in the local domain"


def _json_reply(subject, raw):
    """The JSON of a reply on ``subject`` ({} when empty); anything else raises NatsClientError."""
    try:
        return json.loads(raw.decode() or "{}")
    except ValueError as exc:
        raise NatsClientError("reply on %s is not JSON: %r" % (subject, raw[:200])) from exc


def _api_reply(subject, raw):
    """The JSON reply of a JetStream API request on ``subject``; an error reply raises JetStreamError."""
    reply = _json_reply(subject, raw)
    error = reply.get("error")
    if error:
        raise JetStreamError(subject, error.get("code"), error.get("err_code"), error.get("description", ""))
    return reply


def _under_prefix(messages, prefix, subjects):
    """``messages`` with each subject under ``prefix`` (bare under the local API), each one noted in ``subjects``."""
    for subject, data, headers in messages:
        subjects.append(subject if prefix == API else "%s.%s" % (prefix, subject))
        yield subjects[-1], data, headers


def _stream_sequence(reply):
    """The stream sequence in a JetStream delivery's reply subject
    ($JS.ACK[.<domain>.<account hash>].<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>)."""
    tokens = (reply or "").split(".")
    try:
        return int(tokens[-4]) if len(tokens) >= 9 else None
    except ValueError:
        return None


def _stored_at(reply):
    """When the message of a JetStream delivery was stored (ns since the epoch), from its reply subject."""
    tokens = (reply or "").split(".")
    try:
        return int(tokens[-2]) if len(tokens) >= 9 else None
    except ValueError:
        return None


def _readable(path, option):
    if not os.path.exists(path):
        raise NatsClientError("%s: %s does not exist" % (option, path))
    if not os.path.isfile(path):
        raise NatsClientError("%s: %s is not a file" % (option, path))
    if not os.access(path, os.R_OK):
        raise NatsClientError("%s: %s is not readable" % (option, path))


def _read(path, option):
    _readable(path, option)
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", errors="replace")
    except OSError as exc:
        raise NatsClientError("%s: cannot read %s: %s" % (option, path, exc.strerror or exc)) from exc


def check_creds_file(path, option="creds"):
    """Claims of the user in a creds file; a clear error, naming the option
    and the path but never the content, when it is not a creds file."""
    try:
        return jwt.parse_creds(_read(path, option))[1]
    except jwt.JWTError as exc:
        raise NatsClientError("%s: %s is %s" % (option, path, exc)) from exc


def _check_seed_file(path, option="nkey_seed"):
    try:
        jwt.check_seed(_read(path, option).strip(), "user")
    except jwt.JWTError as exc:
        raise NatsClientError("%s: %s does not hold a user nkey seed (%s)" % (option, path, exc)) from exc


def check_creds_data(text, option="creds_data"):
    """Claims of the user in creds given as text; a clear error naming the option, never the content."""
    try:
        return jwt.parse_creds(text)[1]
    except jwt.JWTError as exc:
        raise NatsClientError("%s: the text given is %s" % (option, exc)) from exc


def check_user_jwt(path, seed_path):
    """(JWT, seed) of a user JWT file and the seed of its user (natscli's --jwt and --seed), checked: the JWT is a
    user's, and the seed is that user's key; errors name the options and files, never their content."""
    if not seed_path:
        raise NatsClientError("user_jwt: %s is given without nkey_seed, the seed of its user" % path)
    token = _read(path, "user_jwt").strip()
    try:
        claims = jwt.decode(token, verify=False)
    except jwt.JWTError as exc:
        raise NatsClientError("user_jwt: %s does not hold a JWT (%s)" % (path, exc)) from exc
    if (claims.get("nats") or {}).get("type") != "user":
        raise NatsClientError("user_jwt: %s holds a JWT of a %s, not of a user" % (
            path, (claims.get("nats") or {}).get("type") or "key of no type"))
    seed = _read(seed_path, "nkey_seed").strip()
    try:
        public = jwt.check_seed(seed, "user")
    except jwt.JWTError as exc:
        raise NatsClientError("nkey_seed: %s does not hold a user nkey seed (%s)" % (seed_path, exc)) from exc
    if claims.get("sub") != public:
        raise NatsClientError("user_jwt: %s is the JWT of user %s, and nkey_seed %s holds the seed of %s" % (
            path, claims.get("sub"), seed_path, public))
    return token, seed


def _pem_data(p, option, marker):
    text = p.get(option) or ""
    if "-----BEGIN " not in text or marker not in text:
        raise NatsClientError("%s: the text given holds no PEM %s" % (option, marker.lower()))
    return text


def _tls_context(p, private_file=None):
    """The client's TLS context from files (``tls_ca``, ``tls_cert``, ``tls_key``) or PEM text (the ``*_data``
    options; a certificate and key given as text go through ``private_file``, as ssl loads them from files)."""
    for option in ("tls_ca", "tls_cert", "tls_key"):
        if p.get(option):
            _readable(p[option], option)
    cert = p.get("tls_cert") or (p.get("tls_cert_data") and private_file(
        "client.pem", _pem_data(p, "tls_cert_data", "CERTIFICATE")))
    key = p.get("tls_key") or (p.get("tls_key_data") and private_file(
        "client-key.pem", _pem_data(p, "tls_key_data", "PRIVATE KEY")))
    if key and not cert:
        if p.get("tls_key"):
            raise NatsClientError("tls_key: %s is given without tls_cert" % p["tls_key"])
        raise NatsClientError("tls_key_data: a key is given without tls_cert or tls_cert_data")
    try:
        if p.get("tls_ca_data"):
            context = ssl.create_default_context(cadata=_pem_data(p, "tls_ca_data", "CERTIFICATE"))
        else:
            context = ssl.create_default_context(cafile=p.get("tls_ca"))
    except ssl.SSLError as exc:
        where = p["tls_ca"] if p.get("tls_ca") else "the text given"
        raise NatsClientError("%s: %s holds no usable CA certificate (%s)" % (
            "tls_ca" if p.get("tls_ca") else "tls_ca_data", where, exc.reason or exc)) from exc
    if cert:
        try:
            context.load_cert_chain(cert, key or None)
        except ssl.SSLError as exc:
            shown_cert = p.get("tls_cert") or "tls_cert_data"
            shown_key = p.get("tls_key") or ("tls_key_data" if p.get("tls_key_data") else "(in the same file)")
            raise NatsClientError("tls_cert/tls_key: cannot load the client certificate %s with key %s (%s)" % (
                shown_cert, shown_key, exc.reason or exc)) from exc
    return context


def _check_handshake_first(servers):
    """tls_handshake_first needs a nats-py whose connect() takes it, and NATS URLs: a websocket connection runs TLS
    through wss:// (the server's websocket listener has no handshake_first)."""
    import inspect

    from nats.aio.client import Client

    if "tls_handshake_first" not in inspect.signature(Client.connect).parameters:
        raise NatsClientError("tls_handshake_first: this nats-py cannot start TLS before the server's INFO; it needs "
                              "%s %s or later on the host the module runs on"
                              % (NATS_PY, TLS_HANDSHAKE_FIRST_NATS_PY))
    websocket = [server for server in servers if str(server).startswith(("ws://", "wss://"))]
    if websocket:
        raise NatsClientError("tls_handshake_first: %s is a websocket URL; the TLS handshake first applies to the "
                              "client port (nats:// or tls:// URLs), a websocket connection runs TLS with wss://"
                              % redact(websocket[0]))


def _handshake_hint(params, exc):
    """Why a connection that fails as a TLS-first mismatch fails, for the message: a server whose client port wants
    the TLS handshake first closes a connection that waits for its INFO, and one that sends its INFO first never
    answers a client that starts with the handshake."""
    if params.get("tls_handshake_first"):
        # the server's plaintext INFO read as a TLS record, or nothing read at all before the time was up
        if isinstance(exc, asyncio.TimeoutError) or "timed out" in str(exc).lower() or (
                "wrong version number" in str(exc).lower()):
            return (" (with tls_handshake_first the client starts TLS before the server's INFO; a server without "
                    "handshake_first in its client tls block sends its INFO in plaintext instead: set "
                    "tls_handshake_first: false for it)")
        return ""
    if "when expecting INFO" in str(exc) or "empty response" in str(exc):
        return (" (the server closed the connection before its INFO: a server with handshake_first in its client "
                "tls block (nats_server_client_tls_handshake_first) wants the client to start TLS first; set "
                "tls_handshake_first: true)")
    return ""


def _describe(exc):
    text = str(exc) or exc.__class__.__name__
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    return redact(text)
