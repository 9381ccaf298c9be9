# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the nsc_* modules share: options, claim bodies built from module
options, the decision to sign again, and pushing account JWTs to the full
resolver. Private to the collection.

Everything but ``push_account`` is pure; the store lives in ``store``.
"""

from __future__ import annotations

import calendar
import copy
import ipaddress
import json
import os
import re
import stat
import time

from ansible.module_utils.basic import env_fallback, missing_required_lib

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import (
    DEFAULT_KEYS_DIR, DEFAULT_LOCK_TIMEOUT, DEFAULT_STORE_DIR, StoreError)
from ansible_collections.nats_edge.fleet.plugins.module_utils._units import (
    canonical_time, check_subject, duration_ns, size_bytes)

STORE_ARGSPEC = dict(
    store_dir=dict(type="path", default=DEFAULT_STORE_DIR, fallback=(env_fallback, ["NSC_STORE"])),
    keys_dir=dict(type="path", default=DEFAULT_KEYS_DIR, fallback=(env_fallback, ["NKEYS_PATH"])),
    operator=dict(type="str", required=True),
    lock_timeout=dict(type="float", default=DEFAULT_LOCK_TIMEOUT),
)

# The exports nsc gives the system account so that other accounts can import
# their own monitoring requests and events.
SYSTEM_EXPORTS = [
    {"name": "account-monitoring-services", "subject": "$SYS.REQ.ACCOUNT.*.*", "type": "service",
     "response_type": "Stream", "account_token_position": 4,
     "description": "Account-scoped monitoring requests (SUBSZ, CONNZ, LEAFZ, JSZ, INFO)",
     "info_url": "https://docs.nats.io/nats-server/configuration/sys_accounts"},
    {"name": "account-monitoring-streams", "subject": "$SYS.ACCOUNT.*.>", "type": "stream",
     "account_token_position": 3, "description": "Account-scoped monitoring events",
     "info_url": "https://docs.nats.io/nats-server/configuration/sys_accounts"},
]

JETSTREAM_LIMITS = {"disk_storage": "disk_storage", "mem_storage": "mem_storage", "streams": "streams",
                    "consumers": "consumer"}
# limits a JWT leaves out when there are none (a server reads 0 as none): written only when given
JETSTREAM_CAPS = ("max_ack_pending", "disk_max_stream_bytes", "mem_max_stream_bytes")
JETSTREAM_TIERS = ("R1", "R3", "R5")
SIZE_LIMITS = {"disk_storage", "mem_storage", "data", "payload", "disk_max_stream_bytes", "mem_max_stream_bytes"}
_TIER_OPTIONS = dict(
    disk_storage=dict(type="raw"), mem_storage=dict(type="raw"), streams=dict(type="int"),
    consumers=dict(type="int"), max_ack_pending=dict(type="int"), disk_max_stream_bytes=dict(type="raw"),
    mem_max_stream_bytes=dict(type="raw"), max_bytes_required=dict(type="bool"))
JETSTREAM_OPTIONS = dict(_TIER_OPTIONS, tiers=dict(type="dict", options=dict(
    (tier, dict(type="dict", options=_TIER_OPTIONS)) for tier in JETSTREAM_TIERS)))
CONNECTION_TYPES = ("STANDARD", "WEBSOCKET", "LEAFNODE", "LEAFNODE_WS", "MQTT", "MQTT_WS", "IN_PROCESS")
ACCOUNT_LIMITS = ("conn", "leaf", "subs", "data", "payload", "imports", "exports")

# The largest number a server reads in a limit, an expiry or a duration (a Go int64): a larger one is refused
# by every server, for ever.
INT64_MAX = 2**63 - 1
# The largest resp.max: a Go int, 32 bits on the fleet's 32-bit ARM devices.
RESP_MAX = 2**31 - 1

# Claims a module decides; every other claim of a JWT already in the store
# (exports added with nsc, tags, ...) is kept as it is.
ACCOUNT_MANAGED = {"limits", "signing_keys", "default_permissions", "type", "version"}
OPERATOR_MANAGED = {"signing_keys", "system_account", "type", "version"}


# --------------------------------------------------------------------------
# options as given


def given_params():
    """The task's options as the controller sent them, before ansible-core converted them, once a module has read
    them ({} before, or when they cannot be read). ansible-core turns ``operator: true`` into the name 'True'
    without a word, and trips over ``jetstream: true`` (an option with suboptions) with a TypeError of its own, so
    what it would coerce is checked on them (build_module)."""
    from ansible.module_utils import basic
    if getattr(basic, "_ANSIBLE_ARGS", None) is None:
        return {}  # never read the arguments here: a module reads them first
    try:
        params = basic._load_params()
    except Exception:  # pylint: disable=broad-except
        return {}
    return params if isinstance(params, dict) else {}


def _text(value):
    """A value as a message shows it: booleans as YAML writes them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _hint(name, option):
    if name == "jetstream":
        return JETSTREAM_HINT
    return "write a mapping of %s" % ", ".join(sorted(option["options"]))


