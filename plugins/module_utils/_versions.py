# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""nats-server versions: read from text, and inferred from the JetStream API.
Private to the collection; pure, so the role's filters and the modules share it."""

from __future__ import annotations

import re


def parse_version(text):
    """(major, minor, patch) from 'v2.10.22', 'nats-server: v2.9.10', '2.11.0-RC.1' or '2.11';
    None when the text holds no version."""
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", str(text or ""))
    return tuple(int(part or 0) for part in match.groups()) if match else None


def api_level_version(level):
    """The oldest release that reports this JetStream API level; None below 1 (before 2.11)."""
    level = level if isinstance(level, int) else 0
    # from the table of first releases below (LEVEL_RELEASES), pinned to the minor release: measured, 2.12.8
    # answers 3, 2.14.6 answers 4, 2.15.x answer 5
    for floor, version in reversed(LEVEL_RELEASES):
        if level >= floor:
            return version[:2] + (0,)
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


# --------------------------------------------------------------------------
# downgrades: the JetStream API level a stream or consumer needs

# The first release of each JetStream API level, to the patch release (nats-server's JSApiLevel): 2.12.5 raised
# the level to 3 inside the 2.12 series; there is no 2.13 release. A downgrade compares with this table, so it
# must not round a level down to the minor release as the inference above may.
LEVEL_RELEASES = ((1, (2, 11, 0)), (2, (2, 12, 0)), (3, (2, 12, 5)), (4, (2, 14, 0)), (5, (2, 15, 0)))
REQUIRED_LEVEL_KEY = SERVER_METADATA_PREFIX + "req.level"


def version_text(version):
    return ".".join(str(part) for part in version)


def version_level(version):
    """The JetStream API level a release runs: 0 before 2.11 (no levels)."""
    level = 0
    for floor, first in LEVEL_RELEASES:
        if tuple(version) >= first:
            level = floor
    return level


def required_level(config):
    """The API level a stream or consumer config needs (``_nats.req.level``, stamped by 2.11 and newer); 0 when
    it carries none. A stamp that is not a whole number is taken as a level above every known one."""
    value = ((config or {}).get("metadata") or {}).get(REQUIRED_LEVEL_KEY)
    if value in (None, ""):
        return 0
    try:
        return max(int(str(value).strip()), 0)
    except ValueError:
        return LEVEL_RELEASES[-1][0] + 1


def level_release(level, running=None):
    """The oldest release that runs assets of API ``level``: None for 0. A level newer than the table knows is
    taken to need the newest: the version of the server that holds the asset (``running``) when it is newer than
    the table's last release, else a release after that one."""
    if level <= 0:
        return None
    for floor, first in LEVEL_RELEASES:
        if floor >= level:
            return first
    newest = LEVEL_RELEASES[-1][1]
    if running and tuple(running) > newest:
        return tuple(running)
    return (newest[0], newest[1] + 1, 0)


def downgrade_refusals(assets, target, running=None):
    """The assets a server at ``target`` (a version tuple) cannot run, each
    ``dict(account, stream, consumer, level, needs)`` (``needs`` the oldest release as text), in the order given.
    ``assets``: dicts with ``account``, ``stream``, ``consumer`` (None for a stream) and ``config``; ``running``:
    the version of the server that holds them."""
    refused = []
    for asset in assets or ():
        level = required_level(asset.get("config"))
        needs = level_release(level, running)
        if needs and tuple(target) < needs:
            refused.append(dict(account=asset.get("account"), stream=asset.get("stream"),
                                consumer=asset.get("consumer"), level=level, needs=version_text(needs)))
    return refused


def refusal_message(refused, target):
    """One sentence naming every refused asset, its level and the release it needs, and the target."""
    parts = []
    for item in refused:
        what = "account %s stream %s" % (item["account"], item["stream"])
        if item.get("consumer"):
            what += " consumer %s" % item["consumer"]
        parts.append("%s needs JetStream API level %d (nats-server %s or newer)" % (what, item["level"], item["needs"]))
    return "nats-server %s runs JetStream API level %d and would put offline: %s" % (
        version_text(target), version_level(target), "; ".join(parts))


def jsz_assets(jsz):
    """The streams and consumers of a server's ``/jsz?accounts=true&streams=true&consumers=true&config=true``
    answer, as ``downgrade_refusals`` takes them (the account's name, as the server names it)."""
    assets = []
    for account in (jsz or {}).get("account_details") or ():
        name = account.get("name") or account.get("id")
        for stream in account.get("stream_detail") or ():
            assets.append(dict(account=name, stream=stream.get("name"), consumer=None, config=stream.get("config")))
            for consumer in stream.get("consumer_detail") or ():
                assets.append(dict(account=name, stream=stream.get("name"), consumer=consumer.get("name"),
                                   config=consumer.get("config")))
    return assets
