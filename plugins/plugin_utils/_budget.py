# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Outage budgets: how long a site may be cut off from the domains that copy its streams before it loses writes.

A site declares what it must survive (``nats_fleet_outage``: ``survive``, and the ``write_rate`` of its streams,
per second). Each of its streams that a stream of another domain mirrors or sources (an origin) keeps what the
site writes while the copy cannot read it, until the first of its limits ends that:
- ``max_age``: the oldest messages expire, copied or not;
- ``max_msgs`` / ``max_bytes`` at the declared rate: ``discard: old`` drops the oldest messages, ``discard: new``
  refuses new ones;
- the account's JetStream storage (``disk_storage`` or ``mem_storage``; in a tiered account, that of the tier of the
  stream's replicas, ``tiers.R1.disk_storage``), shared by the account's origins at the site that count against it
  and counted once per replica: new messages are refused.
The budget is the shortest of these. When the link is back, a copy resumes only at its next retry: nats-server retries
a source or mirror it lost with a backoff that grows to 2 minutes (``RESUME``; 40 to 50 s after a cut of a minute in
bench/bench_dataplane.py), so an origin must keep its writes that much longer. A site whose origin holds less than it
must survive and ``RESUME`` is refused before anything changes. Pure logic on the controller: the preflight refuses,
the report counts down what is left during a cut.
"""

from __future__ import annotations

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._units import (NS_PER_SECOND, duration_ns,
                                                                             format_duration, size_bytes)

SETTING = "nats_fleet_outage"
# the longest a copy waits before it retries an origin it lost (nats-server's retryMaximum for sources and mirrors)
RESUME = 120
_RATES = ("messages", "bytes")
_EFFECT = {"age": "the oldest messages expire, copied or not", "old": "discard: old drops the oldest messages",
           "new": "discard: new refuses new messages", "account": "the account refuses new messages"}


class BudgetError(NatsEdgeError, ValueError):
    """A budget that cannot be read, or that is shorter than the site must survive."""


def settings(value, site):
    """``nats_fleet_outage`` of ``site`` checked: {survive: seconds, rate: {messages, bytes}, streams: {key: rate}},
    or None when the site declares none."""
    if value in (None, {}, ""):
        return None
    here = "%s: %s" % (site, SETTING)
    if not isinstance(value, dict):
        raise BudgetError("%s: expected a mapping with survive and write_rate, got %r" % (here, value))
    unknown = sorted(set(value) - {"survive", "write_rate", "streams"})
    if unknown:
        raise BudgetError("%s: unknown key %s (survive, write_rate, streams)" % (here, ", ".join(unknown)))
    if value.get("survive") in (None, ""):
        raise BudgetError("%s.survive: how long the site must keep its writes while cut off, such as '6h'" % here)
    try:
        survive = duration_ns(value["survive"]) / NS_PER_SECOND
    except ValueError as exc:
        raise BudgetError("%s.survive: %s" % (here, exc)) from exc
    if survive <= 0:
        raise BudgetError("%s.survive: %r: use a duration above 0" % (here, value["survive"]))
    streams = value.get("streams") or {}
    if not isinstance(streams, dict):
        raise BudgetError("%s.streams: expected a mapping of stream name (or ACCOUNT/name) to its write_rate, got %r"
                          % (here, streams))
    return {"survive": survive, "rate": _rate(value.get("write_rate"), here + ".write_rate"),
            "streams": dict((str(key), _rate(rate, "%s.streams[%s]" % (here, key)))
                            for key, rate in streams.items())}


def _rate(value, here):
    if value in (None, {}):
        return {}
    if not isinstance(value, dict):
        raise BudgetError("%s: expected a mapping such as {messages: 50, bytes: 32KiB} (per second), got %r"
                          % (here, value))
    unknown = sorted(set(value) - set(_RATES))
    if unknown:
        raise BudgetError("%s: unknown key %s (messages, bytes: what the site writes per second)" % (
            here, ", ".join(unknown)))
    rate = {}
    for key in _RATES:
        if value.get(key) is None:
            continue
        try:
            number = float(value[key]) if key == "messages" else size_bytes(value[key], minimum=0)
        except (TypeError, ValueError) as exc:
            raise BudgetError("%s.%s: %r is not a %s per second" % (
                here, key, value[key], "number" if key == "messages" else "size")) from exc
        if isinstance(value[key], bool) or number <= 0:
            raise BudgetError("%s.%s: %r: use a rate above 0 per second" % (here, key, value[key]))
        rate[key] = number
    return rate


def origins(declared):
    """{(domain, account, stream): ["copying domain/stream", ...]} of every stream some stream of another domain
    mirrors or sources. ``declared``: {domain: [(place, desired)]}, each domain's present streams as the preflight
    checked them (desired.creds is the account)."""
    from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import domain as jd
    out = {}
    for domain, streams in declared.items():
        for _place, desired in streams:
            for _field, origin_domain, name in jd.copy_origins(desired.config):
                if origin_domain is not None and origin_domain != domain:
                    out.setdefault((origin_domain, desired.creds, name), []).append("%s/%s" % (domain, desired.name))
    return out


def _rate_of(site, account, name):
    for key in ("%s/%s" % (account, name), name):
        if key in site["streams"]:
            return dict(site["rate"], **site["streams"][key])
    return site["rate"]


_LOWER = "lower the rate or what the site must survive."


def _limits(config, rate, account_share, survive):
    """[(seconds, limit text, effect key, what would make it last ``survive`` seconds)] of one origin: its own
    limits, then its account's storage."""
    out = []
    if config.get("max_age"):
        out.append((config["max_age"] / NS_PER_SECOND, "max_age %s" % format_duration(config["max_age"]), "age",
                    "Raise max_age to at least %s." % seconds_text(survive)))
    discard = config.get("discard") or "old"
    for field, key in (("max_msgs", "messages"), ("max_bytes", "bytes")):
        limit = config.get(field) or -1
        if limit <= 0:
            continue
        if key not in rate:
            raise BudgetError("%s %s: write_rate.%s is not declared, so how long the limit lasts cannot be told" % (
                field, _amount(limit, key), key))
        needed = _amount(int(survive * rate[key] + 0.999), key)
        out.append((limit / rate[key], "%s %s at %s/s" % (field, _amount(limit, key), _amount(rate[key], key)),
                    discard, "Raise %s to at least %s, or %s" % (field, needed, _LOWER)))
    if account_share:
        out.append(account_share + ("Raise the account's JetStream storage, or " + _LOWER,))
    return out