def _shape(where, name, option, value):
    """The first problem of one option's value as given (see check_given), or None."""
    kind = option.get("type", "str")
    if value is None or kind == "raw":
        return None
    if isinstance(value, bool) and kind in ("str", "path", "int", "float", "list", "dict"):
        text = "true" if value else "false"
        if kind in ("str", "path"):
            return ("%s: %s is a boolean, not text (YAML reads an unquoted true, false, yes, no, on or off as one); "
                    "quote it ('%s') if you mean it as text" % (where, text, text))
        if kind == "dict" and option.get("options"):
            return "%s: %s is not a mapping; %s" % (where, text, _hint(name, option))
        return "%s: %s is a boolean, not a %s" % (where, text, {"int": "number", "float": "number"}.get(kind, kind))
    if kind in ("str", "path") and isinstance(value, (list, dict)):
        return "%s: %r is a %s, not text" % (where, value, "list" if isinstance(value, list) else "mapping")
    if kind == "dict" and option.get("options"):
        if isinstance(value, str):
            return None  # ansible-core reads JSON or key=value text, and words its own error
        if not isinstance(value, dict):
            return "%s: %s is not a mapping; %s" % (where, _text(value), _hint(name, option))
        return _shapes(option["options"], value, where + ".")
    if kind == "list" and option.get("elements") in ("str", "dict"):
        if isinstance(value, (str, dict)) or not isinstance(value, (list, tuple)):
            return None if option.get("elements") == "str" and isinstance(value, str) else (
                "%s: %r is not a list" % (where, value))
        for index, element in enumerate(value):
            at = "%s[%d]" % (where, index)
            if option["elements"] == "str" and isinstance(element, bool):
                return _shape(at, name, dict(type="str"), element)
            if option["elements"] == "dict" and option.get("options") and not isinstance(element, str):
                if not isinstance(element, dict):
                    return "%s: %s is not a mapping; %s" % (at, _text(element), _hint(name, option))
                problem = _shapes(option["options"], element, at + ".")
                if problem:
                    return problem
    return None


def _shapes(spec, params, prefix=""):
    for name, option in spec.items():
        for key in [name] + list(option.get("aliases") or []):
            if key in params:
                problem = _shape(prefix + key, name, option, params[key])
                if problem:
                    return problem
    return None


def check_given(spec, params):
    """Refuse, as StoreError naming the option, a value of ``params`` (as given, before ansible-core converts it)
    that ansible-core would silently coerce or trip over: a boolean, list or mapping given to a text option
    (``operator: true``, which would become the name 'True'), a boolean given to a number or a list, anything but a
    mapping given to an option with suboptions (``jetstream: true``), an item of such a list that is not a mapping.
    The nsc modules run it on their options as given (build_module), and on every list item before its
    kind's spec (``bulk.checked_items``); the fleet's preflight runs it on an item before ItemChecker.check."""
    problem = _shapes(spec, params or {})
    if problem:
        raise StoreError(problem)
    return params


def require_nkeys():
    """Raise, worded as ansible's missing_required_lib with the import's traceback, when nkeys is missing."""
    if jwt.nkeys is None:
        raise NatsEdgeError(missing_required_lib(jwt.NKEYS), exception=jwt._IMPORT_ERROR)


def build_module(build, spec):
    """(module, error): ``build(spec)``, the module, and the StoreError check_given raises for the task's options as
    given (None when they are fine); a module's main() fails with it. When ansible-core trips over an option
    (``jetstream: true``), the module is built with ``lenient(spec)`` so that it can fail with the named error."""
    try:
        module = build(spec)
    except TypeError:
        module = build(lenient(spec))
        error = _given_error(spec)
        if error is None:
            raise
        return module, error
    return module, _given_error(spec)


def _given_error(spec):
    try:
        check_given(spec, given_params())
    except StoreError as exc:
        return exc
    return None


