# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One field of a JetStream resource config, declared once. Private to the collection.

Streams (``stream_model.FIELDS``) and consumers (``consumer_model.FIELDS``) are
tables of ``Field``: what the user writes, what the API holds, the server's
value when it leaves the field out, the first release that knows it and
whether a live resource can change it. Conversions raise ``ValueError`` with
a message for the user; each model names the resource and the option.
"""

from __future__ import annotations

import copy

from ansible_collections.nats_edge.fleet.plugins.module_utils._units import (
    canonical_time, duration_ns, format_duration, size_bytes)
from ansible_collections.nats_edge.fleet.plugins.module_utils._versions import SERVER_METADATA_PREFIX


class _Marker(object):

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


ZERO = _Marker("ZERO")  # default: the kind's zero value
ABSENT = _Marker("ABSENT")  # default: the server always reports the field; absent stays absent

_ZEROS = {"str": "", "int": 0, "bool": False, "duration": 0, "size": 0, "percent": 0, "time": "",
          "durations": [], "subjects": [], "metadata": {}, "choice": "", "dict": None, "list": []}
_UNUSED = (None, False, 0, "", {}, [])


class Field(object):
    """One config field, named as in the API.

    ``kind`` gives the conversions unless ``convert`` (the user's value, then
    any context the model passes, to the API value) or ``normalise`` (an API
    value, None when absent, to the comparable form) replace them.
    ``option`` is the module option when it is named otherwise; ``default``
    the value the server means when the field is absent. ``since`` is the first
    release that knows the field, ``used`` whether a value needs that release
    (default: anything but an empty or default value) and ``since_path`` the
    name of what needs it. ``immutable`` is False, True, a function of the
    version or a model's own update rule; ``mode`` the kind of consumer that has
    the field; ``choices`` the values allowed.
    """

    def __init__(self, name, kind, mode=None, since=None, immutable=False, choices=None, option=None,
                 default=ZERO, convert=None, normalise=None, used=None, since_path=None):
        self.name = name
        self.kind = kind
        self.mode = mode
        self.since = since
        self.immutable = immutable
        self.choices = choices
        self.option = option or name
        self.default = default
        self.convert = convert
        self.normalise = normalise
        self.used = used
        self.since_path = since_path or name

    def __repr__(self):
        return "Field(%r)" % self.name

    def zero(self):
        """The value the server means when the field is absent."""
        if self.default is ZERO or self.default is ABSENT:
            return copy.deepcopy(_ZEROS[self.kind])
        return copy.deepcopy(self.default)

    def from_user(self, value, *context):
        """The canonical (API) value of what the user wrote; ValueError when it cannot be one."""
        if self.convert is not None:
            return self.convert(value, *context)
        if self.kind == "duration":
            return _positive(duration_ns(value))
        if self.kind == "durations":
            return [_positive(duration_ns(item)) for item in value]
        if self.kind == "size":
            return size_bytes(value, minimum=0)
        if self.kind == "time":
            return canonical_time(value)
        if self.kind == "percent":
            return _percent(value)
        if self.kind == "metadata":
            return dict((str(k), str(v)) for k, v in value.items())
        if self.kind == "choice":
            return str(value).lower()
        return value

    def from_api(self, value):
        """The canonical value of what the server reports (absent, None, means the default)."""
        if self.normalise is not None:
            return self.normalise(value)
        if value is None:
            return self.zero()
        if self.kind == "time":
            return canonical_time(value) if value else ""
        if self.kind == "percent":
            return _percent(value) if value != "" else 0
        if self.kind == "metadata":
            return dict((k, v) for k, v in value.items() if not k.startswith(SERVER_METADATA_PREFIX))
        return copy.deepcopy(value)

    def to_api(self, value):
        if self.kind == "percent":
            return "%d%%" % value
        return copy.deepcopy(value)

    def in_use(self, value):
        """Whether ``value`` sets something an older server does not know."""
        if self.used is not None:
            return bool(self.used(value))
        return value not in _UNUSED and value != self.zero()

    def display(self, value):
        """A canonical value as a user would write it (durations as text), for diffs."""
        if self.kind == "duration":
            return format_duration(value) if value else value
        if self.kind == "durations":
            return [format_duration(v) for v in value or []]
        if self.kind == "percent":
            return "%d%%" % value if value else value
        return value


def by_name(fields):
    return dict((f.name, f) for f in fields)


def _positive(nanos):
    if nanos <= 0:
        raise ValueError("a duration of 0 is not allowed here (leave the option unset for the server default)")
    return nanos


def _percent(value):
    text = str(value).strip().rstrip("%").strip()
    if not text.isdigit() or int(text) > 100:
        raise ValueError("%r is not a percentage from 0 to 100" % (value,))
    return int(text)