def _amount(number, key):
    from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream.report_tables import format_bytes
    if key == "bytes":
        return format_bytes(number).replace(" ", "")
    return ("%g" % number) if number != int(number) else "{:,}".format(int(number))


def budgets(declared, sites, accounts):
    """(rows, problems): one row per origin of a site that declares a budget, in order: {site, account, stream,
    copied_by, survive, budget (seconds, None: no limit ends it), limit (the limit that ends it), effect, short
    (budget < survive + RESUME), text}; and the text of each origin whose budget is short or cannot be told (a limit
    whose rate is not declared). ``declared`` as origins() takes it; ``sites``: {domain: settings()}; ``accounts``:
    {domain: {account: its jetstream limits}}."""
    rows, problems = [], []
    copied = origins(declared)
    for site in sorted(sites):
        setting = sites[site]
        if setting is None:
            continue
        needed = setting["survive"] + RESUME  # the cut, then the wait until the copies read again
        mine = [(place, desired) for place, desired in declared.get(site, [])
                if (site, desired.creds, desired.name) in copied]
        try:
            shares = _account_shares(site, mine, setting, accounts.get(site) or {})
        except BudgetError as exc:
            problems.append(str(exc))
            continue
        for place, desired in mine:
            rate = _rate_of(setting, desired.creds, desired.name)
            copies = copied[(site, desired.creds, desired.name)]
            label = "%s: stream %r in account %r (copied by %s)" % (
                site, desired.name, desired.creds, ", ".join(copies))
            try:
                replicas = desired.config.get("num_replicas") or 1
                tiered = ((accounts.get(site) or {}).get(desired.creds) or {}).get("tiers")
                share = shares.get((desired.creds, desired.config.get("storage") or "file",
                                    replicas if tiered else 0))
                limits = _limits(desired.config, rate, share, needed)
            except BudgetError as exc:
                problems.append("%s: %s (%s)" % (label, exc, SETTING))
                continue
            budget, limit, effect, remedy = min(limits) if limits else (None, "", "", "")
            short = budget is not None and budget < needed
            row = dict(site=site, account=desired.creds, stream=desired.name, place=place, copied_by=copies,
                       survive=setting["survive"], budget=budget, limit=limit, effect=_EFFECT.get(effect, ""),
                       short=short, text=_text(label, setting["survive"], budget, limit, effect, short, remedy,
                                               " and ".join(copies)))
            rows.append(row)
            if short:
                problems.append(row["text"])
    return rows, problems