def lenient(spec):
    """``spec`` with every option taking any value (type raw, no suboptions), so that a module whose options
    check_given refused can be built and fail with that message instead of ansible-core's."""
    out = {}
    for name, option in spec.items():
        option = {key: value for key, value in option.items() if key not in ("options", "elements", "choices")}
        option["type"] = "raw"
        out[name] = option
    return out


# --------------------------------------------------------------------------
# options to claims


def _size_or_count(what, key, value):
    try:
        if isinstance(value, bool):
            raise ValueError("%r is not a %s" % (value, "size" if key in SIZE_LIMITS else "number"))
        if key in SIZE_LIMITS:
            number = size_bytes(value)
        else:
            number = int(value)
            if number < -1:
                raise ValueError("%r: use -1 for unlimited" % (value,))
        if number > INT64_MAX:
            raise ValueError("%r is larger than any server reads (at most %d; -1 is unlimited)" % (value, INT64_MAX))
        return number
    except (TypeError, ValueError) as exc:
        raise StoreError("%s.%s: %s" % (what, key, exc)) from exc


def _limits_mapping(what, options, keys, hint):
    if options is not None and not isinstance(options, dict):
        raise StoreError("%s: %s is not a mapping of limits; %s" % (what, _text(options), hint))
    unknown = sorted(set(options or {}) - set(keys))
    if unknown:
        raise StoreError("%s: unknown limit%s %s; it takes %s" % (
            what, "s" if len(unknown) > 1 else "", ", ".join(unknown), ", ".join(keys)))


JETSTREAM_HINT = ("write jetstream: {} for JetStream without limits, a mapping of disk_storage, mem_storage, streams "
                  "and consumers to limit it (jetstream: {disk_storage: 1GiB}), or leave jetstream out to disable it")
TIERS_HINT = "write a mapping of %s (by replicas) to limits, e.g. tiers: {R1: {disk_storage: 1GiB}}" % ", ".join(
    JETSTREAM_TIERS)


def _jetstream_tier(what, options, hint):
    """The JetStream limits of the account or of one tier, as claims."""
    _limits_mapping(what, options, list(_TIER_OPTIONS) + (["tiers"] if what == "jetstream" else []), hint)
    options = options or {}
    limits = {}
    for option, claim in JETSTREAM_LIMITS.items():
        value = options.get(option)
        limits[claim] = -1 if value is None else _size_or_count(what, option, value)
    for option in JETSTREAM_CAPS:
        if options.get(option) is not None:
            limits[option] = _size_or_count(what, option, options[option])
    required = options.get("max_bytes_required")
    if required is not None and not isinstance(required, bool):
        raise StoreError("%s.max_bytes_required: %s is not true or false" % (what, _text(required)))
    if required:
        limits["max_bytes_required"] = True
    return limits


def jetstream_limits(options):
    """Account JetStream limits from the module option, as claims of ``limits``: the account's, or per tier
    ({tiered_limits: {R1: ...}}); None disables JetStream."""
    _limits_mapping("jetstream", options, list(JETSTREAM_OPTIONS), JETSTREAM_HINT)
    if options is None:
        return None
    tiers = options.get("tiers")
    if tiers is None:
        return _jetstream_tier("jetstream", options, JETSTREAM_HINT)
    flat = sorted(key for key, value in options.items() if key != "tiers" and value is not None)
    if flat:
        raise StoreError("jetstream: tiers cannot be combined with %s: a JWT limits JetStream per tier or for the "
                         "whole account, not both; move %s into each tier" % (", ".join(flat), ", ".join(flat)))
    _limits_mapping("jetstream.tiers", tiers, JETSTREAM_TIERS, TIERS_HINT)
    tiered = dict((tier, _jetstream_tier("jetstream.tiers.%s" % tier, limits, JETSTREAM_HINT))
                  for tier, limits in tiers.items() if limits is not None)
    if not tiered:
        raise StoreError("jetstream.tiers: no tier given; %s" % TIERS_HINT)
    return {"tiered_limits": tiered}


# --------------------------------------------------------------------------
# subject mappings

MAPPING_OPTIONS = dict(
    subject=dict(type="str", required=True),
    to=dict(type="list", elements="dict", required=True, options=dict(
        subject=dict(type="str", required=True), weight=dict(type="int"), cluster=dict(type="str"))))

