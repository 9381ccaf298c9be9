# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private files on the host a module runs on: directories made 0700, digests of files read in blocks.
Private to the collection; the nsc store and both backups use them."""

from __future__ import annotations

import hashlib
import os

DIR_MODE = 0o700


def make_private_dirs(path):
    """Create ``path`` and every missing parent 0700 (os.makedirs gives parents the umask's mode); existing
    directories are left as they are."""
    missing = []
    while path and not os.path.isdir(path):
        missing.append(path)
        path = os.path.dirname(path)
    for directory in reversed(missing):
        try:
            os.mkdir(directory, DIR_MODE)
        except FileExistsError:
            pass


def sha256_file(path):
    """The SHA-256 of a file's content, hex, read 1 MiB at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
