"""The collector: one system-account connection at the hub, and per collection the fleet's answers to
``$SYS.REQ.SERVER.PING.<VARZ|JSZ|LEAFZ|HEALTHZ>``.

The connection is opened at the first collection and kept (nats-py reconnects on its own); a collection never
raises: whatever goes wrong becomes a snapshot with ``connected`` False and the reason in ``error``.
"""

import asyncio
import json
import logging
import ssl
import threading
import time

__all__ = ["REQUESTS", "Snapshot", "Collector", "ping_fanout"]

LOG = logging.getLogger("nats_edge_monitor")

# kind -> (subject, request body). JSZ is asked without leader_only: with it only the JetStream meta leader of
# a cluster answers (the others skip the request), so a clustered site's other servers would never show their
# JetStream usage and a collection would always wait out its timeout; each stream is taken from its leader's
# answer instead (metrics.py).
REQUESTS = {
    "varz": ("$SYS.REQ.SERVER.PING.VARZ", {}),
    "jsz": ("$SYS.REQ.SERVER.PING.JSZ", {"accounts": True, "streams": True, "consumer": True, "config": True}),
    "leafz": ("$SYS.REQ.SERVER.PING.LEAFZ", {}),
    "healthz": ("$SYS.REQ.SERVER.PING.HEALTHZ", {}),
}


class Snapshot(object):
    """What one collection saw: ``answers[kind][server name]`` is the server's whole answer
    (``{"server": {...}, "data": {...}}``, or with ``error``)."""

    def __init__(self, connected, answers=None, error=None, started=None, duration=0.0):
        self.connected = connected
        self.answers = answers if answers is not None else dict((kind, {}) for kind in REQUESTS)
        self.error = error
        self.started = time.time() if started is None else started
        self.duration = duration

    def answered(self):
        """Names of the servers that answered at least one request."""
        names = set()
        for by_server in self.answers.values():
            names.update(by_server)
        return names

    def server_info(self, name):
        """The ``server`` block a server sent with its answers (name, id, domain, cluster, ver...)."""
        for kind in REQUESTS:
            answer = self.answers.get(kind, {}).get(name)
            if answer and isinstance(answer.get("server"), dict):
                return answer["server"]
        return {}


def _import_nats():
    try:
        import nats  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        raise RuntimeError("the collector needs the nats-py library (pip package nats-py): %s" % exc)
    return nats


def _tls_context(ca):
    context = ssl.create_default_context(cafile=ca)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


async def connect(nats_config, name="nats-edge-monitor"):
    """A nats-py connection as the config's ``nats`` block asks: TLS verified against ``ca``, the creds file;
    reconnecting on its own for as long as it lives."""
    nats = _import_nats()
    options = dict(servers=nats_config["servers"], name=name, connect_timeout=max(1.0, nats_config["timeout"]),
                   allow_reconnect=True, max_reconnect_attempts=1, reconnect_time_wait=0.5,
                   ping_interval=20, max_outstanding_pings=3)
    if nats_config.get("creds"):
        options["user_credentials"] = nats_config["creds"]
    if nats_config.get("ca"):
        options["tls"] = _tls_context(nats_config["ca"])

    async def on_error(exc):
        LOG.warning("NATS connection: %s", exc)

    async def on_disconnect():
        LOG.warning("NATS connection lost; reconnecting")

    async def on_reconnect():
        LOG.info("NATS connection back")

    # a first connect gives up after trying each server twice (nats-py would otherwise retry it forever);
    # once connected, the connection reconnects for as long as it lives
    nc = await nats.connect(error_cb=on_error, disconnected_cb=on_disconnect, reconnected_cb=on_reconnect,
                            **options)
    nc.options["max_reconnect_attempts"] = -1
    return nc


async def gather(nc, subject, body, expected, timeout):
    """{server name: answer} of the servers that answered ``subject`` within ``timeout`` seconds; returns as soon
    as every name in ``expected`` answered (with nothing expected, waits the whole timeout)."""
    nats = _import_nats()
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    answers = {}
    deadline = time.monotonic() + timeout
    try:
        await nc.publish(subject, json.dumps(body).encode(), reply=inbox)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (expected and expected.issubset(answers)):
                break
            try:
                msg = await sub.next_msg(timeout=remaining)
            except nats.errors.TimeoutError:
                break
            try:
                answer = json.loads(msg.data.decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                continue
            server = answer.get("server") if isinstance(answer, dict) else None
            name = server.get("name") if isinstance(server, dict) else None
            if name:
                answers[name] = answer
    finally:
        try:
            await sub.unsubscribe()
        except Exception:  # pylint: disable=broad-except
            pass
    return answers


async def ping_fanout(nc, expected, timeout):
    """The bare ``$SYS.REQ.SERVER.PING`` fan-out (STATSZ of every server): the reference the collection is
    compared with."""
    return await gather(nc, "$SYS.REQ.SERVER.PING", {}, expected, timeout)


class Collector(object):
    """Collections through one kept connection, from any thread: the connection lives on a private event loop
    in a daemon thread."""

    def __init__(self, nats_config, expected=()):
        self.nats_config = nats_config
        self.expected = set(expected)
        self._nc = None
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="nats-edge-monitor-loop", daemon=True)
        self._thread.start()

    def run(self, coroutine, timeout):
        """Run ``coroutine`` on the collector's loop and wait for it at most ``timeout`` seconds."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()
            raise

    def collect(self):
        """A Snapshot; never raises."""
        started, clock = time.time(), time.monotonic()
        timeout = self.nats_config["timeout"]
        with self._lock:
            try:
                snapshot = self.run(self._collect(), timeout + max(1.0, timeout) + 5)
            except Exception as exc:  # pylint: disable=broad-except
                message = str(exc) or type(exc).__name__
                LOG.warning("collection failed: %s", message)
                snapshot = Snapshot(False, error=message)
        snapshot.started = started
        snapshot.duration = time.monotonic() - clock
        return snapshot

    async def connection(self):
        """The kept connection (opened now if there is none), or None while it is reconnecting."""
        if self._nc is None or self._nc.is_closed:
            self._nc = await connect(self.nats_config)
        if not self._nc.is_connected:
            return None
        return self._nc

    async def _collect(self):
        nc = await self.connection()
        if nc is None:
            return Snapshot(False, error="not connected (reconnecting)")
        timeout = self.nats_config["timeout"]
        kinds = sorted(REQUESTS)
        results = await asyncio.gather(*[gather(nc, REQUESTS[kind][0], REQUESTS[kind][1], self.expected, timeout)
                                         for kind in kinds])
        return Snapshot(True, answers=dict(zip(kinds, results)))

    def close(self):
        """Close the connection and stop the loop."""
        async def _close():
            if self._nc is not None and not self._nc.is_closed:
                await self._nc.close()
        try:
            self.run(_close(), 5)
        except Exception:  # pylint: disable=broad-except
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