# a mapping function of a destination: {{wildcard(1)}}, {{partition(3,1)}}, ...
_MAPPING_FUNCTION = re.compile(r"\{\{\s*[A-Za-z]+\([^{}]*\)\s*\}\}")


def _destination(value, what):
    """A mapping's destination: a subject whose tokens may be (or hold) mapping functions."""
    if not isinstance(value, str) or not value:
        raise StoreError("%s: %r is not a subject" % (what, value))
    if "{{" in value or "}}" in value:
        plain = _MAPPING_FUNCTION.sub("F", value)
        if "{" in plain or "}" in plain:
            raise StoreError("%s: %r has a malformed mapping function (write {{wildcard(1)}}, {{partition(3,1)}}, "
                             "...)" % (what, value))
    else:
        plain = value
    try:
        check_subject(plain)
    except ValueError as exc:
        raise StoreError("%s: %s" % (what, str(exc).replace(repr(plain), repr(value)))) from exc
    return value


def mappings(options):
    """The ``mappings`` claim ({subject: [{subject, weight, cluster}]}) from the module option (a list of
    {subject, to: [{subject, weight, cluster}]}); None when the option is left out."""
    if options is None:
        return None
    if not isinstance(options, list):
        raise StoreError("mappings: %s is not a list of {subject, to} mappings" % _text(options))
    result = {}
    for index, item in enumerate(options):
        where = "mappings[%d]" % index
        if not isinstance(item, dict):
            raise StoreError("%s: %s is not a mapping of subject and to" % (where, _text(item)))
        try:
            source = check_subject(item.get("subject"))
        except ValueError as exc:
            raise StoreError("%s.subject: %s" % (where, exc)) from exc
        where = "%s (%s)" % (where, source)
        if source in result:
            raise StoreError("%s: subject %r is mapped twice; list every destination under one to" % (where, source))
        targets = item.get("to")
        if not isinstance(targets, list) or not targets:
            raise StoreError("%s.to: give a list of one or more destinations ({subject, weight, cluster})" % where)
        totals, claim = {}, []
        for number, target in enumerate(targets):
            at = "%s.to[%d]" % (where, number)
            if not isinstance(target, dict):
                raise StoreError("%s: %s is not a mapping of subject, weight and cluster" % (at, _text(target)))
            entry = {"subject": _destination(target.get("subject"), at + ".subject")}
            weight = target.get("weight")
            if weight is not None:
                if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
                    raise StoreError("%s.weight: %s is not a percentage from 1 to 100" % (at, _text(weight)))
                entry["weight"] = weight
            cluster = target.get("cluster")
            if cluster is not None:
                if not isinstance(cluster, str) or not cluster or re.search(r"\s", cluster):
                    raise StoreError("%s.cluster: %s is not a cluster name" % (at, _text(cluster)))
                entry["cluster"] = cluster
            key = entry.get("cluster")
            totals[key] = totals.get(key, 0) + (weight or 100)
            if totals[key] > 100:
                raise StoreError("%s: the weights of the destinations %sadd up to %d%%, more than 100%%" % (
                    where, "in cluster %r " % key if key else "", totals[key]))
            claim.append(entry)
        result[source] = claim
    return result


def account_limits(options):
    _limits_mapping("limits", options, ACCOUNT_LIMITS,
                    "write a mapping of %s (limits: {conn: 100}), or leave limits out for none" % ", ".join(ACCOUNT_LIMITS))
    limits = {}
    for key in ACCOUNT_LIMITS:
        value = (options or {}).get(key)
        if value is not None:
            limits[key] = _size_or_count("limits", key, value)
    return limits


# The full nested spec of user and default permissions: Ansible then refuses
# unknown keys ('alow', 'publish') and wrong types, which the server would
# otherwise read as "no restriction".
_SUBJECT_RULES = dict(allow=dict(type="list", elements="str"), deny=dict(type="list", elements="str"))
PERMISSIONS_OPTIONS = dict(
    pub=dict(type="dict", options=_SUBJECT_RULES),
    sub=dict(type="dict", options=_SUBJECT_RULES),
    resp=dict(type="dict", options=dict(max=dict(type="int", default=1), ttl=dict(type="raw", default=0))),
)


