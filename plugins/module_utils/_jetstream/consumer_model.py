# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Durable JetStream consumers as data. Private to the collection.

Options to API config and back, the update rules of nats-server per version,
and the plan of one run (create, update, recreate, delete or nothing). No I/O:
the module fetches, this decides, the module sends.
"""

from __future__ import annotations

import copy
import re
import time

from ansible_collections.nats_edge.fleet.plugins.module_utils._diff import differences
from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._items import is_copy
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.fields import Field, by_name
from ansible_collections.nats_edge.fleet.plugins.module_utils._units import (
    bare_seconds_warning, check_name as check_token, check_subject, epoch_seconds, format_duration, subjects_collide)
from ansible_collections.nats_edge.fleet.plugins.module_utils._versions import infer_version

PULL, PUSH = "pull", "push"
NANOS = 1000000000
V2_10, V2_11, V2_12, V2_14 = (2, 10), (2, 11), (2, 12), (2, 14)

DELIVER_POLICIES = ("all", "last", "new", "by_start_sequence", "by_start_time", "last_per_subject")
ACK_POLICIES = ("explicit", "all", "none", "flow_control")
REPLAY_POLICIES = ("instant", "original")
PRIORITY_POLICIES = ("none", "overflow", "pinned_client", "prioritized")
_GROUP_NAME = re.compile(r"^[a-zA-Z0-9/_=-]{1,16}$")  # server/consumer.go, validGroupName


class ConsumerInputError(NatsEdgeError, ValueError):
    """Input the server would refuse or misread; ``field`` names the option."""

    def __init__(self, field, message):
        self.field = field
        super(ConsumerInputError, self).__init__("%s: %s" % (field, message) if field else message)


class ImmutableChange(NatsEdgeError, ValueError):
    """Changes the server does not apply to an existing consumer."""

    def __init__(self, reasons, changed=()):
        self.reasons = reasons
        self.fields = sorted(reasons)
        self.changed = sorted(changed or reasons)
        super(ImmutableChange, self).__init__("; ".join("%s: %s" % (f, reasons[f]) for f in self.fields))


FIELDS = [
    Field("description", "str"),
    Field("deliver_policy", "choice", immutable=True, choices=DELIVER_POLICIES),
    Field("opt_start_seq", "int", immutable=True),
    Field("opt_start_time", "time", immutable=True),
    Field("ack_policy", "choice", immutable=True, choices=ACK_POLICIES),
    Field("ack_wait", "duration"),
    Field("max_deliver", "int"),
    Field("backoff", "durations"),
    Field("filter_subjects", "subjects"),
    Field("replay_policy", "choice", immutable=True, choices=REPLAY_POLICIES),
    Field("sample_freq", "percent"),
    Field("max_ack_pending", "int"),
    Field("inactive_threshold", "duration"),
    Field("headers_only", "bool"),
    Field("num_replicas", "int"),
    Field("mem_storage", "bool", immutable=lambda version: version >= V2_14),
    Field("metadata", "metadata", since=V2_10),
    Field("max_waiting", "int", mode=PULL, immutable=True),
    Field("max_batch", "int", mode=PULL),
    Field("max_expires", "duration", mode=PULL),
    Field("max_bytes", "size", mode=PULL),
    Field("deliver_subject", "str", mode=PUSH),
    Field("deliver_group", "str", mode=PUSH),
    Field("flow_control", "bool", mode=PUSH, immutable=True),
    Field("idle_heartbeat", "duration", mode=PUSH, immutable=True),
    Field("rate_limit_bps", "int", mode=PUSH),
    # nats-server 2.11: priority groups of pull consumers (prioritized: 2.12) and pausing
    # a lambda: _groups is defined below the table
    Field("priority_groups", "list", mode=PULL, since=V2_11,
          convert=lambda value: _groups(value)),  # pylint: disable=unnecessary-lambda
    Field("priority_policy", "choice", mode=PULL, since=V2_11, choices=PRIORITY_POLICIES, default="none"),
    Field("priority_timeout", "duration", mode=PULL, since=V2_11),
    Field("pause_until", "time", since=V2_11),
]
BY_NAME = by_name(FIELDS)
_START = {"by_start_sequence": "opt_start_seq", "by_start_time": "opt_start_time"}
PAUSE = "pause_until"  # not part of an update: CONSUMER.PAUSE.<stream>.<name> pauses and resumes a live consumer


def _groups(value):
    for group in value:
        if not isinstance(group, str) or not _GROUP_NAME.match(group):
            raise ValueError("%r is not a group name (1 to 16 of the characters A-Z, a-z, 0-9, /, _, = and -)"
                             % (group,))
    if len(set(value)) != len(value):
        raise ValueError("lists a group twice")
    return list(value)


# -- names, versions ------------------------------------------------------------------------------


def check_name(kind, name):
    """Stream and consumer names become API subject tokens: no dots, wildcards or spaces."""
    try:
        check_token(name)
    except ValueError as exc:
        raise ConsumerInputError(kind, str(exc))
    if len(name) > 255:
        raise ConsumerInputError(kind, "%r is longer than 255 characters" % name)


def domain_version(account_info=None, *configs):
    """The lowest (major, minor[, patch]) the JetStream servers of a domain surely run.

    2.11 and newer stamp ``_nats.ver`` into the metadata of what they store and
    report ``api.level``; 2.10 added stream compression and consumer limits to
    every stream config, and only 2.10 and newer keep metadata or several
    filters; 2.9 has none of these.
    """
    number, exact = infer_version(account_info, configs, config_keys=("compression", "consumer_limits"), kept=True)
    return number if exact else number[:2]  # only a stamp tells the patch release


def version_text(version):
    return ".".join(str(n) for n in version[:2])


# -- desired and actual ---------------------------------------------------------------------------


def duration_warnings(params):
    """Warnings for bare numbers of seconds that look meant in another unit."""
    found = []
    for field in FIELDS:
        value = params.get(field.name)
        if value is None or field.kind not in ("duration", "durations"):
            continue
        values = [(field.name, value)] if field.kind == "duration" else [
            ("%s[%d]" % (field.name, index), item) for index, item in enumerate(value)]
        found.extend(text for text in (bare_seconds_warning(v, name) for name, v in values) if text)
    return found


def desired_config(params):
    """The config fields the user set, canonical; raises ConsumerInputError naming the option."""
    desired = {}
    for field in FIELDS:
        if field.name == "filter_subjects":
            continue
        value = params.get(field.name)
        if value is None:
            continue
        try:
            value = field.from_user(value)
        except ValueError as exc:
            raise ConsumerInputError(field.name, str(exc))
        if field.choices and value not in field.choices:
            raise ConsumerInputError(field.name, "%r is not one of %s" % (value, ", ".join(field.choices)))
        desired[field.name] = value
    if params.get("filter_subject") is not None and params.get("filter_subjects") is not None:
        raise ConsumerInputError("filter_subject", "set filter_subject or filter_subjects, not both")
    if params.get("filter_subject") is not None:
        desired["filter_subjects"] = [params["filter_subject"]] if params["filter_subject"] else []
    elif params.get("filter_subjects") is not None:
        subjects = [s for s in params["filter_subjects"] if s]
        if len(set(subjects)) != len(subjects):
            raise ConsumerInputError("filter_subjects", "lists a subject twice")
        desired["filter_subjects"] = subjects
    for subject in desired.get("filter_subjects", []):
        try:
            check_subject(subject)
        except ValueError as exc:
            option = "filter_subject" if params.get("filter_subject") is not None else "filter_subjects"
            raise ConsumerInputError(option, str(exc))
    for name in ("max_deliver", "max_ack_pending"):
        if desired.get(name) is not None and desired[name] != -1 and desired[name] < 1:
            raise ConsumerInputError(name, "%r is not allowed (use -1 for unlimited)" % desired[name])
    if desired.get("max_waiting") is not None and desired["max_waiting"] < 1:
        raise ConsumerInputError("max_waiting", "must be at least 1")
    for name in ("max_batch", "rate_limit_bps", "num_replicas", "opt_start_seq"):
        if desired.get(name) is not None and desired[name] < 0:
            raise ConsumerInputError(name, "%r is negative" % desired[name])
    paused = params.get("paused")
    if paused is False:
        if params.get(PAUSE) is not None:
            raise ConsumerInputError("paused", "false resumes the consumer: leave pause_until unset")
        desired[PAUSE] = ""
    elif paused and params.get(PAUSE) is None:
        raise ConsumerInputError("paused", "true needs pause_until (nats-server pauses a consumer until a time)")
    return desired


def actual_config(config):
    """The server's config in the same canonical form as ``desired_config``."""
    config = config or {}
    actual = {}
    for field in FIELDS:
        if field.name == "filter_subjects":
            subjects = list(config.get("filter_subjects") or [])
            if config.get("filter_subject"):
                subjects.insert(0, config["filter_subject"])
            actual["filter_subjects"] = subjects
        else:
            actual[field.name] = field.from_api(config.get(field.name))
    return actual


