# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Durations, sizes, times and subjects as NATS reads them. Private to the collection.

Pure functions without Ansible imports: modules normalise user input with
them, so the same value always reaches the server in the same form.
Errors are ``ValueError`` with a message that quotes the value; callers
prefix the resource and the option.
"""

from __future__ import annotations

import re

NS_PER_SECOND = 10**9
MAX_NS = 2**63 - 1

# As nats-server's config parser reads sizes: a bare letter is decimal,
# the B and iB forms are binary.
_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1024, "ki": 1024, "kib": 1024,
    "m": 1000**2, "mb": 1024**2, "mi": 1024**2, "mib": 1024**2,
    "g": 1000**3, "gb": 1024**3, "gi": 1024**3, "gib": 1024**3,
    "t": 1000**4, "tb": 1024**4, "ti": 1024**4, "tib": 1024**4,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")

# Go's units plus days and weeks, which the nats CLI also accepts.
_DURATION_NS = {
    "ns": 1, "us": 10**3, "µs": 10**3, "ms": 10**6, "s": 10**9,
    "m": 60 * 10**9, "h": 3600 * 10**9, "d": 86400 * 10**9, "w": 7 * 86400 * 10**9,
}
_DURATION_RE = re.compile(r"^(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h|d|w))+$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h|d|w)")

_TIME_RE = re.compile(
    r"^(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?\s*([Zz]|[+-]\d\d:?\d\d)?$")


def duration_ns(value):
    """Nanoseconds from a number of seconds or a duration string ('90s', '1h30m', '7d')."""
    if isinstance(value, bool) or value is None:
        raise ValueError("%r is not a duration" % (value,))
    if isinstance(value, int):
        if value < 0:
            raise ValueError("%r: a duration cannot be negative" % (value,))
        return _check_ns(value * NS_PER_SECOND, value)
    if isinstance(value, float):
        if value < 0:
            raise ValueError("%r: a duration cannot be negative" % (value,))
        return _check_ns(int(round(value * NS_PER_SECOND)), value)
    if isinstance(value, str) and re.match(r"^\s*\d+(\.\d+)?\s*$", value):
        return _check_ns(_scaled(value.strip(), NS_PER_SECOND), value)
    if isinstance(value, str) and _DURATION_RE.match(value.strip().replace(" ", "")):
        text = value.strip().replace(" ", "")
        total = 0
        for number, unit in _DURATION_PART.findall(text):
            total += _scaled(number, _DURATION_NS[unit])
        return _check_ns(total, value)
    raise ValueError("%r is not a duration; use seconds or a string such as '90s', '5m', '1h30m' or '7d'"
                     % (value,))


# A bare number of seconds this large (about 11.6 days) is more often a
# value meant in nanoseconds or milliseconds: 5000000 is 58 days, not 5 ms.
SUSPICIOUS_SECONDS = 10**6


def bare_seconds_warning(value, field):
    """A warning when ``value`` is a bare number of seconds large enough to
    have been meant in another unit, else None."""
    if isinstance(value, bool):
        return None
    number = value
    if isinstance(value, str):
        if not re.match(r"^\s*\d+(\.\d+)?\s*$", value):
            return None
        number = float(value)
    if not isinstance(number, (int, float)) or number < SUSPICIOUS_SECONDS:
        return None
    spelled = format_duration(duration_ns(value))
    return ("%s: %r is read as seconds (%s); if you meant nanoseconds or milliseconds write a unit (such as "
            "'5ms'), and write %r to keep this value without a warning" % (field, value, spelled, spelled))


def _scaled(number, factor):
    whole, _dot, fraction = str(number).partition(".")
    result = int(whole) * factor
    if fraction:
        result += int(fraction) * factor // 10 ** len(fraction)
    return result


def _check_ns(total, value):
    if total > MAX_NS:
        raise ValueError("%r is too long for a duration (at most about 292 years)" % (value,))
    return total


def format_duration(ns):
    """A short duration string for messages: 120000000000 -> '2m'."""
    if not ns:
        return "0s"
    parts = []
    for unit, size in (("d", 86400 * 10**9), ("h", 3600 * 10**9), ("m", 60 * 10**9), ("s", 10**9),
                       ("ms", 10**6), ("us", 10**3), ("ns", 1)):
        if ns >= size:
            parts.append("%d%s" % (ns // size, unit))
            ns %= size
    return "".join(parts)


def size_bytes(value, minimum=-1):
    """Bytes from an int or a nats size string ('512MB', '1G', '2GiB'); -1 means unlimited."""
    if isinstance(value, bool) or value is None:
        raise ValueError("%r is not a size" % (value,))
    if isinstance(value, int):
        result = value
    elif isinstance(value, str) and re.match(r"^\s*-1\s*$", value):
        result = -1
    else:
        match = _SIZE_RE.match(str(value))
        if not match or match.group(2).lower() not in _SIZE_UNITS:
            raise ValueError("%r is not a size; use bytes or a number with K, KB, KiB, M, MB, MiB, G, GB, GiB, T"
                             % (value,))
        result = _scaled(match.group(1), _SIZE_UNITS[match.group(2).lower()])
    if result < minimum:
        raise ValueError("%r: a size cannot be below %d" % (value, minimum))
    return result


def canonical_time(value):
    """An RFC 3339 time in UTC with trailing zeros of the fraction removed,
    so '2024-01-01T01:00:00+01:00' and '2024-01-01T00:00:00.000Z' compare equal.
    A time without an offset is UTC."""
    match = _TIME_RE.match(str(value).strip())
    if not match:
        raise ValueError("%r is not a time; use RFC 3339 such as '2024-05-01T00:00:00Z'" % (value,))
    year, month, day, hour, minute, second = (int(x) for x in match.groups()[:6])
    fraction = (match.group(7) or "").rstrip("0")
    zone = match.group(8) or "Z"
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 61):
        raise ValueError("%r is not a valid time" % (value,))
    seconds = _utc_seconds(year, month, day, hour, minute, second, zone)
    days, rest = divmod(seconds, 86400)
    year, month, day = _civil_from_days(days)
    text = "%04d-%02d-%02dT%02d:%02d:%02d" % (year, month, day, rest // 3600, rest % 3600 // 60, rest % 60)
    return text + ("." + fraction if fraction else "") + "Z"


_RFC3339_RE = re.compile(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")


def epoch_seconds(value):
    """Seconds since the epoch from an RFC 3339 time as /varz reports it (nanoseconds and any UTC offset
    allowed)."""
    match = _RFC3339_RE.match(str(value or "").strip())
    if not match:
        raise ValueError("cannot read a time from %r" % (value,))
    year, month, day, hour, minute, second = (int(x) for x in match.groups()[:6])
    fraction = float("0." + match.group(7)) if match.group(7) else 0.0
    return _utc_seconds(year, month, day, hour, minute, second, match.group(8)) + fraction


def _utc_seconds(year, month, day, hour, minute, second, zone):
    """Whole seconds since the epoch of a civil time at UTC offset ``zone`` (Z, +hh:mm or +hhmm)."""
    seconds = _days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second
    if zone not in ("Z", "z"):
        zone = zone.replace(":", "")
        offset = int(zone[1:3]) * 3600 + int(zone[3:5]) * 60
        seconds -= offset if zone[0] == "+" else -offset
    return seconds


def _days_from_civil(year, month, day):
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _civil_from_days(days):
    days += 719468
    era = days // 146097
    doe = days - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def check_subject(value, wildcards=True):
    """A subject as the server accepts it: dot-separated non-empty tokens without
    whitespace; '*' and '>' only as whole tokens, '>' only last."""
    if not isinstance(value, str) or not value:
        raise ValueError("%r is not a subject" % (value,))
    if re.search(r"\s", value):
        raise ValueError("%r is not a subject: it contains whitespace" % (value,))
    tokens = value.split(".")
    for index, token in enumerate(tokens):
        if not token:
            raise ValueError("%r is not a subject: empty token" % (value,))
        if token in ("*", ">") or "*" in token or ">" in token:
            if not wildcards:
                raise ValueError("%r is not a subject without wildcards" % (value,))
            if token not in ("*", ">"):
                raise ValueError("%r is not a subject: wildcards must be whole tokens" % (value,))
            if token == ">" and index != len(tokens) - 1:
                raise ValueError("%r is not a subject: '>' must be the last token" % (value,))
    return value


_DOMAIN_API = re.compile(r"^\$JS\.([^.]+)\.API$")


def api_domain(api):
    """The JetStream domain of the API prefix ``$JS.<domain>.API``; None for any other prefix, or none."""
    match = _DOMAIN_API.match(api or "")
    return match.group(1) if match else None


def subjects_collide(first, second):
    """Whether some subject matches both (server/sublist.go, SubjectsCollide)."""
    return tokens_collide(first.split("."), second.split("."))


def tokens_collide(one, two):
    """subjects_collide on subjects already split into tokens."""
    if len(one) != len(two) and ">" not in one and ">" not in two:
        return False
    for a, b in zip(one, two):
        if a == ">" or b == ">":
            return True
        if a != b and a != "*" and b != "*":
            return False
    return len(one) == len(two)


def check_name(value):
    """A stream or consumer name: it becomes one token of the API subjects."""
    if not isinstance(value, str) or not value:
        raise ValueError("a name is required")
    bad = re.search(r"[\s.*>/\\]", value) or any(ord(ch) < 32 or ord(ch) == 127 for ch in value)
    if bad:
        raise ValueError("%r is not a valid name: no whitespace, '.', '*', '>', '/' or '\\'" % (value,))
    return value


def subject_within(subject, pattern):
    """True if every subject ``subject`` matches is also matched by ``pattern``."""
    tokens, allowed = subject.split("."), pattern.split(".")
    for index, token in enumerate(allowed):
        if token == ">":
            return len(tokens) > index
        if index >= len(tokens):
            return False
        if token == "*":
            if tokens[index] == ">":
                return False
            continue
        if token != tokens[index]:
            return False
    return len(tokens) == len(allowed)