def permissions(options, what):
    """{pub: {allow, deny}, sub: {allow, deny}[, resp: {max, ttl}]} with sorted,
    checked subjects; empty parts left out as the server writes them."""
    result = {"pub": {}, "sub": {}}
    for direction in ("pub", "sub"):
        for rule in ("allow", "deny"):
            subjects = ((options or {}).get(direction) or {}).get(rule) or []
            try:
                checked = sorted(set(check_subject(subject) for subject in subjects))
            except ValueError as exc:
                raise StoreError("%s.%s.%s: %s" % (what, direction, rule, exc)) from exc
            if checked:
                result[direction][rule] = checked
    resp = (options or {}).get("resp")
    if resp:
        result["resp"] = {"max": response_max(resp.get("max"), what), "ttl": _resp_ttl(resp.get("ttl"), what)}
    return result


def connection_types(value, what):
    """allowed_connection_types as the claim lists them (sorted, upper case); None or [] for any."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise StoreError("%s: %s is not a list of connection types (%s)" % (what, _text(value), ", ".join(
            CONNECTION_TYPES)))
    result = set()
    for item in value:
        if not isinstance(item, str) or item.upper() not in CONNECTION_TYPES:
            raise StoreError("%s: %s is not a connection type; use %s" % (what, _text(item), ", ".join(
                CONNECTION_TYPES)))
        result.add(item.upper())
    return sorted(result)


def source_networks(value, what):
    """src as the claim lists it: CIDR networks (an address needs its /prefix, as a server reads it), sorted."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise StoreError("%s: %s is not a list of networks such as 10.0.0.0/8" % (what, _text(value)))
    result = set()
    for item in value:
        try:
            if not isinstance(item, str) or "/" not in item:
                raise ValueError("a network needs its prefix length")
            ipaddress.ip_network(item, strict=False)
        except ValueError as exc:
            raise StoreError("%s: %s is not a network in CIDR notation such as 10.0.0.0/8 or 2001:db8::/32 (%s)"
                             % (what, _text(item), exc)) from exc
        result.add(item.lower())
    return sorted(result)


USER_POLICY_OPTIONS = dict(
    allowed_connection_types=dict(type="list", elements="str"),
    src=dict(type="list", elements="str"),
)
TEMPLATE_OPTIONS = dict(PERMISSIONS_OPTIONS, bearer_token=dict(type="bool", default=False),
                        subs=dict(type="int"), data=dict(type="raw"), payload=dict(type="raw"), **USER_POLICY_OPTIONS)


def user_policy(options, what):
    """The src and allowed_connection_types claims of a user (or a template) from its options."""
    claims = {}
    kinds = connection_types((options or {}).get("allowed_connection_types"), what + "allowed_connection_types")
    if kinds:
        claims["allowed_connection_types"] = kinds
    networks = source_networks((options or {}).get("src"), what + "src")
    if networks:
        claims["src"] = networks
    return claims


def user_template(options, what):
    """The ``template`` of a scoped signing key: the permissions and limits of every user it issues."""
    if options is not None and not isinstance(options, dict):
        raise StoreError("%s: %s is not a mapping of permissions and limits" % (what, _text(options)))
    options = options or {}
    unknown = sorted(set(options) - set(TEMPLATE_OPTIONS))
    if unknown:
        raise StoreError("%s: unknown option%s %s; it takes %s" % (
            what, "s" if len(unknown) > 1 else "", ", ".join(unknown), ", ".join(sorted(TEMPLATE_OPTIONS))))
    template = permissions(options, what)
    for key in ("subs", "data", "payload"):
        template[key] = -1 if options.get(key) is None else _size_or_count(what, key, options[key])
    template.update(user_policy(options, what + "."))
    if options.get("bearer_token"):
        template["bearer_token"] = True
    return template


def response_max(value, what):
    """resp.max as a server reads it: replies allowed per request, 1 or more, or -1 for no limit."""
    if value is None:
        return 1
    try:
        if isinstance(value, bool):
            raise ValueError("%r is not a number" % (value,))
        number = int(value)
    except (TypeError, ValueError) as exc:
        raise StoreError("%s.resp.max: %s" % (what, exc)) from exc
    if number == 0 or number < -1:
        raise StoreError("%s.resp.max: %r: use the number of replies allowed per request (1 or more), or -1 for "
                         "no limit" % (what, value))
    if number > RESP_MAX:
        raise StoreError("%s.resp.max: %r is larger than every server reads (at most %d; -1 is no limit)"
                         % (what, value, RESP_MAX))
    return number


def _resp_ttl(value, what):
    try:
        return duration_ns(value if value is not None else 0)
    except (TypeError, ValueError) as exc:
        raise StoreError("%s.resp: %s" % (what, exc)) from exc


