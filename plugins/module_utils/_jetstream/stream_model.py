# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""JetStream streams as data: options, API config, update rules, plans. Private to the collection.

No I/O here. ``desired_from_params`` turns module options into the API
config of what the user set; ``from_api`` brings a server's config into the
same shape; ``plan`` decides between create, update, promote, recreate,
delete and nothing from the two, the server's update rules and its version.
``FIELDS`` declares each field once (see ``fields.Field``): the conversions
both ways, the server's defaults, version floors and update rules all come
from it.
"""

from __future__ import annotations

import copy
import re
from collections import namedtuple

from ansible_collections.nats_edge.fleet.plugins.module_utils._diff import Diff, differences
from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.fields import ABSENT, Field
from ansible_collections.nats_edge.fleet.plugins.module_utils._units import (
    bare_seconds_warning,
    canonical_time,
    check_name,
    check_subject,
    duration_ns,
    format_duration,
    size_bytes,
    tokens_collide,
)
from ansible_collections.nats_edge.fleet.plugins.module_utils import _versions

parse_version = _versions.parse_version  # still importable from here


# --------------------------------------------------------------------------
# options

_TRANSFORM = dict(src=dict(type="str"), dest=dict(type="str"))

SOURCE_OPTIONS = dict(
    name=dict(type="str", required=True),
    start_seq=dict(type="int", aliases=["opt_start_seq"]),
    start_time=dict(type="str", aliases=["opt_start_time"]),
    filter_subject=dict(type="str"),
    subject_transforms=dict(type="list", elements="dict", options=dict(
        src=dict(type="str", required=True), dest=dict(type="str", required=True))),
    consumer=dict(type="dict", options=dict(name=dict(type="str", required=True),
                                            deliver_subject=dict(type="str", required=True))),
    domain=dict(type="str"),
    external=dict(type="dict", options=dict(api=dict(type="str", required=True),
                                            deliver=dict(type="str", default=""))),
)

STREAM_OPTIONS = dict(
    description=dict(type="str"),
    subjects=dict(type="list", elements="str"),
    storage=dict(type="str", choices=["file", "memory"]),
    retention=dict(type="str", choices=["limits", "interest", "workqueue"]),
    discard=dict(type="str", choices=["old", "new"]),
    discard_new_per_subject=dict(type="bool"),
    max_consumers=dict(type="int"),
    max_msgs=dict(type="int"),
    max_bytes=dict(type="raw"),
    max_age=dict(type="raw"),
    max_msgs_per_subject=dict(type="int"),
    max_msg_size=dict(type="raw"),
    duplicate_window=dict(type="raw"),
    replicas=dict(type="int", aliases=["num_replicas"]),
    placement=dict(type="dict", options=dict(cluster=dict(type="str"), tags=dict(type="list", elements="str"),
                                             preferred=dict(type="str"))),
    no_ack=dict(type="bool"),
    allow_rollup=dict(type="bool", aliases=["allow_rollup_hdrs"]),
    deny_delete=dict(type="bool"),
    deny_purge=dict(type="bool"),
    allow_direct=dict(type="bool"),
    mirror_direct=dict(type="bool"),
    compression=dict(type="str", choices=["none", "s2"]),
    first_seq=dict(type="int"),
    subject_transform=dict(type="dict", options=_TRANSFORM),
    republish=dict(type="dict", options=dict(src=dict(type="str"), dest=dict(type="str"),
                                             headers_only=dict(type="bool"))),
    consumer_limits=dict(type="dict", options=dict(inactive_threshold=dict(type="raw"),
                                                   max_ack_pending=dict(type="int"))),
    allow_msg_ttl=dict(type="bool"),
    subject_delete_marker_ttl=dict(type="raw"),
    persist_mode=dict(type="str", choices=["default", "async"]),
    allow_msg_counter=dict(type="bool"),
    allow_atomic=dict(type="bool"),
    allow_msg_schedules=dict(type="bool"),
    allow_batched=dict(type="bool"),
    sealed=dict(type="bool"),
    metadata=dict(type="dict"),
    mirror=dict(type="dict", options=SOURCE_OPTIONS, mutually_exclusive=[["domain", "external"]]),
    sources=dict(type="list", elements="dict", options=SOURCE_OPTIONS, mutually_exclusive=[["domain", "external"]]),
)

CONTROL_OPTIONS = ("state", "on_immutable_change", "allow_data_loss")

# what placements are checked against before anything is sent (see placement)
PLACEMENT_CHECK_OPTIONS = dict(
    placement_servers=dict(type="list", elements="dict", options=dict(
        name=dict(type="str", required=True), cluster=dict(type="str"),
        tags=dict(type="list", elements="str", default=[]), jetstream=dict(type="bool", default=True))),
    unique_tag=dict(type="str"),
    system_creds=dict(type="path"),
)


def module_argspec():
    """The module's options: the single form at the top level, the bulk form in ``streams``."""
    item = dict(
        name=dict(type="str", required=True),
        state=dict(type="str", choices=["present", "absent"]),
        on_immutable_change=dict(type="str", choices=["fail", "recreate"]),
        allow_data_loss=dict(type="bool"),
        creds=dict(type="path"),
    )
    item.update(copy.deepcopy(STREAM_OPTIONS))
    spec = dict(
        name=dict(type="str"),
        state=dict(type="str", choices=["present", "absent"], default="present"),
        on_immutable_change=dict(type="str", choices=["fail", "recreate"], default="fail"),
        allow_data_loss=dict(type="bool", default=False),
        streams=dict(type="list", elements="dict", options=item),
    )
    spec.update(copy.deepcopy(STREAM_OPTIONS))
    spec.update(PLACEMENT_CHECK_OPTIONS)
    return spec