def mode_of(config):
    return PUSH if config.get("deliver_subject") else PULL


def merged_config(name, desired, current=None):
    """The full API config to send: the current one with what the user set on top.

    Fields the user did not set keep their value. Settings a changed deliver
    policy or consumer kind no longer allows are dropped, and server-stamped
    metadata is left for the server to stamp again.
    """
    config = copy.deepcopy(current or {})
    config.pop("metadata", None)
    if current and current.get("metadata"):
        kept = BY_NAME["metadata"].from_api(current["metadata"])
        if kept:
            config["metadata"] = kept
    if "deliver_policy" in desired:
        for policy, option in _START.items():
            if desired["deliver_policy"] != policy and option not in desired:
                config.pop(option, None)
    if "deliver_subject" in desired:
        dropped = PULL if desired["deliver_subject"] else PUSH
        for field in FIELDS:
            if field.mode == dropped and field.name not in desired:
                config.pop(field.name, None)
    for key, value in desired.items():
        if key == "filter_subjects":
            config.pop("filter_subject", None)
            config.pop("filter_subjects", None)
            if len(value) == 1:
                config["filter_subject"] = value[0]
            elif value:
                config["filter_subjects"] = list(value)
        else:
            config[key] = BY_NAME[key].to_api(value)
    for key in list(config):
        if config[key] in ("", [], {}, None):
            del config[key]
    if not current:
        config.setdefault("ack_policy", "explicit")
    config["durable_name"] = name
    config["name"] = name
    return config


