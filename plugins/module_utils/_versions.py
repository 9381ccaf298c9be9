# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""nats-server versions: read from text, and inferred from the JetStream API.
Private to the collection; pure, so the role's filters and the modules share it."""

from __future__ import annotations

import re

# JetStream API level ($JS.API.INFO, 2.11 and newer) -> the first release with it.
# Measured: 2.12.8 answers 3, 2.14.6 answers 4, 2.15.x answer 5.
_API_LEVELS = ((5, (2, 15, 0)), (4, (2, 14, 0)), (2, (2, 12, 0)), (1, (2, 11, 0)))


def parse_version(text):
    """(major, minor, patch) from 'v2.10.22', 'nats-server: v2.9.10', '2.11.0-RC.1' or '2.11';
    None when the text holds no version."""
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", str(text or ""))
    return tuple(int(part or 0) for part in match.groups()) if match else None


def api_level_version(level):
    """The oldest release that reports this JetStream API level; None below 1 (before 2.11)."""
    level = level if isinstance(level, int) else 0
    for floor, version in _API_LEVELS:
        if level >= floor:
            return version
    return None


# --------------------------------------------------------------------------
# what a JetStream server shows of its version

SERVER_METADATA_PREFIX = "_nats."  # metadata keys the server writes itself (2.11 and newer)
STAMP_KEY = SERVER_METADATA_PREFIX + "ver"
V2_9, V2_10 = (2, 9, 0), (2, 10, 0)


def stamped_version(config):
    """The version 2.11 and newer stamp into the metadata of the streams and consumers
    they store (``_nats.ver``); None when the config carries no stamp."""
    return parse_version(((config or {}).get("metadata") or {}).get(STAMP_KEY))


def account_level_version(account):
    """The oldest release that reports the API level of a $JS.API.INFO reply; None before 2.11."""
    return api_level_version(((account or {}).get("api") or {}).get("level"))


def shows_2_10(config, keys=(), kept=False):
    """Whether a stream or consumer config holds what only 2.10 and newer write:
    any of ``keys`` (2.10 writes ``compression`` and ``consumer_limits`` into every
    stream config); with ``kept``, also what only 2.10 and newer keep: several
    filters, metadata of the user's own."""
    config = config or {}
    if any(key in config for key in keys):
        return True
    return bool(kept and (config.get("filter_subjects") or any(
        not key.startswith(SERVER_METADATA_PREFIX) for key in config.get("metadata") or {})))


def infer_version(account=None, configs=(), account_keys=(), config_keys=(), kept=False):
    """(number, exact): the newest (major, minor, patch) the evidence proves a server runs.

    The evidence: the API level of ``account`` (a $JS.API.INFO reply, 2.11 and newer;
    it pins the minor release only), any of ``account_keys`` in it (2.10); the
    ``_nats.ver`` stamp of each of ``configs`` (exact), and what only 2.10 and
    newer write into a config (see ``shows_2_10``). Without evidence: 2.9. An
    exact version wins over an inexact one of the same number.
    """
    found = []
    if account is not None:
        level = account_level_version(account)
        if level:
            found.append((level, False))
        if any(key in account for key in account_keys):
            found.append((V2_10, False))
    for config in configs:
        stamped = stamped_version(config)
        if stamped:
            found.append((stamped, True))
        if shows_2_10(config, config_keys, kept):
            found.append((V2_10, False))
    return max(found) if found else (V2_9, False)
