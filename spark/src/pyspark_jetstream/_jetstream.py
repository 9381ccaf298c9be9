"""The part of the JetStream API the reader needs: where a stream starts and
ends, and short-lived ordered push consumers over a range of sequences.

Reading from another account goes through the exports ``nsc_export``'s
``share_stream`` generates: consumer creation under an API prefix, delivery
under a deliver prefix, and flow control. ``STREAM.INFO`` is not among them,
so the bounds of a stream can also be learnt from a consumer that is created
and never read (``probe``).
"""

from __future__ import annotations

import binascii
import json
import os

from pyspark_jetstream._nats import NatsError, NoResponders

NANOS = 1000000000


class JetStreamError(NatsError):
    """An error reply of the JetStream API, with its codes."""

    def __init__(self, subject, code, err_code, description):
        self.code, self.err_code, self.description = code, err_code, description
        super(JetStreamError, self).__init__("%s (%s %s, on %s)" % (description, code, err_code, subject))


def api_prefix(domain=None, prefix=None):
    """The API subject prefix: ``prefix`` as given (another account's API
    imported under a local name), else the domain's, else the local one."""
    if prefix:
        return prefix.rstrip(".")
    if domain:
        return "$JS.%s.API" % domain
    return "$JS.API"


def consumer_name():
    return "spark_" + binascii.hexlify(os.urandom(8)).decode()


class JetStream(object):
    """JetStream API calls over a Connection, under one API prefix."""

    def __init__(self, conn, api="$JS.API", timeout=None):
        self.conn = conn
        self.api = api
        self.timeout = timeout

    def call(self, suffix, payload=None):
        subject = "%s.%s" % (self.api, suffix)
        body = b"" if payload is None else json.dumps(payload).encode()
        try:
            reply = self.conn.request(subject, body, timeout=self.timeout)
        except NoResponders:
            raise NoResponders("no JetStream answers on %s (wrong domain or api_prefix, JetStream off, "
                               "or the account may not use this API)" % subject)
        answer = json.loads(reply.decode() or "{}")
        error = answer.get("error")
        if error:
            raise JetStreamError(subject, error.get("code"), error.get("err_code"), error.get("description"))
        return answer

    def stream_info(self, stream):
        return self.call("STREAM.INFO.%s" % stream)

    def create_consumer(self, stream, config):
        """An ephemeral consumer named ``config['name']``; the server's consumer info."""
        name = config["name"]
        subject = "CONSUMER.CREATE.%s.%s" % (stream, name)
        if config.get("filter_subject"):
            subject += "." + config["filter_subject"]
        return self.call(subject, {"stream_name": stream, "config": config})

    def delete_consumer(self, stream, name):
        """Delete a consumer; a missing consumer or an API that does not offer
        deletion (another account's shared stream) is not an error: ephemeral
        consumers also go by themselves after their inactive threshold."""
        try:
            self.call("CONSUMER.DELETE.%s.%s" % (stream, name))
        except (NoResponders, JetStreamError):
            pass

    def probe(self, stream, filter_subject=None, deliver_subject=None, **policy):
        """(first sequence of ``policy``, matching messages from there): the
        state of a consumer that is created and deleted without being read.
        ``policy``: deliver_policy and opt_start_seq / opt_start_time."""
        config = dict(name=consumer_name(), ack_policy="none", inactive_threshold=5 * NANOS,
                      mem_storage=True, num_replicas=1, **policy)
        if filter_subject:
            config["filter_subject"] = filter_subject
        if deliver_subject:
            config["deliver_subject"] = deliver_subject
        info = self.create_consumer(stream, config)
        try:
            delivered = info.get("delivered") or {}
            return int(delivered.get("stream_seq", 0)) + 1, int(info.get("num_pending", 0))
        finally:
            self.delete_consumer(stream, config["name"])

    def bounds(self, stream, filter_subject=None, deliver_subject=None):
        """(first, last) sequence of the stream, or of the messages matching
        ``filter_subject`` when only consumers are available; (first, first - 1)
        when there is nothing to read."""
        try:
            state = self.stream_info(stream)["state"]
            first, last = int(state["first_seq"]), int(state["last_seq"])
            # a stream never written to says 0, 0; one emptied says last + 1, last
            if not state.get("messages"):
                first = last + 1
            return first, last
        except NoResponders:
            pass
        first, pending = self.probe(stream, filter_subject, deliver_subject, deliver_policy="all")
        if pending == 0:
            return first, first - 1
        last, _pending = self.probe(stream, filter_subject, deliver_subject, deliver_policy="last")
        return first, last

    def seq_at_time(self, stream, when_rfc3339, filter_subject=None, deliver_subject=None):
        """The first sequence stored at or after a time (RFC 3339)."""
        first, _pending = self.probe(stream, filter_subject, deliver_subject, deliver_policy="by_start_time",
                                     opt_start_time=when_rfc3339)
        return first
