# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one comparison helper of the collection's modules. Private to the collection.

Only what the user set is compared, after both sides went through the same
normalisation; set-like lists compare without order. The result names every
differing field and builds the before/after of diff mode.
"""

from __future__ import annotations

import copy


def differences(desired, actual, set_like=(), path=""):
    """Dotted paths of the fields in ``desired`` whose value differs in ``actual``.

    ``set_like`` holds the dotted paths of lists whose order does not matter.
    A dict in ``desired`` is compared key by key (keys it leaves out are not
    compared); any other value must be equal.
    """
    found = []
    for key, want in desired.items():
        where = "%s.%s" % (path, key) if path else str(key)
        have = actual.get(key) if isinstance(actual, dict) else None
        if isinstance(want, dict) and isinstance(have, dict):
            found.extend(differences(want, have, set_like, where))
        elif where in set_like and isinstance(want, list) and isinstance(have, list):
            if _canonical(want) != _canonical(have):
                found.append(where)
        elif want != have:
            found.append(where)
    return found


def _canonical(items):
    return sorted(repr(_sorted_dict(item)) for item in items)


def _sorted_dict(value):
    if isinstance(value, dict):
        return sorted((k, _sorted_dict(v)) for k, v in value.items())
    if isinstance(value, list):
        return [_sorted_dict(v) for v in value]
    return value


def get_path(data, path):
    node = data
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def set_path(data, path, value):
    keys = path.split(".")
    node = data
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = copy.deepcopy(value)


class Diff(object):
    """before/after for diff mode, limited to the fields that change."""

    def __init__(self, before=None, after=None):
        self.before = before
        self.after = after

    @classmethod
    def of_fields(cls, actual, desired, paths):
        before, after = {}, {}
        for path in paths:
            set_path(before, path, get_path(actual, path))
            set_path(after, path, get_path(desired, path))
        return cls(before, after)

    def as_dict(self):
        return {"before": self.before if self.before is not None else {},
                "after": self.after if self.after is not None else {}}