def check_config(config, version, desired=None):
    """Rules nats-server enforces, checked before anything is sent (so check mode knows them too)."""
    desired = desired or {}
    mode = mode_of(config)
    for field in FIELDS:
        value = config.get(field.name)
        if not field.in_use(value):
            continue
        if field.mode and field.mode != mode:
            if mode == PULL:
                raise ConsumerInputError(field.name, "only push consumers have it (set deliver_subject)")
            raise ConsumerInputError(field.name, "only pull consumers have it (this consumer has a "
                                                 "deliver_subject, so it is a push consumer)")
        if field.since and version < field.since:
            raise ConsumerInputError(field.name, "needs nats-server %s or newer; these servers run %s"
                                     % (version_text(field.since), version_text(version)))
    if config.get("filter_subjects") and version < V2_10:
        raise ConsumerInputError("filter_subjects", "more than one filter needs nats-server 2.10 or newer; "
                                                    "these servers run %s" % version_text(version))
    policy = config.get("deliver_policy", "all")
    for start_policy, option in _START.items():
        if policy == start_policy and not config.get(option):
            raise ConsumerInputError(option, "deliver_policy %s needs it" % policy)
        if policy != start_policy and config.get(option):
            raise ConsumerInputError(option, "only goes with deliver_policy %s (not %s)" % (start_policy, policy))
    if config.get("ack_policy") == "flow_control":
        _check_flow_control_acks(config, desired, version)
    elif config.get("flow_control") and not config.get("idle_heartbeat"):
        raise ConsumerInputError("flow_control", "needs idle_heartbeat too")
    _check_priority(config, version)
    if policy == "last_per_subject" and not (config.get("filter_subject") or config.get("filter_subjects")):
        raise ConsumerInputError("deliver_policy", "last_per_subject needs a filter_subject or filter_subjects")
    backoff = config.get("backoff") or []
    max_deliver = config.get("max_deliver", -1)
    if backoff and "ack_wait" in desired and desired["ack_wait"] != backoff[0]:
        raise ConsumerInputError("ack_wait", "the server replaces it with the first backoff step (%s) whenever "
                                             "backoff is set; leave it unset or make it %s"
                                 % (format_duration(backoff[0]), format_duration(backoff[0])))
    if backoff and max_deliver not in (None, -1, 0):
        # 2.9 wants more deliveries than backoff steps; 2.10 and newer accept as many.
        allowed = max_deliver if version >= V2_10 else max_deliver - 1
        if len(backoff) > allowed:
            raise ConsumerInputError("backoff", "has %d steps but max_deliver is %d; nats-server %s needs max_deliver "
                                                "%s the number of steps" % (
                                                    len(backoff), max_deliver, version_text(version),
                                                    "at least" if version >= V2_10 else "above"))