EXPIRES_HINT = ("give epoch seconds or an RFC 3339 time such as '2030-01-01T00:00:00Z', or leave expires out "
                "(or 0) for a JWT that never expires")


def expiry(value):
    """Epoch seconds from an epoch number or an RFC 3339 time; None for no expiry (left out, '' or 0, as nsc and
    the JWT read 0)."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise StoreError("expires: %s is not a time; %s" % (
            ("true" if value else "false") if isinstance(value, bool) else repr(value), EXPIRES_HINT))
    if isinstance(value, int) or value.strip().lstrip("-").isdigit():
        seconds = int(value)
        if seconds < 0:
            raise StoreError("expires: %r is before 1970; %s" % (value, EXPIRES_HINT))
        if seconds > INT64_MAX:
            raise StoreError("expires: %r is later than any server reads (at most %d epoch seconds)"
                             % (value, INT64_MAX))
        return seconds or None
    try:
        text = canonical_time(value)
    except ValueError as exc:
        raise StoreError("expires: %s" % exc) from exc
    seconds = calendar.timegm(time.strptime(text.split(".")[0].rstrip("Z"), "%Y-%m-%dT%H:%M:%S"))
    if seconds <= 0:
        raise StoreError("expires: %r is not after 1970; %s" % (value, EXPIRES_HINT))
    return seconds


def merged(existing, desired, managed):
    """``desired`` plus every claim of ``existing['nats']`` a module does not manage."""
    result = copy.deepcopy(desired)
    for key, value in ((existing or {}).get("nats") or {}).items():
        if key not in managed and key not in result["nats"]:
            result["nats"][key] = value
    return result


def body(claims):
    """The claims without their issuer, for comparing with a claim body."""
    if claims is None:
        return None
    result = dict(claims)
    result.pop("iss", None)
    return result


def needs_signing(existing, desired):
    return existing is None or not jwt.same_claims(body(existing), desired)


def diff(before, after):
    return {"before": jwt.semantic(body(before)) if before else {},
            "after": jwt.semantic(body(after)) if after else {}}


# --------------------------------------------------------------------------
# keys


def signer_of(store, claims, what, retiring=()):
    """Seed to sign with: a signing key of ``claims`` whose seed the key store
    holds, one that is not ``retiring`` (replaced by a rotation, kept until
    retired) first, else the identity key. Returns (seed, via_signing_key)."""
    keys = jwt.plain_signing_keys(claims)
    for key in [k for k in keys if k not in retiring] + [k for k in keys if k in retiring]:
        seed = store.read_seed(key)
        if seed:
            return seed, True
    seed = store.read_seed(claims["sub"])
    if not seed:
        raise StoreError("%s: no seed for %s or any of its signing keys in %s" % (what, claims["sub"], store.keys_dir))
    return seed, False


def system_account_name(store, operator_claims):
    system = (operator_claims.get("nats") or {}).get("system_account")
    for name in store.accounts():
        _token, claims = store.read_account(name)
        if claims and claims.get("sub") == system:
            return name
    return None


def _imports_of_others(store, account):
    """(account name, import claim) for every import of the store's accounts but ``account``."""
    for name in store.accounts():
        if name == account:
            continue
        _token, claims = store.read_account(name)
        for imp in ((claims or {}).get("nats") or {}).get("imports") or []:
            yield name, imp


def importers_of(store, account, public):
    """'<importer> (<subject>)' for every import of another account in the
    store that reads from ``public``."""
    return ["%s (%s %s)" % (name, imp.get("type", "stream"), imp.get("subject"))
            for name, imp in _imports_of_others(store, account) if imp.get("account") == public]


def activations_by(store, account, keys):
    """'<importer> (<subject>)' for every activation in another account of the store signed by one of ``keys``."""
    return ["%s (%s)" % (name, imp.get("subject")) for name, imp in _imports_of_others(store, account)
            if imp.get("token") and jwt.decode(imp["token"], verify=False).get("iss") in keys]


def warn_loose_keys_dir(module, keys_dir):
    """Seeds are secrets: say so when others may write where they live."""
    path = os.path.abspath(os.path.expanduser(keys_dir))
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return
    if mode & 0o022:
        module.warn("keys_dir %s is %s-writable (mode %04o): others can replace the seeds in it; "
                    "chmod go-w it" % (path, "group- and world" if mode & 0o022 == 0o022 else
                                       "group" if mode & 0o020 else "world", mode))