class StreamError(NatsEdgeError):
    """Input or a requested change that cannot be applied, worded for the user."""


# check_existing: the item's own check of the stream the server has (a bucket's, see buckets.live_check), or None;
# preferred: the server the stream's leader should be on (placement.preferred, see leader_move), or None
Desired = namedtuple("Desired", "name state config on_immutable_change allow_data_loss warnings creds check_existing "
                     "preferred", defaults=(None, None))


def desired_items(params):
    """Every stream a module run declares, each validated; the first bad
    input raises before anything is sent."""
    if params.get("streams") is not None:
        stray = sorted(k for k in STREAM_OPTIONS if params.get(k) is not None)
        if params.get("name") or stray:
            raise StreamError("set stream options inside each item of streams, not next to it (found: %s)"
                              % ", ".join((["name"] if params.get("name") else []) + stray))
        items = []
        for item in params["streams"]:
            merged = dict(item)
            for key in CONTROL_OPTIONS:
                if merged.get(key) is None:
                    merged[key] = params.get(key)
            if merged.get("creds") and merged["creds"] == params.get("creds"):
                merged["creds"] = None  # the task's own creds: the task's connection and account
            items.append(merged)
    else:
        if not params.get("name"):
            raise StreamError("one of name or streams is required")
        items = [dict(params, creds=None)]  # the task's creds are the connection's
    result, seen, claimed = [], set(), []
    for item in items:
        desired = desired_from_params(item)
        # an item's own creds put it in another account: names and subjects are the account's own
        if (desired.creds, desired.name) in seen:
            raise StreamError("stream %r%s is declared more than once" % (desired.name, account_label(desired.creds)))
        seen.add((desired.creds, desired.name))
        subjects = [(subject, subject.split(".")) for subject in desired.config.get("subjects") or []]
        for subject, tokens in subjects:
            for creds, other, taken, taken_tokens in claimed:
                if creds == desired.creds and tokens_collide(tokens, taken_tokens):
                    raise StreamError("stream %r: subjects: %r overlaps %r of stream %r; a message can only go to "
                                      "one stream" % (desired.name, subject, taken, other))
        claimed.extend((desired.creds, desired.name, subject, tokens) for subject, tokens in subjects)
        result.append(desired)
    return result


def account_label(creds):
    """How messages name the account of an item with its own creds."""
    return " (with creds %s)" % creds if creds else ""


def desired_from_params(params):
    name = params.get("name")
    try:
        check_name(name)
    except ValueError as exc:
        raise StreamError("stream name: %s" % exc)
    state = params.get("state") or "present"
    params, preferred = _split_preferred(name, params)
    config = to_api(params) if state == "present" else {}
    given = dict((key, params.get(key)) for key in _DURATIONS)
    given["consumer_limits.inactive_threshold"] = (params.get("consumer_limits") or {}).get("inactive_threshold")
    warnings = ["stream %r: %s" % (name, text) for text in
                (bare_seconds_warning(value, field) for field, value in sorted(given.items()) if value is not None)
                if text] if state == "present" else []
    return Desired(name, state, config, params.get("on_immutable_change") or "fail",
                   bool(params.get("allow_data_loss")), warnings, params.get("creds"), params.get("check_existing"),
                   preferred if state == "present" else None)


def _split_preferred(name, params):
    """(params without placement.preferred, the preferred server or None). nats-server refuses a preferred server
    in a stream's config (2.11 and later: "preferred server not permitted in placement", server/stream.go
    checkStreamCfg; 2.9 and 2.10 drop it): it is no config field but where the leader is moved (leader_move).
    A placement that names only the preferred server leaves the stream's cluster and tags as they are."""
    placement = params.get("placement")
    if not isinstance(placement, dict) or placement.get("preferred") is None:
        if isinstance(placement, dict) and "preferred" in placement:
            params = dict(params, placement=dict((k, v) for k, v in placement.items() if k != "preferred"))
        return params, None
    preferred = placement["preferred"]
    if not isinstance(preferred, str) or not preferred.strip() or re.search(r"\s", preferred):
        raise StreamError("stream %r: placement.preferred: %r is not a server name" % (name, preferred))
    rest = dict((k, v) for k, v in placement.items() if k != "preferred")
    return dict(params, placement=rest if any(v is not None for v in rest.values()) else None), preferred


# --------------------------------------------------------------------------
# user options -> API config (only what the user set)

_MAX_INT32 = 2**31 - 1


def to_api(params):
    """API config of the options the user set. Values are normalised as the
    server stores them: durations in ns, sizes in bytes, 0 limits as -1,
    sorted subjects, times in UTC. ``None`` means "remove" (``{}`` given)."""
    name = params["name"]
    config = {}
    for field in FIELDS:
        if params.get(field.option) is not None:
            try:
                config[field.name] = field.from_user(params[field.option], name)
            except ValueError as exc:
                raise StreamError("stream %r: %s: %s" % (name, field.option, exc))
        if field.name == "subject_delete_marker_ttl":  # the last duration: errors keep their order
            _check_window(name, config, params)
    _check_combinations(name, config)
    return config


