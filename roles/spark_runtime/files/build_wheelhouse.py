"""Build the wheelhouse Spark hosts install from, on the controller.

    build_wheelhouse.py DIR --source SPARK_PACKAGE_DIR --pyspark 4.3.0 --arch x86_64 --python 3.11

DIR gets pure wheels built here (pyspark, the nats-edge-spark package, built
reproducibly so an unchanged source gives the same file) and the binary
wheels of their dependencies for the hosts' architecture and Python, so the
hosts need no package index. Prints JSON: {"changed": bool, "wheels": [...],
"package": the nats-edge-spark wheel, "listing": ["<wheel> <bytes>", ...]}.

A stamp beside DIR (DIR.build-stamp.json, not copied to the hosts) records the inputs of the last build (the package source's
files, the versions, architecture, Python, extras) and each wheel's size and
modification time. When the inputs and the wheels are as recorded, nothing
is built, downloaded or hashed: the answer is the stamp's.
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

PLATFORMS = {
    "x86_64": ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"],
    "aarch64": ["manylinux_2_28_aarch64", "manylinux_2_17_aarch64", "manylinux2014_aarch64"],
}


def digest(folder):
    state = {}
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.endswith(".whl"):
            with open(os.path.join(folder, name), "rb") as handle:
                state[name] = hashlib.sha256(handle.read()).hexdigest()
    return state


# the stamp's logic is the collection's own (the spark_wheelhouse lookup reads the stamp too)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "plugins", "plugin_utils"))
import _wheelhouse  # noqa: E402  pylint: disable=wrong-import-position
from _wheelhouse import listing, stamp_path  # noqa: E402,F401  pylint: disable=wrong-import-position


def inputs(args):
    """What a build depends on: the options and every file of the package source."""
    return _wheelhouse.inputs(args.source, args.pyspark, args.arch, args.python, args.extra)


def unchanged(args):
    """The stamp's answer when the inputs and the wheels are as it records them, else None."""
    return _wheelhouse.unchanged(args.dir, inputs(args))


def answer(folder, changed, package):
    found = listing(folder)
    return {"changed": changed, "wheels": sorted(found), "package": package,
            "listing": sorted("%s %d" % (name, size) for name, (size, _mtime) in found.items())}


def pip(*args):
    env = dict(os.environ, SOURCE_DATE_EPOCH="315532800", PIP_DISABLE_PIP_VERSION_CHECK="1")
    proc = subprocess.run([sys.executable, "-m", "pip"] + list(args), env=env, capture_output=True, text=True, check=False)
    if proc.returncode:
        sys.exit("pip %s failed:\n%s%s" % (args[0], proc.stdout[-3000:], proc.stderr[-3000:]))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--source", required=True)
    parser.add_argument("--pyspark", required=True)
    parser.add_argument("--arch", required=True)
    parser.add_argument("--python", required=True)
    parser.add_argument("--extra", nargs="*", default=[])
    args = parser.parse_args()
    if args.arch not in PLATFORMS:
        sys.exit("no wheels for architecture %s (supported: %s)" % (args.arch, ", ".join(PLATFORMS)))
    os.makedirs(args.dir, exist_ok=True)
    known = unchanged(args)
    if known is not None:
        print(json.dumps(dict(known, changed=False)))
        return
    before = digest(args.dir)
    work = tempfile.mkdtemp(prefix="spark-wheelhouse-")
    try:
        # the package is built from a copy: the collection's own tree stays untouched
        source = os.path.join(work, "src")
        shutil.copytree(args.source, source, ignore=shutil.ignore_patterns("*.egg-info", "build", "__pycache__"))
        built = os.path.join(work, "built")
        pip("wheel", "-q", "--no-deps", "-w", built, source)
        # pure-Python dependencies published as source only: built here once
        for prefix, requirement in (("pyspark-%s-" % args.pyspark, "pyspark==%s" % args.pyspark), ("nkeys-", "nkeys")):
            if not any(n.startswith(prefix) for n in os.listdir(args.dir)):
                pip("wheel", "-q", "--no-deps", "-w", built, requirement)
        for name in os.listdir(built):
            target = os.path.join(args.dir, name)
            with open(os.path.join(built, name), "rb") as new:
                data = new.read()
            if not os.path.exists(target) or open(target, "rb").read() != data:
                # an older build of the same version goes away with it
                with open(target + ".tmp", "wb") as handle:
                    handle.write(data)
                os.replace(target + ".tmp", target)
        package = [n for n in os.listdir(built) if n.startswith("nats_edge_spark-")][0]
        platform_args = []
        for tag in PLATFORMS[args.arch]:
            platform_args += ["--platform", tag]
        pip("download", "-q", "--only-binary=:all:", "--python-version", args.python, "--implementation", "cp",
            "--find-links", args.dir, "-d", args.dir, *platform_args, os.path.join(args.dir, package), *args.extra)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = answer(args.dir, digest(args.dir) != before, package)
    with open(stamp_path(args.dir) + ".tmp", "w") as handle:
        json.dump({"inputs": inputs(args), "listing": listing(args.dir), "answer": result}, handle)
    os.replace(stamp_path(args.dir) + ".tmp", stamp_path(args.dir))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