# --------------------------------------------------------------------------
# the resolver


class PushFailed(NatsEdgeError):
    """A push that did not reach or was not confirmed by every server."""


class ConvergeFailed(NatsEdgeError):
    """An operator, account, user or export that failed to converge: the message names it and the error it came
    from, ``result`` holds what the module reports beside it (``changed`` as it really happened, what was done)."""


def push_params(store, op_claims, params):
    """Connection options for a push: the given ones, else the creds of the
    system account's ``sys`` user in the store. Creds of a user of another
    account are refused before anything is sent: the resolver only takes
    claims updates from the system account."""
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import check_creds_file
    result = dict(params)
    system_public = (op_claims.get("nats") or {}).get("system_account")
    if not any(params.get(key) for key in ("creds", "nkey_seed", "user", "token")):
        system = system_account_name(store, op_claims)
        if not system or store.read_creds(system, "sys") is None:
            raise StoreError("push needs creds of a system account user: none given and no creds of user 'sys' of "
                             "the system account in the store")
        result["creds"] = store.creds_path(system, "sys")
    elif params.get("creds") and system_public:
        claims = check_creds_file(params["creds"])
        account = (claims.get("nats") or {}).get("issuer_account") or claims.get("iss")
        if account != system_public:
            names = dict((c["sub"], n) for n, c in ((n, store.read_account(n)[1]) for n in store.accounts()) if c)
            raise StoreError("creds: %s belong to user %r of account %s, not to the system account %s: the resolver "
                             "takes account JWTs only from a system account user (nsc_operator's sys_creds)" % (
                                 params["creds"], claims.get("name"), names.get(account, account),
                                 names.get(system_public, system_public)))
    return result


def lookup(client, account, timeout):
    """The JWT the resolver has for ``account``, or None."""
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import NatsClientError
    try:
        raw = client.request("$SYS.REQ.ACCOUNT.%s.CLAIMS.LOOKUP" % account, b"", timeout)
    except NatsClientError:
        return None
    text = raw.decode(errors="replace").strip()
    return text if text.count(".") == 2 else None


def read_replies(replies):
    """[{server, ok, message}] from the answers to a claims update."""
    results = []
    for raw in replies:
        try:
            reply = json.loads(raw.decode() or "{}")
        except ValueError:
            results.append({"server": "?", "ok": False, "message": raw.decode(errors="replace")[:200]})
            continue
        server = (reply.get("server") or {}).get("name") or (reply.get("server") or {}).get("id") or "?"
        data, error = reply.get("data") or {}, reply.get("error") or {}
        if error:
            results.append({"server": server, "ok": False,
                            "message": error.get("description") or json.dumps(error)})
        else:
            results.append({"server": server, "ok": data.get("code") == 200, "message": data.get("message", "")})
    return results


# A claims update reaches the servers behind the hub through every leaf link,
# and each server answers on its own: on a loaded controller and a large fleet
# the answers trickle in, and a leaf link that was still connecting misses the
# update entirely. So a round waits longer the more servers are expected, and
# the update is sent again while some have not confirmed. Sending it again is
# harmless: a server that holds the same JWT stores nothing and reloads
# nothing (the resolver compares the file), so only the servers that missed it
# take the account - one account per run as before, never several back to back.
CONFIRM_PER_SERVER = 0.25  # seconds each expected server adds to a round's wait
CONFIRM_MAX_WAIT = 120.0
CONFIRM_ROUNDS = 3
CONFIRM_PAUSE = 2.0  # before a further round, growing by this much each time


def confirm_wait(timeout, expected):
    """Seconds one round waits for confirmations: ``timeout`` for one server,
    plus CONFIRM_PER_SERVER for each further one expected, at most
    CONFIRM_MAX_WAIT (or ``timeout`` when that is longer)."""
    extra = CONFIRM_PER_SERVER * max(0, (expected or 1) - 1)
    return max(float(timeout), min(float(timeout) + extra, CONFIRM_MAX_WAIT))


def confirm_rounds(expected):
    """[(pause before, wait)] - how often a claims update is sent: once when the
    number of servers is unknown (nothing to wait for), else up to
    CONFIRM_ROUNDS times, pausing longer before each further round."""
    if not expected:
        return [0.0]
    return [CONFIRM_PAUSE * number for number in range(CONFIRM_ROUNDS)]