def _check_window(name, config, params):
    if config.get("duplicate_window") is not None and config["duplicate_window"] < 10**8:
        raise StreamError("stream %r: duplicate_window: %r: use at least 100ms (the server's default is 2m)"
                          % (name, params["duplicate_window"]))


# Converters of FIELDS: (the user's value, the stream's name) -> the API value.
# A ValueError names the option; a StreamError is raised as worded.

def _limit(value, name):
    if value < -1:
        raise ValueError("%r: use -1 (or 0) for unlimited" % value)
    return value or -1


def _size(value, name):
    return size_bytes(value) or -1


def _max_msg_size(value, name):
    size = size_bytes(value)
    if size > _MAX_INT32:
        raise ValueError("%r is larger than the server allows (%d bytes)" % (value, _MAX_INT32))
    return size or -1


def _duration(value, name):
    return duration_ns(value)


def _subjects(value, name):
    return sorted(set(check_subject(subject) for subject in value))


def _replicas(value, name):
    if not 1 <= value <= 5:
        raise ValueError("%r: use 1 to 5" % value)
    return value


def _first_seq(value, name):
    if value < 0:
        raise ValueError("%r cannot be negative" % value)
    return value


def _placement(given, name):
    placement = {k: v for k, v in given.items() if v not in (None, "", [])}
    if "tags" in placement:
        placement["tags"] = sorted(set(placement["tags"]))
    return placement or None


def _republish(given, name):
    republish = {k: v for k, v in given.items() if v is not None}
    if republish:
        if not republish.get("dest"):
            raise ValueError("dest is required")
        _subject(name, "republish.dest", republish["dest"], transform=True)
        if republish.get("src"):
            _subject(name, "republish.src", republish["src"])
    return republish or None


def _consumer_limits(given, name):
    limits = {}
    if given.get("inactive_threshold") is not None:
        try:
            limits["inactive_threshold"] = duration_ns(given["inactive_threshold"])
        except ValueError as exc:
            raise StreamError("stream %r: consumer_limits.inactive_threshold: %s" % (name, exc))
    if given.get("max_ack_pending") is not None:
        limits["max_ack_pending"] = given["max_ack_pending"]
    return limits


def _sources(given, name):
    sources = [_source(name, "sources[%d]" % i, s) for i, s in enumerate(given)]
    keys = [_source_key(s) for s in sources]
    for index, key in enumerate(keys):
        if key in keys[:index]:
            raise StreamError("stream %r: sources[%d]: duplicates an earlier source (same name, filter and external API)"
                              % (name, index))
    return sorted(sources, key=_source_key)


def _check_combinations(name, config):
    """Combinations the server rejects, caught before any request."""

    def fail(message):
        raise StreamError("stream %r: %s" % (name, message))

    if config.get("mirror"):
        if config.get("subjects"):
            fail("mirror and subjects cannot be combined: a mirror stores what its origin stores")
        if config.get("sources"):
            fail("mirror and sources cannot be combined")
        if config.get("first_seq"):
            fail("mirror and first_seq cannot be combined")
        if config.get("subject_delete_marker_ttl"):
            fail("mirror and subject_delete_marker_ttl cannot be combined")
    if config.get("deny_purge") and config.get("allow_rollup_hdrs"):
        fail("allow_rollup needs purges: it cannot be combined with deny_purge")
    if config.get("discard_new_per_subject"):
        if config.get("discard", "new") != "new":
            fail("discard_new_per_subject needs discard: new")
        if config.get("max_msgs_per_subject", 1) <= 0:
            fail("discard_new_per_subject needs max_msgs_per_subject above 0")
    problem = feature_conflict(config, given=config)
    if problem:
        fail(problem)


# what a sealed stream has, whatever its config said (nats-server sets these when it seals a stream)
SEALED_FORCES = dict(max_age=0, discard="new", deny_delete=True, deny_purge=True, allow_rollup_hdrs=False)


def feature_conflict(config, given=None):
    """Why nats-server refuses (or silently overrides) this combination of the options of 2.12 and later and of
    sealed, or None. ``config`` is the whole config the server would check (fields left out take the server's
    defaults); ``given`` what the user set, when the server would override an option the user set itself."""
    given = config if given is None else given
    discard = config.get("discard") or "old"
    if config.get("allow_msg_counter"):
        for option, value, why in (("mirror", config.get("mirror"), "a mirror copies its origin's messages"),
                                   ("allow_msg_ttl", config.get("allow_msg_ttl"), ""),
                                   ("subject_delete_marker_ttl", config.get("subject_delete_marker_ttl"),
                                    "delete markers need message TTLs"),
                                   ("allow_msg_schedules", config.get("allow_msg_schedules"), ""),
                                   ("discard: new", discard == "new", "")):
            if value:
                return "allow_msg_counter and %s cannot be combined%s" % (option, ": " + why if why else "")
        if (config.get("retention") or "limits") != "limits":
            return "allow_msg_counter needs retention: limits"
    if config.get("allow_msg_schedules"):
        if discard == "new":
            return "allow_msg_schedules and discard: new cannot be combined"
        for option in ("mirror", "sources"):
            if config.get(option):
                return "allow_msg_schedules and %s cannot be combined" % option
        if given.get("allow_rollup_hdrs") is False or config.get("deny_purge"):
            # deny_purge, once set, cannot be unset: a stream that has it never takes schedules
            return ("allow_msg_schedules needs allow_rollup (nats-server turns it on and deny_purge off, which a "
                    "stream with deny_purge refuses): leave allow_rollup unset and deny_purge unset or false")
    if config.get("persist_mode") == "async":
        if (config.get("storage") or "file") != "file":
            return "persist_mode async needs storage: file"
        if (config.get("num_replicas") or 1) > 1:
            return "persist_mode async needs replicas: 1"
        if config.get("allow_atomic"):
            return "persist_mode async and allow_atomic cannot be combined"
    for option in ("allow_atomic", "allow_batched"):
        if config.get(option) and config.get("mirror"):
            return "%s and mirror cannot be combined: a mirror takes no publishes" % option
    if given.get("sealed"):
        for option, forced in sorted(SEALED_FORCES.items()):
            if option in given and given[option] != forced:
                return ("sealed sets %s to %s (nats-server does): leave %s unset"
                        % (_OPTION_NAMES.get(option, option), _show(option, forced), _OPTION_NAMES.get(option, option)))
    return None


