# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Spark wheelhouse's build stamp. Private to the collection.

The build (roles/spark_runtime/files/build_wheelhouse.py, run on the controller) records beside the
wheelhouse what it was built from and the wheels it left; the spark_wheelhouse lookup reads that record
to answer, without a run of the build, when nothing has changed since. Standard library only: the build
runs under the controller's Python of the user's choice.
"""

from __future__ import annotations

import hashlib
import json
import os


def stamp_path(folder):
    """The stamp beside the wheelhouse DIR (DIR.build-stamp.json), which the hosts never get."""
    return os.path.normpath(folder) + ".build-stamp.json"


def inputs(source, pyspark, arch, python, extra):
    """What a build depends on: the options and every file of the package source."""
    digest = hashlib.sha256()
    for top, dirs, files in os.walk(source):
        dirs[:] = sorted(d for d in dirs if d not in ("build", "__pycache__") and not d.endswith(".egg-info"))
        for name in sorted(files):
            path = os.path.join(top, name)
            digest.update(os.path.relpath(path, source).encode() + b"\0")
            with open(path, "rb") as handle:
                digest.update(handle.read() + b"\0")
    return {"source": digest.hexdigest(), "pyspark": pyspark, "arch": arch, "python": python, "extra": list(extra or [])}


def listing(folder):
    """Each wheel's (size, modification time in ns): enough to tell that nothing was touched."""
    found = {}
    for name in os.listdir(folder):
        if name.endswith(".whl"):
            stat = os.stat(os.path.join(folder, name))
            found[name] = [stat.st_size, stat.st_mtime_ns]
    return found


def unchanged(folder, wanted):
    """The stamp's answer when the inputs (``wanted``, as inputs() gives them) and the wheels are as it records
    them, else None."""
    try:
        with open(stamp_path(folder)) as handle:
            stamp = json.load(handle)
        if stamp.get("inputs") != wanted or stamp.get("listing") != listing(folder):
            return None
    except (OSError, ValueError):
        return None
    return stamp["answer"]
