# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one base of the collection's errors. Private to the collection.

Every error the collection's code raises for its user derives from ``NatsEdgeError``: its message names the
resource and the option at fault, and ``result`` holds what the module reports beside the message (what was
done before the failure, ``changed``, the diff). Code below a module raises, chaining the error it came from
(``raise StreamError(...) from exc``); only a module's ``main()`` turns the error into ``fail_json``, with
``fail_from``.
"""

from __future__ import annotations


class NatsEdgeError(Exception):
    """An error worded for the user, with the result keys the module reports beside the message."""

    def __init__(self, msg="", **result):
        super(NatsEdgeError, self).__init__(msg)
        self.msg = str(msg)
        self.result = result

    def __str__(self):
        return self.msg


def fail_from(module, exc, **result):
    """Fail ``module`` with ``exc``'s message; its result keys, then ``result``'s, reported beside it."""
    merged = dict(getattr(exc, "result", None) or {})
    merged.update(result)
    merged.setdefault("changed", False)
    module.fail_json(msg=str(exc), **merged)