def _check_priority(config, version):
    """Priority groups (nats-server 2.11; the policy prioritized 2.12): the server's rules."""
    policy = config.get("priority_policy") or "none"
    if policy == "none":
        for option in ("priority_groups", "priority_timeout"):
            if config.get(option):
                raise ConsumerInputError(option, "needs a priority_policy (overflow, pinned_client or prioritized)")
        return
    if not config.get("priority_groups"):
        raise ConsumerInputError("priority_policy", "%s needs priority_groups" % policy)
    if policy == "prioritized" and version < V2_12:
        raise ConsumerInputError("priority_policy", "prioritized needs nats-server %s or newer; these servers run %s"
                                 % (version_text(V2_12), version_text(version)))


def _check_flow_control_acks(config, desired, version):
    """ack_policy flow_control (nats-server 2.14, the acks of durable sourcing consumers): the server's rules."""
    if version < V2_14:
        raise ConsumerInputError("ack_policy", "flow_control needs nats-server %s or newer; these servers run %s"
                                 % (version_text(V2_14), version_text(version)))
    if mode_of(config) != PUSH:
        raise ConsumerInputError("ack_policy", "flow_control acknowledges by flow control, which only push consumers "
                                               "have (set deliver_subject)")
    if desired.get("flow_control") is False:
        raise ConsumerInputError("flow_control", "ack_policy flow_control needs it (leave it unset or true)")
    if "idle_heartbeat" in desired and desired["idle_heartbeat"] != NANOS:
        raise ConsumerInputError("idle_heartbeat", "ack_policy flow_control needs exactly 1s (leave it unset)")
    for option in ("ack_wait", "backoff"):
        if option in desired:
            raise ConsumerInputError(option, "ack_policy flow_control takes none: acks come with flow control")
    if (desired.get("max_deliver") or -1) > 0:
        raise ConsumerInputError("max_deliver", "ack_policy flow_control delivers each message once (leave it unset)")


def immutable_reason(field_name, before, after, version):
    """Why the server refuses to change this field of an existing consumer, or None."""
    if field_name == "deliver_subject":
        if bool(before) != bool(after):
            return ("a pull consumer cannot become a push consumer" if after
                    else "a push consumer cannot become a pull consumer")
        return None
    field = BY_NAME.get(field_name)
    if field is None:
        return None
    immutable = field.immutable(version) if callable(field.immutable) else field.immutable
    if not immutable:
        return None
    return "cannot change from %r to %r%s" % (
        field.display(before), field.display(after),
        " (nats-server %s and newer)" % version_text(V2_14) if callable(field.immutable) else "")


def changed_fields(desired, actual):
    """Option names whose desired value differs from the server's (only what the user set; not the pause)."""
    compared = dict((k, v) for k, v in desired.items() if k not in ("metadata", PAUSE))
    changed = differences(compared, actual, set_like=("filter_subjects",))
    if "metadata" in desired and desired["metadata"] != actual.get("metadata", {}):
        changed.append("metadata")
    return sorted(changed)


