# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Converging one durable consumer on a server: fetch the stream and the consumer, plan, act unless in
check mode, report. Private to the collection; jetstream_consumer and the fleet's domain runs use it.
"""

from __future__ import annotations

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.consumer_model import (
    ACK_POLICIES, FIELDS, PAUSE, PRIORITY_POLICIES, ConsumerInputError, ImmutableChange, actual_config, check_name,
    desired_config, display, domain_version, duration_warnings, filter_warnings, merged_config, plan, request_body)
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import (
    JS_CONSUMER_NOT_FOUND, JetStreamError, NatsClientError)


_DURATION = dict(type="raw")
ARGUMENT_SPEC = dict(
    stream=dict(type="str", required=True),
    name=dict(type="str", required=True, aliases=["durable_name", "durable"]),
    state=dict(type="str", choices=["present", "absent"], default="present"),
    on_immutable_change=dict(type="str", choices=["fail", "recreate"], default="fail"),
    description=dict(type="str"),
    deliver_policy=dict(type="str", choices=["all", "last", "new", "by_start_sequence", "by_start_time",
                                             "last_per_subject"]),
    opt_start_seq=dict(type="int"),
    opt_start_time=dict(type="raw"),
    ack_policy=dict(type="str", choices=list(ACK_POLICIES)),
    ack_wait=_DURATION,
    max_deliver=dict(type="int"),
    backoff=dict(type="list", elements="raw"),
    filter_subject=dict(type="str"),
    filter_subjects=dict(type="list", elements="str"),
    replay_policy=dict(type="str", choices=["instant", "original"]),
    sample_freq=dict(type="raw"),
    max_ack_pending=dict(type="int"),
    inactive_threshold=_DURATION,
    headers_only=dict(type="bool"),
    num_replicas=dict(type="int"),
    mem_storage=dict(type="bool"),
    metadata=dict(type="dict"),
    max_waiting=dict(type="int"),
    max_batch=dict(type="int"),
    max_expires=_DURATION,
    max_bytes=dict(type="raw"),
    deliver_subject=dict(type="str"),
    deliver_group=dict(type="str"),
    flow_control=dict(type="bool"),
    idle_heartbeat=_DURATION,
    rate_limit_bps=dict(type="int"),
    priority_groups=dict(type="list", elements="str"),
    priority_policy=dict(type="str", choices=list(PRIORITY_POLICIES)),
    priority_timeout=_DURATION,
    pause_until=dict(type="str"),
    paused=dict(type="bool"),
)


def consumer_label(params):
    return "consumer %r on stream %r" % (params["name"], params["stream"])


def checked_consumer(module, params):
    """The config to converge (empty to delete) of the consumer ``params`` (checked against ARGUMENT_SPEC),
    its names checked; warnings about its durations go to ``module``. Raises ConsumerInputError."""
    check_name("stream", params["stream"])
    check_name("name", params["name"])
    if params["state"] != "present":
        return {}
    desired = desired_config(params)
    for warning in duration_warnings(params):
        module.warn("%s: %s" % (consumer_label(params), warning))
    return desired


class ConsumerFailure(NatsEdgeError):
    """A failure worded for the user, with extra result keys (``result``)."""


class ConsumerManager(object):
    """Fetch the stream and consumer, plan, act unless in check mode, report."""

    def __init__(self, module, js, params=None):
        self.module = module
        # the task's options, or one item's (already checked against ARGUMENT_SPEC)
        self.params = module.params if params is None else params
        self.js = js
        self.stream = self.params["stream"]
        self.name = self.params["name"]
        self.label = "consumer %r on stream %r %s" % (self.name, self.stream, js.where())
        self.applied = 0

    def fail(self, text, **extra):
        extra.setdefault("changed", self.applied > 0)
        raise ConsumerFailure("%s: %s" % (self.label, text), **extra)

    def run(self, desired):
        state = self.params["state"]
        stream_info = self._stream_info()
        if stream_info is None:
            if state == "absent":
                return self._result("none", [], {}, {})
            self.fail("stream %r does not exist %s" % (self.stream, self.js.where()))
        current = self._consumer_info()
        current_config = current.get("config") if current else None
        version = domain_version(self._account_info(), stream_info.get("config"), current_config)
        try:
            decided = plan(self.name, state, desired, current_config, version, self.params["on_immutable_change"])
        except ImmutableChange as exc:
            self.fail("nats-server cannot change this on an existing consumer: %s; nothing was changed "
                      "(on_immutable_change: recreate deletes and recreates it, and its delivery state starts "
                      "over)" % exc, changed_fields=exc.changed, immutable_fields=exc.fields, actions=[])
        except ConsumerInputError as exc:
            self.fail(str(exc), field=exc.field, actions=[])

        if state == "present":
            for subject in filter_warnings(desired.get("filter_subjects") or [], stream_info.get("config")):
                self.module.warn("%s: filter %r matches none of the stream's subjects %s"
                                 % (self.label, subject, stream_info["config"].get("subjects")))
        check_mode = self.module.check_mode
        subject = "CONSUMER.CREATE.%s.%s" % (self.stream, self.name)
        reply = None
        if decided.action in ("create", "update") and decided.config is not None:
            reply = self._send(subject, request_body(self.stream, decided.config, version, decided.action),
                               decided)
        elif decided.action == "recreate":
            self._send("CONSUMER.DELETE.%s.%s" % (self.stream, self.name), None, decided)
            try:
                reply = self._send(subject, request_body(self.stream, decided.config, version, "create"), decided)
            except ConsumerFailure as exc:
                self._restore(current_config, version, exc)
        elif decided.action == "delete":
            self._send("CONSUMER.DELETE.%s.%s" % (self.stream, self.name), None, decided)
        if decided.pause is not None:
            self._send("CONSUMER.PAUSE.%s.%s" % (self.stream, self.name), decided.pause, decided)
            reply = None if check_mode else self._consumer_info()  # the pause reply holds no config

        if decided.action == "delete":
            after = {}
        elif check_mode and decided.config is not None:
            after = {"stream_name": self.stream, "name": self.name, "config": decided.config}
        elif check_mode and decided.pause is not None:
            after = _paused(current, decided.pause)
        else:
            after = dict((k, v) for k, v in (reply or current or {}).items() if k != "type")
        return self._result(decided.action, decided.changed, current, after, desired, decided)

    def _send(self, name, body, decided):
        try:
            reply = self.js.change(name, body, self.module.check_mode)
            self.applied += 0 if self.module.check_mode else 1
            return reply
        except JetStreamError as exc:
            fields = " (changing %s)" % ", ".join(decided.changed) if decided.changed else ""
            self.fail("the server refused to %s it%s: %s (err_code %s)" % (
                decided.action, fields, exc.description, exc.err_code), err_code=exc.err_code, actions=self.js.actions)
        except NatsClientError as exc:
            self.fail("no answer while trying to %s it, so its state is unknown: %s" % (decided.action, exc),
                      actions=self.js.actions)

    def _restore(self, old_config, version, failure):
        """The consumer was deleted but its new config refused: put the old one back."""
        restored = merged_config(self.name, {}, old_config)
        try:
            self.js.call("CONSUMER.CREATE.%s.%s" % (self.stream, self.name),
                         request_body(self.stream, restored, version, "create"))
            outcome = "the consumer was recreated with its old config (its delivery state starts over)"
        except NatsClientError as exc:
            outcome = "recreating it with its old config failed too (%s): the consumer is gone" % exc
        raise ConsumerFailure("%s; %s" % (failure.msg, outcome), **failure.result) from failure

    def _stream_info(self):
        try:
            return self.js.lookup("STREAM.INFO.%s" % self.stream)
        except JetStreamError as exc:
            self.fail("cannot read stream %r: %s (err_code %s)" % (self.stream, exc.description, exc.err_code))

    def _consumer_info(self):
        try:
            return self.js.lookup("CONSUMER.INFO.%s.%s" % (self.stream, self.name), JS_CONSUMER_NOT_FOUND)
        except JetStreamError as exc:
            self.fail("cannot read the consumer: %s (err_code %s)" % (exc.description, exc.err_code))

    def _account_info(self):
        """Optional: an imported API may not include the account info request."""
        try:
            return self.js.call("INFO")
        except NatsClientError:
            return None

    def _result(self, action, changed, current, after, desired=None, decided=None):
        result = dict(changed=action != "none", operation=action, changed_fields=list(changed),
                      consumer=after, actions=self.js.actions)
        if self.module._diff:
            result["diff"] = self._diff(action, changed, current, desired or {}, decided)
        return result

    def _diff(self, action, changed, current, desired, decided):
        actual = actual_config(current.get("config")) if current else {}
        if action == "none":
            return {"before": {}, "after": {}}
        if action == "delete":
            return {"before": display(_set_only(actual)), "after": {}}
        if action == "create":
            return {"before": {}, "after": display(_set_only(actual_config(decided.config)))}
        return {"before": display(dict((f, actual.get(f)) for f in changed)),
                "after": display(dict((f, desired[f]) for f in changed))}


def _paused(current, pause):
    """Check mode: the consumer as a CONSUMER.PAUSE with ``pause`` would leave it."""
    after = dict((k, v) for k, v in current.items() if k not in ("type", "paused", "pause_remaining"))
    config = dict(after.get("config") or {})
    config.pop(PAUSE, None)
    if pause.get(PAUSE):
        config[PAUSE] = pause[PAUSE]
    after["config"] = config
    return after


def _set_only(canonical):
    zero = dict((f.name, f.zero()) for f in FIELDS)
    return dict((k, v) for k, v in canonical.items() if v != zero.get(k))
