# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Plain data out of what a filter receives.

ansible-core hands filters lazy containers that carry the templar and every
variable it can see. Copying one (``copy.deepcopy``, which the planners do
to keep their inputs intact) copies all of that: half a second per host for
a few dozen inventory items. A filter turns its inputs into plain dicts and
lists once, at the boundary; each value is rendered as it is read.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from ansible.vars.hostvars import HostVars


def plain(value):
    """``value`` with every mapping a dict and every list or tuple a list (scalars as they are). Every
    host's variables (``hostvars``), wherever they sit in ``value``, stay as they are: made plain, each
    host would render every host's variables, a cost that grows with the square of the hosts."""
    if isinstance(value, HostVars):
        return value
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


def plain_call(func, args, kwargs):
    """``func(*args, **kwargs)`` with plain arguments."""
    return func(*[plain(arg) for arg in args], **{key: plain(arg) for key, arg in kwargs.items()})


def filter_decorator(error, prefix):
    """A decorator that calls a filter through ``plain_call`` and reports ``error`` as an
    ``AnsibleFilterError`` starting with ``prefix``."""
    from ansible.errors import AnsibleFilterError

    def decorate(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            try:
                return plain_call(func, args, kwargs)
            except error as exc:
                raise AnsibleFilterError("%s: %s" % (prefix, exc))

        return wrapper

    return decorate