def pause_differs(wanted, current, now):
    """Whether the pause of a live consumer (``current``, its canonical ``pause_until`` or "") must change to be
    ``wanted`` (a canonical time, "" for resumed, None when not declared). A pause whose time has passed is no
    pause: a consumer paused until then and one not paused both match it, so runs stay idempotent over time."""
    if wanted is None or wanted == current:
        return False
    return _pausing(wanted, now) or _pausing(current, now)


def _pausing(pause_until, now):
    return bool(pause_until) and epoch_seconds(pause_until) > now


def display(config):
    """Canonical values as the user writes them, for diffs."""
    return dict((k, BY_NAME[k].display(v) if k in BY_NAME else v) for k, v in config.items())


class Plan(object):
    """What one run does: ``action`` is none, create, update, recreate or delete. ``config`` is the config a
    CONSUMER.CREATE sends (None when only the pause changes); ``pause`` the body of a CONSUMER.PAUSE to send after
    it (None: none)."""

    def __init__(self, action, changed=(), immutable=None, config=None, pause=None):
        self.action = action
        self.changed = list(changed)
        self.immutable = immutable or {}
        self.config = config
        self.pause = pause

    @property
    def changes(self):
        return self.action != "none"


def pause_body(pause_until):
    """The body of CONSUMER.PAUSE: a time pauses until then, none resumes."""
    return {PAUSE: pause_until} if pause_until else {}


def plan(name, state, desired, current, version, on_immutable_change="fail", now=None):
    """Decide the run. ``current`` is the server's raw config or None; raises
    ConsumerInputError for bad input and ImmutableChange when the server would
    refuse and recreating was not allowed. ``now`` (seconds since the epoch) decides whether a pause is over."""
    now = time.time() if now is None else now
    if state == "absent":
        return Plan("delete" if current is not None else "none")
    wanted_pause = desired.get(PAUSE)
    settings = dict((k, v) for k, v in desired.items() if k != PAUSE)
    if current is None:
        config = merged_config(name, desired)
        check_config(config, version, desired)
        return Plan("create", sorted(k for k in desired if k != PAUSE or desired[k]), config=config)
    actual = actual_config(current)
    changed = changed_fields(settings, actual)
    pausing = pause_differs(wanted_pause, actual[PAUSE], now)
    if not changed and not pausing:
        return Plan("none")
    if pausing and wanted_pause:
        check_config({PAUSE: wanted_pause}, version)
    changed_all = sorted(changed + ([PAUSE] if pausing else []))
    if not changed:
        return Plan("update", changed_all, pause=pause_body(wanted_pause))
    config = merged_config(name, settings, current)
    check_config(config, version, settings)
    reasons = {}
    for field_name in changed:
        reason = immutable_reason(field_name, actual.get(field_name), desired[field_name], version)
        if reason:
            reasons[field_name] = reason
    if reasons and on_immutable_change != "recreate":
        raise ImmutableChange(reasons, changed_all)
    if not reasons:
        return Plan("update", changed_all, config=config, pause=pause_body(wanted_pause) if pausing else None)
    kept = _without(current, list(reasons) + ([PAUSE] if wanted_pause is not None else []))
    recreated = merged_config(name, desired, kept)
    check_config(recreated, version, desired)
    return Plan("recreate", changed_all, reasons, recreated)


def _without(config, fields):
    """The current config minus fields a recreation resets."""
    kept = dict(config)
    for field_name in fields:
        kept.pop(field_name, None)
    return kept


def request_body(stream, config, version, action):
    """The body of CONSUMER.CREATE.<stream>.<name>; 2.10 and newer also get the
    action, so a create never overwrites and an update never creates."""
    body = {"stream_name": stream, "config": config}
    if version >= V2_10 and action in ("create", "update"):
        body["action"] = action
    return body


def filter_warnings(filters, stream_config):
    """Filters that can match none of the stream's own subjects (2.10 and newer accept them)."""
    stream_config = stream_config or {}
    subjects = stream_config.get("subjects") or []
    if not subjects or is_copy(stream_config):
        return []
    return [f for f in filters if not any(subjects_collide(f, s) for s in subjects)]