def _subject(name, field, value, transform=False):
    try:
        if transform:
            if not isinstance(value, str) or not value or re.search(r"\s", value) or "" in value.split("."):
                raise ValueError("%r is not a subject" % (value,))
            return value
        return check_subject(value)
    except ValueError as exc:
        raise StreamError("stream %r: %s: %s" % (name, field, exc))


def _transform(name, field, given):
    transform = {k: v for k, v in given.items() if v is not None}
    if not transform:
        return None
    if not transform.get("src") or not transform.get("dest"):
        raise StreamError("stream %r: %s: both src and dest are required" % (name, field))
    return {"src": _subject(name, field + ".src", transform["src"]),
            "dest": _subject(name, field + ".dest", transform["dest"], transform=True)}


def _metadata(name, given):
    result = {}
    for key, value in given.items():
        key = str(key)
        if key.startswith("_nats."):
            raise StreamError("stream %r: metadata: %r: keys starting with _nats. belong to the server" % (name, key))
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (int, float)):
            value = str(value)
        elif not isinstance(value, str):
            raise StreamError("stream %r: metadata: %r: values must be strings, not %s"
                              % (name, key, type(value).__name__))
        result[key] = value
    return result


def _source(name, field, given):
    """One mirror or source entry in the server's canonical form."""

    def fail(message):
        raise StreamError("stream %r: %s: %s" % (name, field, message))

    try:
        check_name(given.get("name"))
    except ValueError as exc:
        fail("name: %s" % exc)
    source = {"name": given["name"]}
    if given.get("start_seq"):
        if given["start_seq"] < 0:
            fail("start_seq: %r cannot be negative" % given["start_seq"])
        source["opt_start_seq"] = given["start_seq"]
    if given.get("start_time"):
        try:
            source["opt_start_time"] = canonical_time(given["start_time"])
        except ValueError as exc:
            fail("start_time: %s" % exc)
    if given.get("start_seq") and given.get("start_time"):
        fail("start_seq and start_time cannot be combined")
    if given.get("filter_subject"):
        source["filter_subject"] = _subject(name, field + ".filter_subject", given["filter_subject"])
    if given.get("subject_transforms"):
        if given.get("filter_subject"):
            fail("filter_subject and subject_transforms cannot be combined")
        source["subject_transforms"] = [_transform(name, "%s.subject_transforms[%d]" % (field, i), t)
                                        for i, t in enumerate(given["subject_transforms"])]
    if given.get("consumer"):
        # a durable sourcing consumer of the origin (nats-server 2.14): the server resets it rather than creating one
        for option in ("start_seq", "start_time", "filter_subject"):
            if given.get(option):
                fail("consumer and %s cannot be combined: the origin's consumer decides where copying starts and "
                     "what it copies" % option)
        try:
            check_name(given["consumer"].get("name"))
        except ValueError as exc:
            fail("consumer.name: %s" % exc)
        try:
            check_subject(given["consumer"].get("deliver_subject"), wildcards=False)
        except ValueError as exc:
            fail("consumer.deliver_subject: %s" % exc)
        source["consumer"] = {"name": given["consumer"]["name"],
                              "deliver_subject": given["consumer"]["deliver_subject"]}
    if given.get("domain") and given.get("external"):
        fail("domain and external cannot be combined")
    if given.get("domain"):
        if not re.match(r"^[A-Za-z0-9_-]+$", given["domain"]):
            fail("domain: %r is not a JetStream domain name" % given["domain"])
        source["external"] = {"api": "$JS.%s.API" % given["domain"], "deliver": ""}
    elif given.get("external"):
        api = given["external"].get("api")
        deliver = given["external"].get("deliver") or ""
        for part, value in (("external.api", api), ("external.deliver", deliver)):
            if value:
                try:
                    check_subject(value, wildcards=False)
                except ValueError as exc:
                    fail("%s: %s" % (part, exc))
        source["external"] = {"api": api, "deliver": deliver}
    return source