def _account_limit(jetstream, replicas, field):
    """(bytes, the limit's name) of an account's JetStream ``field`` for a stream of ``replicas``: the tier of that
    many replicas (``tiers.R3.disk_storage``) in a tiered account, the account-wide limit otherwise; 0 for none (a
    tiered account without that tier refuses the stream, which the preflight's own checks report)."""
    jetstream = jetstream or {}
    tiers = jetstream.get("tiers")
    if tiers:
        tier = "R%d" % replicas
        return _size((tiers.get(tier) or {}).get(field)), "jetstream.tiers.%s.%s" % (tier, field)
    return _size(jetstream.get(field)), "jetstream.%s" % field


def _account_shares(site, streams, setting, limits):
    """{(account, storage, replicas): (seconds, limit text, 'account')}: each account's storage limit at the site
    (of the tier of the stream's replicas, in a tiered account), shared by its origins there that count against it,
    each written at its rate and kept once per replica."""
    used = {}
    for _place, desired in streams:
        storage = desired.config.get("storage") or "file"
        field = "disk_storage" if storage == "file" else "mem_storage"
        replicas = desired.config.get("num_replicas") or 1
        jetstream = limits.get(desired.creds) or {}
        total, name = _account_limit(jetstream, replicas, field)
        if total <= 0:
            continue
        rate = _rate_of(setting, desired.creds, desired.name)
        if "bytes" not in rate:
            raise BudgetError("%s: account %r: %s %s: write_rate.bytes is not declared, so how long it "
                              "lasts cannot be told (%s)" % (site, desired.creds, name, _amount(total, "bytes"),
                                                             SETTING))
        # every tier is a limit of its own; the account-wide one is shared by every replica count
        key = (desired.creds, storage, replicas if jetstream.get("tiers") else 0)
        entry = used.setdefault(key, [total, name, 0.0])
        entry[2] += rate["bytes"] * replicas
    return dict((key, (total / per_second, "account %s's %s %s at %s/s" % (
        key[0], name, _amount(total, "bytes"), _amount(per_second, "bytes")), "account"))
        for key, (total, name, per_second) in used.items())


def _size(value):
    if value in (None, ""):
        return -1
    try:
        return size_bytes(value)
    except ValueError:
        return -1  # the account's own check names it


def _text(label, survive, budget, limit, effect, short, remedy, copies):
    if budget is None:
        return "%s: no limit of the stream or its account ends what it keeps (a full store does); must survive %s: ok" % (
            label, seconds_text(survive))
    if not short:
        return "%s: keeps %s of writes cut off (%s, then %s); must survive %s and %s to resume: ok" % (
            label, seconds_text(budget), limit, _EFFECT[effect], seconds_text(survive), seconds_text(RESUME))
    return ("%s: %s keeps %s of writes, less than the %s the site must survive cut off (%s.survive) and the up to %s "
            "its copies take to resume once the link is back; after that %s, which %s may not have copied. %s"
            % (label, limit, seconds_text(budget), seconds_text(survive), SETTING, seconds_text(RESUME),
               _EFFECT[effect], copies, remedy))


def seconds_text(seconds):
    return format_duration(int(round(seconds)) * NS_PER_SECOND) if seconds >= 1 else "%.1fs" % seconds


def left(replication, rows, account=None):
    """What is left of each budget while its copies cannot read it: one line per entry of ``replication``
    (jetstream_info's) whose origin has a budget, the origin in the copy's account (its ``account``, else
    ``account``). {copy, origin, active, budget, left, text}."""
    by_origin = dict(((row["site"], row["account"], row["stream"]), row) for row in rows)
    out = []
    for entry in replication or []:
        row = by_origin.get((entry.get("source_domain"), entry.get("account") or account, entry.get("source")))
        if row is None:
            continue
        active = entry.get("active")
        copy = "%s/%s" % (entry.get("domain"), entry.get("stream"))
        origin = "%s/%s" % (row["site"], row["stream"])
        # nats-server reports a copy it set up again (during a cut it retries) as never active
        heard = ("never heard from since the server set it up" if active is None
                 else "last heard %s ago" % seconds_text(active))
        if row["budget"] is None:
            remaining, text = None, "no limit"
        elif active is None:
            remaining, text = None, "%s, counted from the cut" % seconds_text(row["budget"])
        else:
            remaining = row["budget"] - active
            text = ("%s of %s left" % (seconds_text(max(remaining, 0)), seconds_text(row["budget"])) if remaining > 0
                    else "spent %s ago: %s" % (seconds_text(-remaining), row["effect"]))
        out.append(dict(copy=copy, origin=origin, active=active, budget=row["budget"], left=remaining,
                        text="%s <- %s: %s, outage budget %s" % (copy, origin, heard, text)))
    return out
