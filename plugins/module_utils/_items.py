# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one validator of list items. Private to the collection.

The bulk forms of the nsc modules (``accounts=[...]``), jetstream_domain's lists and the fleet's
preflight of the inventory all check an item the same way, with the spec of the module that
converges one: a mapping, no unknown option (named, with what the item takes), the spec's types,
choices and constraints, then the kind's own check (a stream's plan, a fetch's mode). The first
problem raises ``ItemError`` naming the item (``streams[2] (orders)``) and the option.

Lists are checked as wholes the same way: ``check_list`` runs a check of a whole list (names unique in an
account, subjects that do not overlap) and names the item at which the list fails; ``refuse_twins`` refuses
two items that stand for one thing, naming both.
"""

from __future__ import annotations

import copy

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError


class ItemError(NatsEdgeError):
    """A list item that does not fit its kind's options, worded with the item's place."""


def unknown_options(params, spec):
    """The keys of ``params`` that are neither an option of ``spec`` nor an alias of one, sorted."""
    return sorted(set(params) - set(spec) - {alias for option in spec.values() for alias in option.get("aliases", [])})


def refuse_unknown(place, params, spec, takes="an item", accepted=()):
    """ItemError naming ``place`` and the keys of ``params`` that are neither options of ``spec`` (nor aliases)
    nor ``accepted``, with what ``takes`` them; nothing when there are none."""
    unknown = sorted(set(unknown_options(params, spec)) - set(accepted))
    if unknown:
        raise ItemError("%s: unknown option%s %s; %s takes %s" % (
            place, "s" if len(unknown) > 1 else "", ", ".join(unknown), takes,
            ", ".join(sorted(spec) + sorted(accepted))))


def where(key, index, name=None):
    """An item's place for messages: ``streams[2] (orders)``."""
    return "%s[%d]%s" % (key, index, " (%s)" % name if name else "")


def is_copy(config):
    """Whether a stream (its options or its API config) copies from other streams: a mirror or sources."""
    return bool((config or {}).get("mirror") or (config or {}).get("sources"))


class ItemChecker(object):
    """Checks items of one kind against ``spec`` (one validator serves every item: it copies the spec once).

    ``accepted``: keys an item may carry beyond the spec (taken off before the spec sees it, such as the
    fleet's ``hosts``); ``takes``: who takes the options, for the unknown-option message (``nsc_account``,
    default "an item"); ``then``: the kind's own check, ``then(validated)`` returning the item to use or
    raising a NatsEdgeError whose message the item's place prefixes; ``constraints``: the spec's
    (``mutually_exclusive=...``)."""

    def __init__(self, spec, accepted=(), takes="an item", then=None, **constraints):
        self.spec = spec
        self.accepted = frozenset(accepted)
        self.takes = takes
        self.then = then
        self.validator = ArgumentSpecValidator(spec, **constraints)
        self.no_log_values = set()

    def check(self, place, item):
        """The validated options of ``item`` (with the spec's defaults), or ItemError naming ``place``."""
        if not isinstance(item, dict):
            raise ItemError("%s: expected a mapping, got %r" % (place, item))
        params = {key: copy.deepcopy(value) for key, value in item.items() if key not in self.accepted}
        refuse_unknown(place, params, self.spec, self.takes, self.accepted)
        result = self.validator.validate(params)
        self.no_log_values.update(result._no_log_values)
        if result.error_messages:
            raise ItemError("%s: %s" % (place, "; ".join(result.error_messages)))
        validated = result.validated_parameters
        if self.then is not None:
            try:
                validated = self.then(validated)
            except NatsEdgeError as exc:
                raise ItemError("%s: %s" % (place, exc)) from exc
        return validated


def check_list(places, items, check):
    """``check(items)``, a check of a whole list that looks at its items in order (each alone, and each against
    those before it: a name declared twice, subjects that overlap), with its error named with the place of the
    item at which the list fails: the last item of the shortest failing start of the list. ``places``: the items'
    places, in the same order. Raises ItemError chained to the check's NatsEdgeError."""
    try:
        return check(items)
    except NatsEdgeError as exc:
        failed, low, high = exc, 0, len(items)
    if high == 0:
        raise failed
    # check(items[:low]) passes (nothing fails an empty list), check(items[:high]) fails with ``failed``
    while high - low > 1:
        middle = (low + high) // 2
        try:
            check(items[:middle])
            low = middle
        except NatsEdgeError as exc:
            failed, high = exc, middle
    raise ItemError("%s: %s" % (places[high - 1], failed)) from failed


def refuse_twins(places, items, identity, what):
    """Refuse two items that stand for one thing, naming both: ``identity(item)`` lists the things an item stands
    for (hashable), ``what(thing)`` words one (``consumer 'c' on stream 'S'``, ``dest /opt/a``). Declared twice, a
    thing is changed back and forth by its two items on every run, so the list never converges."""
    seen = {}
    for place, item in zip(places, items):
        for thing in identity(item):
            if thing in seen:
                raise ItemError("%s: %s is declared twice, also at %s; declare it once (two declarations would change "
                                "it back and forth on every run)" % (place, what(thing), seen[thing]))
        for thing in identity(item):
            seen.setdefault(thing, place)