def origins_to_check(desired, plan_):
    """(field, origin name, API prefix) of each mirror or source a create or
    update sends, whose stream can be looked up: in a domain (or the local
    one). Origins behind another account's import (``external`` with a
    delivery prefix) are left out: that account exports no STREAM.INFO."""
    if plan_.action not in ("create", "update", "recreate"):
        return []
    config = desired.config
    if plan_.action == "update" and not any(f.split(".")[0] in ("mirror", "sources") for f in plan_.fields):
        return []
    entries = ([("mirror", config["mirror"])] if config.get("mirror") else []) + [
        ("sources[%d]" % index, source) for index, source in enumerate(config.get("sources") or [])]
    found = []
    for field, source in entries:
        external = source.get("external") or {}
        if external.get("deliver"):
            continue
        found.append((field, source["name"], external.get("api")))
    return found


def _source_key(source):
    external = source.get("external") or {}
    return (source["name"], source.get("filter_subject", ""), external.get("api", ""),
            repr(source.get("subject_transforms", [])))


# --------------------------------------------------------------------------
# server config -> the same shape


def from_api(config):
    """A server's stream config in the shape ``to_api`` produces, with the
    server's own additions (``_nats.*`` metadata, empty defaults) settled."""
    result = {"name": config["name"]} if "name" in config else {}
    for field in FIELDS:
        if field.default is ABSENT:
            if field.name in config:
                result[field.name] = config[field.name]
        else:
            value = config.get(field.name)
            result[field.name] = field.from_api(None if value == "" else value)
    return result


# Normalisers of FIELDS: the server's value (None when absent) -> the shape of to_api.

def _placement_from_api(value):
    placement = {k: v for k, v in (value or {}).items() if k in ("cluster", "tags") and v}
    if "tags" in placement:
        placement["tags"] = sorted(placement["tags"])
    return placement or None


def _republish_from_api(value):
    if value is None:
        return None
    return {"src": value.get("src", ""), "dest": value.get("dest"), "headers_only": bool(value.get("headers_only"))}


def _consumer_limits_from_api(value):
    limits = value or {}
    return {"inactive_threshold": limits.get("inactive_threshold", 0),
            "max_ack_pending": limits.get("max_ack_pending", 0)}


def _mirror_from_api(value):
    if value is None:
        return None
    return _normalise_source(value) if value else copy.deepcopy(value)


def _sources_from_api(value):
    return sorted((_normalise_source(s) for s in value or []), key=_source_key)


def _normalise_source(source):
    result = {"name": source["name"]}
    if source.get("opt_start_seq"):
        result["opt_start_seq"] = source["opt_start_seq"]
    if source.get("opt_start_time"):
        result["opt_start_time"] = canonical_time(source["opt_start_time"])
    if source.get("filter_subject"):
        result["filter_subject"] = source["filter_subject"]
    if source.get("subject_transforms"):
        result["subject_transforms"] = [{"src": t.get("src", ""), "dest": t.get("dest", "")}
                                        for t in source["subject_transforms"]]
    if source.get("external"):
        result["external"] = {"api": source["external"].get("api", ""),
                              "deliver": source["external"].get("deliver") or ""}
    if source.get("consumer"):
        result["consumer"] = {"name": source["consumer"].get("name", ""),
                              "deliver_subject": source["consumer"].get("deliver_subject", "")}
    return result


# --------------------------------------------------------------------------
# the fields: each option once, with its API name, conversions both ways, the
# server's default, the first release that knows it and its update rule

V2_10, V2_11, V2_12, V2_14 = (2, 10, 0), (2, 11, 0), (2, 12, 0), (2, 14, 0)

# The server's update rules (server/stream.go, configUpdateCheck), verified
# against 2.9.10, 2.10.26, 2.11.11, 2.12.8, 2.14.6 and 2.15.1.
# mutable_since: first version that changes the field on a live stream (None: never);
# one_way: can be set, never unset; locked_values: values never changed to or from;
# removable_since: first version that accepts removing it (a mirror: promotion).
Rule = namedtuple("Rule", "mutable_since one_way locked_values removable_since", defaults=(None, False, (), None))


def _uses_transforms(source):
    return bool((source or {}).get("subject_transforms"))


