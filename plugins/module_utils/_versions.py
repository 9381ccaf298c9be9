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