class Confirmations(object):
    """The answers of every round to one account's claims update, by server:
    a server has confirmed once any round brought its ``ok``."""

    def __init__(self, expected=None):
        self.expected = expected
        self.latest = {}
        self.confirmed = set()
        self.unnamed = 0

    def add(self, results):
        unnamed = 0
        for result in results:
            if result["server"] == "?":
                unnamed += 1
                continue
            self.latest[result["server"]] = result
            if result["ok"]:
                self.confirmed.add(result["server"])
        self.unnamed = max(self.unnamed, unnamed)

    def done(self):
        if self.expected:
            return len(self.confirmed) >= self.expected
        return bool(self.confirmed) and len(self.confirmed) == len(self.latest) and not self.unnamed

    def results(self):
        """[{server, ok, message}], one per server, its confirming answer if any."""
        return [dict(self.latest[name], ok=name in self.confirmed) for name in sorted(self.latest)]

    def unconfirmed(self, reachable=()):
        """Who never confirmed: servers that answered with an error (and their
        message), servers that are up but never answered (from ``reachable``,
        the names of servers found running), and how many of the expected
        answered not at all."""
        found = ["%s (%s)" % (name, self.latest[name].get("message") or "refused")
                 for name in sorted(self.latest) if name not in self.confirmed]
        silent = sorted(set(reachable) - set(self.latest))
        found += ["%s (up, never answered)" % name for name in silent]
        missing = (self.expected or 0) - len(self.latest) - len(silent)
        if missing > 0:
            found.append("(%d of %d servers never answered)" % (missing, self.expected))
        if self.unnamed:
            found.append("(%d answers could not be read)" % self.unnamed)
        if not self.latest and not found:
            found.append("(no server answered)")
        return found


def push_account(client, account, token, timeout, expected=None, sleep=time.sleep):
    """Send an account JWT to every resolver that listens, again while servers
    have not confirmed, and read the JWT back. Returns (pushed, unconfirmed,
    read_back_ok)."""
    answers = Confirmations(expected)
    wait = confirm_wait(timeout, expected)
    for pause in confirm_rounds(expected):
        if answers.done():
            break
        sleep(pause)
        answers.add(read_replies(client.gather("$SYS.REQ.CLAIMS.UPDATE", token.encode(), wait, expect=expected)))
    reachable = ()
    if not answers.done():
        # name the servers that are up but silent: the leaf link or the resolver to look at
        from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import NatsClientError
        try:
            reachable = [(reply.get("server") or {}).get("name") for reply in client.server_infos(system=True)]
        except NatsClientError:
            pass
    unconfirmed = [] if answers.done() else answers.unconfirmed(name for name in reachable if name)
    returned = lookup(client, account, timeout)
    read_back = bool(returned) and jwt.same_claims(jwt.decode(returned, verify=False), jwt.decode(token, verify=False))
    return answers.results(), unconfirmed, read_back


def push_if_needed(params, public, token, check_mode, expected, result):
    """Send an account JWT when the resolver's differs, and confirm it.
    Sets push_needed, unconfirmed and pushed in ``result``; raises PushFailed
    when a server did not confirm. Returns whether a push was (or would be) sent."""
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import NatsClient
    with NatsClient(params) as client:
        current = lookup(client, public, min(client.timeout, 2.0))
        needed = not current or not jwt.same_claims(jwt.decode(current, verify=False), jwt.decode(token, verify=False))
        result["push_needed"] = needed
        result["unconfirmed"] = []
        if not needed or check_mode:
            return needed
        pushed, unconfirmed, read_back = push_account(client, public, token, client.timeout, expected)
        result.update(pushed=pushed, unconfirmed=unconfirmed)
        if unconfirmed or not read_back:
            raise PushFailed("the push was not confirmed by %s" % (
                ", ".join(unconfirmed) or "the read-back (the resolver returned another JWT)"))
        return True


def revoked_at(account_claims, public):
    """When the account revoked the JWTs of user ``public`` (issued at or before), or None."""
    return ((account_claims.get("nats") or {}).get("revocations") or {}).get(public)


def with_revocations(account_claims, publics, now):
    """Account claims (without issuer) that also revoke the JWTs of ``publics`` issued up to ``now``."""
    claims = body(account_claims)
    claims = copy.deepcopy(claims)
    revocations = claims["nats"].setdefault("revocations", {})
    for public in publics:
        revocations[public] = max(int(now), revocations.get(public, 0))
    return claims