# In the order to_api converts them: the first bad option is the one reported.
FIELDS = [
    Field("description", "str"),
    Field("storage", "str", default=ABSENT, immutable=Rule()),
    Field("retention", "str", default=ABSENT, immutable=Rule(mutable_since=V2_10, locked_values=("workqueue",))),
    Field("discard", "str", default=ABSENT),
    Field("discard_new_per_subject", "bool"),
    Field("no_ack", "bool"),
    Field("deny_delete", "bool", immutable=Rule(one_way=True)),
    Field("deny_purge", "bool", immutable=Rule(one_way=True)),
    Field("allow_direct", "bool"),
    Field("mirror_direct", "bool"),
    Field("compression", "str", default="none", since=V2_10),
    Field("allow_msg_ttl", "bool", since=V2_11, immutable=Rule(one_way=True)),
    Field("max_consumers", "int", default=ABSENT, convert=_limit, immutable=Rule(mutable_since=(2, 12, 0))),
    Field("max_msgs", "int", default=ABSENT, convert=_limit),
    Field("max_msgs_per_subject", "int", default=ABSENT, convert=_limit),
    Field("max_bytes", "size", default=ABSENT, convert=_size),
    Field("max_msg_size", "size", default=ABSENT, convert=_max_msg_size),
    Field("max_age", "duration", default=ABSENT, convert=_duration),
    Field("duplicate_window", "duration", convert=_duration),
    Field("subject_delete_marker_ttl", "duration", convert=_duration, since=V2_11),
    Field("subjects", "list", convert=_subjects, normalise=lambda value: sorted([] if value is None else value)),
    Field("num_replicas", "int", option="replicas", default=ABSENT, convert=_replicas),
    Field("allow_rollup_hdrs", "bool", option="allow_rollup"),
    Field("first_seq", "int", convert=_first_seq, since=V2_10),
    Field("placement", "dict", convert=_placement, normalise=_placement_from_api),
    Field("subject_transform", "dict", convert=lambda value, name: _transform(name, "subject_transform", value),
          since=V2_10),
    Field("republish", "dict", convert=_republish, normalise=_republish_from_api,
          immutable=Rule(mutable_since=V2_10)),
    Field("consumer_limits", "dict", convert=_consumer_limits, normalise=_consumer_limits_from_api, since=V2_10,
          used=lambda value: any((value or {}).values())),
    Field("metadata", "metadata", convert=lambda value, name: _metadata(name, value), since=V2_10),
    Field("mirror", "dict", convert=lambda value, name: _source(name, "mirror", value), normalise=_mirror_from_api,
          since=V2_10, used=_uses_transforms, since_path="mirror.subject_transforms",
          immutable=Rule(removable_since=(2, 12, 0))),
    Field("sources", "list", convert=_sources, normalise=_sources_from_api, since=V2_10,
          used=lambda value: any(_uses_transforms(s) for s in value or []), since_path="sources.subject_transforms"),
    # nats-server 2.12 and 2.14 (server/stream.go, configUpdateCheck; jetstream_versioning.go for the releases)
    Field("persist_mode", "str", default="default", since=V2_12, immutable=Rule()),
    Field("allow_msg_counter", "bool", since=V2_12, immutable=Rule()),
    Field("allow_atomic", "bool", since=V2_12),
    Field("allow_msg_schedules", "bool", since=V2_12, immutable=Rule(one_way=True)),
    Field("allow_batched", "bool", since=V2_14),
    Field("sealed", "bool", immutable=Rule(one_way=True)),
]
_OPTION_NAMES = dict((f.name, f.option) for f in FIELDS if f.option != f.name)

_DURATIONS = tuple(f.option for f in FIELDS if f.kind == "duration")


class _Floor(namedtuple("_Floor", "name since since_path used")):
    """A release floor of a part of a field (what an older server would ignore or refuse)."""

    def in_use(self, value):
        return bool(self.used(value))


def _durable(source):
    return bool((source or {}).get("consumer"))


# durable sourcing consumers (ADR-60): nats-server 2.14
_PART_FLOORS = [_Floor("mirror", (2, 14, 0), "mirror.consumer", _durable),
                _Floor("sources", (2, 14, 0), "sources.consumer", lambda value: any(_durable(s) for s in value or []))]

# First server release that knows a field (``since``). Older servers ignore unknown
# fields silently (2.9, 2.10, 2.11) or reject them: refuse before sending. One
# message names them all, oldest release first, then in the order of _FLOOR_ORDER.
_FLOOR_ORDER = ("compression", "subject_transform", "metadata", "first_seq", "consumer_limits", "mirror", "sources")
_FLOORS = sorted([f for f in FIELDS if f.since] + _PART_FLOORS, key=lambda f: (
    f.since, _FLOOR_ORDER.index(f.name) if f.name in _FLOOR_ORDER else len(_FLOOR_ORDER)))
MIN_VERSION = dict((f.since_path, f.since) for f in _FLOORS)

IMMUTABLE = dict((f.name, f.immutable) for f in FIELDS if f.immutable)


# --------------------------------------------------------------------------
# comparison

SET_LIKE = ("subjects", "sources", "placement.tags")
_WHOLE = ("mirror", "metadata")


def changed_fields(desired, actual):
    """Fields of ``desired`` (what the user set) whose value differs in ``actual``
    (a normalised server config). A mirror and the metadata compare whole."""
    partial = {k: v for k, v in desired.items() if k not in _WHOLE}
    fields = differences(partial, actual, SET_LIKE)
    fields += [k for k in _WHOLE if k in desired and desired[k] != actual.get(k)]
    return fields


# --------------------------------------------------------------------------
# versions

ServerVersion = namedtuple("ServerVersion", "number exact")


def version_text(version):
    return ".".join(str(p) for p in (version.number if version.exact else version.number[:2]))


def version_from_stream(info):
    """The version of the server that answered a STREAM.INFO: 2.11+ say it in
    the metadata they add; 2.10 always writes ``compression``; 2.9 does not."""
    config = info.get("config") or {}
    stamped = _versions.stamped_version(config)
    if stamped:  # the server's own word, whatever else the config shows
        return ServerVersion(stamped, True)
    return ServerVersion(*_versions.infer_version(configs=[config], config_keys=("compression",)))


def version_from_account(account):
    """The version floor of the server that answered a $JS.API.INFO: the API
    level from 2.11 on; 2.10 reports reserved storage, 2.9 does not."""
    return ServerVersion(*_versions.infer_version(account, account_keys=("reserved_memory",)))


def unsupported_fields(config, version):
    """Fields set to something that matters which ``version`` does not know
    (nothing when the version is not known)."""
    found = []
    for field in _FLOORS:
        if version is None or version.number >= field.since:
            continue
        if field.in_use(config.get(field.name)):
            found.append("%s needs nats-server %d.%d or later (the server is %s)"
                         % (field.since_path, field.since[0], field.since[1], version_text(version)))
    return found


def needs_version(config):
    """Whether creating ``config`` depends on the server's version."""
    return bool(unsupported_fields(config, ServerVersion((0, 0, 0), True)))


# --------------------------------------------------------------------------
# the server's update rules (IMMUTABLE, from the Rule of each field)

PROMOTE = "promote"


def update_refusal(field, old, new, version):
    """Why the server would refuse to change ``field`` from ``old`` to ``new``;
    ``PROMOTE`` when the change is the removal of a mirror it accepts; None when
    the update is allowed."""
    if field == "sources" and old != new:
        return _consumer_change(old, new)
    rule = IMMUTABLE.get(field)
    if rule is None or old == new:
        return None
    shown_old, shown_new = _show(field, old), _show(field, new)
    if rule.one_way:
        return "%s cannot be unset once set" % field if old and not new else None
    if rule.removable_since and new is None:
        if version.number >= rule.removable_since:
            return PROMOTE
        return ("mirror cannot be removed on nats-server %s (promoting a mirror needs %d.%d or later)"
                % (version_text(version), rule.removable_since[0], rule.removable_since[1]))
    if field == "mirror":
        if old is None:
            return "an existing stream cannot become a mirror"
        return "mirror cannot change from %s to %s" % (shown_old, shown_new)
    if rule.mutable_since is None:
        return "%s cannot change from %s to %s" % (field, shown_old, shown_new)
    if old in rule.locked_values or new in rule.locked_values:
        return "%s cannot change from %s to %s (never to or from %s)" % (
            field, shown_old, shown_new, " or ".join(rule.locked_values))
    if version.number < rule.mutable_since:
        return ("%s cannot change from %s to %s on nats-server %s (possible from %d.%d)"
                % (field, shown_old, shown_new, version_text(version), rule.mutable_since[0],
                   rule.mutable_since[1]))
    return None


def _consumer_change(old, new):
    """Why the server would copy a source again: its durable consumer (``consumer``) taken, dropped or changed while
    the stream copies it, which nats-server counts as a new source read from the origin's first message."""
    had = dict((_source_key(source), source.get("consumer")) for source in old or [])
    changed = [source["name"] for source in new or []
               if _source_key(source) in had and had[_source_key(source)] != source.get("consumer")]
    if not changed:
        return None
    return ("sources.consumer cannot change for %s, which the stream already copies: nats-server would take it for a "
            "new source and copy its origin again from the first message (declare the durable consumer on a new stream, "
            "or recreate this one)" % ", ".join(repr(name) for name in changed))


def _show(field, value):
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if field == "mirror" and isinstance(value, dict):
        text = value.get("name", "?")
        if value.get("external"):
            text += " (%s)" % value["external"].get("api")
        if value.get("filter_subject"):
            text += " filtered on %s" % value["filter_subject"]
        return text
    if field in _DURATIONS:
        return format_duration(value)
    return str(value)


# --------------------------------------------------------------------------
# the plan

Plan = namedtuple("Plan", "name action fields body before after")

ACTIONS = ("none", "create", "update", "promote", "recreate", "delete")


def plan(desired, info, version, where):
    """What to do about one declared stream.

    ``info`` is the server's STREAM.INFO reply (None when the stream does not
    exist); ``version`` the ServerVersion that holds it or would create it;
    ``where`` says "in domain 'hub'" for messages. Raises StreamError when the
    declaration cannot be applied under the chosen policy, or what the item's own
    ``check_existing`` raises about the stream the server has.
    """
    name = desired.name
    prefix = "stream %r %s" % (name, where)
    if info is not None and desired.state == "present" and desired.check_existing is not None:
        desired.check_existing(desired.config, info, where)  # raises on what the item's kind refuses
    if desired.state == "absent":
        if info is None:
            return Plan(name, "none", [], None, {}, {})
        return Plan(name, "delete", [], None, from_api(info["config"]), {})

    config = dict(desired.config)
    if desired.preferred and version is not None and version.number < PREFERRED_SINCE:
        raise StreamError("%s: placement.preferred needs nats-server %d.%d or later (the server is %s)" % (
            prefix, PREFERRED_SINCE[0], PREFERRED_SINCE[1], version_text(version)))
    if info is None:
        problems = unsupported_fields(config, version)
        if problems:
            raise StreamError("%s: %s" % (prefix, "; ".join(problems)))
        _refuse_sealed_create(prefix, config, "create")
        body = create_body(name, config)
        return Plan(name, "create", sorted(config), body, {}, body)

    actual = from_api(info["config"])
    if "mirror" not in config and actual["mirror"] and (config.get("subjects") or config.get("sources")):
        config["mirror"] = None  # a mirror cannot have either: the declaration promotes it
    fields = changed_fields(config, actual)
    if not fields:
        return Plan(name, "none", [], None, actual, actual)

    problems = unsupported_fields({f: config[f] for f in _top(fields)}, version)
    if problems:
        raise StreamError("%s: %s" % (prefix, "; ".join(problems)))
    after = _merged(actual, config)
    conflict = feature_conflict(after, given=config)
    if conflict:
        raise StreamError("%s: %s" % (prefix, conflict))
    if config.get("sealed") and not actual.get("sealed"):
        # sealing: the server sets these itself; sent as it will have them, so the plan shows what the stream becomes
        config.update((k, v) for k, v in SEALED_FORCES.items() if actual.get(k) != v)
        after.update(SEALED_FORCES)
    refusals, promote = [], False
    for field in _top(fields):
        reason = update_refusal(field, actual.get(field), config.get(field), version)
        if reason == PROMOTE:
            promote = True
        elif reason:
            refusals.append(reason)
    if refusals:
        if desired.on_immutable_change != "recreate":
            raise StreamError("%s: %s (on_immutable_change=fail)" % (prefix, "; ".join(refusals)))
        held = _held(info)
        if held and not desired.allow_data_loss:
            raise StreamError("%s: %s; recreating it would delete %s: set allow_data_loss to allow that"
                              % (prefix, "; ".join(refusals), held))
        problems = unsupported_fields(config, version)
        if problems:
            raise StreamError("%s: %s" % (prefix, "; ".join(problems)))
        _refuse_sealed_create(prefix, config, "recreate")
        body = create_body(name, {k: v for k, v in config.items() if v is not None})
        return Plan(name, "recreate", fields, body, actual, body)
    return Plan(name, PROMOTE if promote else "update", fields, update_body(info["config"], config), actual, after)


# the first release that moves a stream's leader to a named server (a leader step-down request with a placement,
# server/jetstream_api.go getStepDownPreferredPlacement)
PREFERRED_SINCE = (2, 11, 0)


def stream_servers(info):
    """(leader, the servers of the stream: leader first, then its replicas) of a STREAM.INFO reply."""
    cluster = (info or {}).get("cluster") or {}
    leader = cluster.get("leader")
    return leader, [name for name in [leader] + [r.get("name") for r in cluster.get("replicas") or []] if name]


def leader_move(desired, info, where):
    """The server the leader of the stream in ``info`` is to move from (its leader now) to ``desired.preferred``;
    None when it is there already or nothing is preferred. Raises StreamError when the preferred server holds no
    replica of the stream: the server moves a leader only among the stream's own servers."""
    if not desired.preferred or not info:
        return None
    leader, servers = stream_servers(info)
    if leader == desired.preferred:
        return None
    if not info.get("cluster"):
        raise StreamError("stream %r %s: placement.preferred: the stream is on a JetStream server that runs without a "
                          "cluster, which moves no leader: leave placement.preferred out" % (desired.name, where))
    if desired.preferred not in servers:
        raise StreamError("stream %r %s: placement.preferred: %r holds no replica of the stream (its servers: %s); "
                          "the leader moves only among them: raise replicas, or set placement so that it holds one" % (
                              desired.name, where, desired.preferred, ", ".join(servers) or "none reported"))
    return leader


def check_leader_move(desired, plan_, info, where):
    """Before anything is sent: refuse a preferred server that holds no replica of a live stream whose servers the
    run leaves as they are (a change of replicas or placement picks them anew: checked after it, see
    leader_move)."""
    if desired.preferred and info is not None and keeps_servers(plan_):
        leader_move(desired, info, where)


def keeps_servers(plan_):
    """Whether a plan leaves a live stream on the servers it has (nothing about its replicas or placement)."""
    return plan_.action in ("none", "update", "promote") and not set(_top(plan_.fields)) & set(
        ("num_replicas", "placement"))


def _refuse_sealed_create(prefix, config, action):
    if config.get("sealed"):
        raise StreamError("%s: sealed: nats-server cannot %s a sealed stream (it seals a stream only on an update): "
                          "%s it without sealed, then seal it in a later run" % (prefix, action, action))


def _top(fields):
    seen = []
    for field in fields:
        top = field.split(".")[0]
        if top not in seen:
            seen.append(top)
    return seen


def _held(info):
    state = info.get("state") or {}
    parts = []
    if state.get("messages"):
        parts.append("its %d message%s" % (state["messages"], "" if state["messages"] == 1 else "s"))
    if state.get("consumer_count"):
        parts.append("%d consumer%s" % (state["consumer_count"], "" if state["consumer_count"] == 1 else "s"))
    return " and ".join(parts)


def _merged(actual, config):
    after = copy.deepcopy(actual)
    for key, value in config.items():
        if isinstance(value, dict) and isinstance(after.get(key), dict) and key not in _WHOLE:
            after[key] = dict(after[key], **value)
        else:
            after[key] = copy.deepcopy(value)
    return after


def create_body(name, config):
    body = {"name": name}
    body.update({k: copy.deepcopy(v) for k, v in config.items() if v is not None})
    return body


def update_body(current, config):
    """The server's current config with what the user set applied: an update
    replaces the whole config, so fields the user left out keep their value."""
    body = copy.deepcopy(current)
    for key, value in config.items():
        if value is None:
            body.pop(key, None)
        elif key in ("placement", "consumer_limits", "republish") and isinstance(body.get(key), dict):
            body[key] = dict(body[key], **value)
        else:
            body[key] = copy.deepcopy(value)
    return body


def not_applied(desired_config, info):
    """Fields the server did not take as asked, after a write: an option this
    server ignores or overrides would otherwise report a change on every run."""
    config = dict(desired_config)
    return changed_fields(config, from_api(info["config"]))


def diff(plan_):
    result = Diff(plan_.before, plan_.after).as_dict()
    result["before_header"] = result["after_header"] = "stream %s" % plan_.name
    return result
