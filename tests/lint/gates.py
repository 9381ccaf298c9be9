# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ecosystem's release gates, run offline from a checkout.

    python tests/lint/gates.py sanity [--defer PATH]... [-- ANSIBLE-TEST ARGS]
    python tests/lint/gates.py importer TARBALL
    python tests/lint/gates.py docs-lint [--defer PATH]...

Run it with the Python of the virtualenv whose tools it should use: ``sanity``
runs that virtualenv's ``ansible-test``. Each gate prints its findings and a
table of counts, and exits non-zero when a finding is not deferred. Findings in
files under a ``--defer`` path are counted and shown, but do not fail the gate.
"""

from __future__ import annotations

import argparse
import collections
import glob
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)

# ansible-test bootstraps the virtualenv of each sanity test with a get-pip
# script it downloads from a host this network does not reach, unless its cache
# holds one; this stand-in installs the same pip offline.
GET_PIP = os.path.join(ROOT, "tests", "sanity", "get_pip.py")


class GateError(Exception):
    """A gate could not run (as opposed to: it ran and found something)."""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def deferred(path, defer):
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in defer)


def report(gate, findings, defer, elapsed, tests=()):
    """Print findings and a count table; return the number of blocking findings.

    ``findings`` is a list of (test, path, text); ``tests`` lists tests that ran,
    so that clean ones show up with zero.
    """
    blocking = [f for f in findings if not deferred(f[1], defer)]
    for test, path, text in findings:
        mark = "deferred" if deferred(path, defer) else "FAIL"
        print("%s %s: %s" % (mark, test, text))
    counts = collections.OrderedDict((t, [0, 0]) for t in tests)
    for test, path, _text in findings:
        counts.setdefault(test, [0, 0])[1 if deferred(path, defer) else 0] += 1
    print("\n%s: %d finding(s), %d blocking, %d deferred (%s), %.0f s"
          % (gate, len(findings), len(blocking), len(findings) - len(blocking),
             " ".join(defer) or "nothing deferred", elapsed))
    width = max([len(t) for t in counts] + [4])
    print("  %-*s  %8s  %8s" % (width, "test", "blocking", "deferred"))
    for test, (block, defer_count) in counts.items():
        print("  %-*s  %8d  %8d" % (width, test, block, defer_count))
    return len(blocking)


# --- ansible-test sanity --------------------------------------------------------


def galaxy_name():
    with open(os.path.join(ROOT, "galaxy.yml"), encoding="utf-8") as handle:
        text = handle.read()
    fields = dict(re.findall(r"^(namespace|name):\s*(\S+)\s*$", text, re.M))
    return fields["namespace"], fields["name"]


def ansible_test_pip_version():
    """The pip version the active ansible-test bootstraps its virtualenvs with."""
    spec = importlib.util.find_spec("ansible_test")
    if spec is None or not spec.submodule_search_locations:
        raise GateError("ansible-test is not installed beside %s" % sys.executable)
    source = os.path.join(spec.submodule_search_locations[0], "_internal", "python_requirements.py")
    with open(source, encoding="utf-8") as handle:
        match = re.search(r"default_packages = dict\(\s*pip='([0-9.]+)'", handle.read())
    if not match:
        raise GateError("cannot find the pip version ansible-test bootstraps in %s" % source)
    return match.group(1)


def install_get_pip():
    version = ansible_test_pip_version()
    path = os.path.expanduser("~/.ansible/test/cache/get_pip_%s.py" % version.replace(".", "_"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    shutil.copyfile(GET_PIP, path)


def export_checkout(dest):
    """Copy the tracked files plus uncommitted changes to dest and commit them there.

    ansible-test needs the collection at ansible_collections/NS/NAME/ and reads
    the file list from git; a checkout can live anywhere and be mid-edit.
    """
    listing = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=ROOT, check=True, capture_output=True).stdout
    for rel in sorted(set(listing.decode().split("\0")) - {""}):
        src = os.path.join(ROOT, rel)
        if not os.path.lexists(src):
            continue  # deleted in the work tree, not yet committed
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.islink(src):
            os.symlink(os.readlink(src), target)
        else:
            shutil.copy2(src, target)
    env = dict(os.environ, GIT_AUTHOR_NAME="sanity", GIT_AUTHOR_EMAIL="sanity@localhost",
               GIT_COMMITTER_NAME="sanity", GIT_COMMITTER_EMAIL="sanity@localhost")
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"],
                ["git", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "export"]):
        subprocess.run(cmd, cwd=dest, env=env, check=True)


def run_sanity(args):
    started = time.monotonic()
    python = args.python or "%d.%d" % sys.version_info[:2]
    install_get_pip()
    namespace, name = galaxy_name()
    work = tempfile.mkdtemp(prefix="sanity-")
    try:
        dest = os.path.join(work, "ansible_collections", namespace, name)
        export_checkout(dest)
        cmd = [os.path.join(BIN, "ansible-test"), "sanity", "--local", "--python", python,
               "--color", "no", "--failure-ok"] + args.ansible_test_args
        env = dict(os.environ, PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
        log("+ " + " ".join(cmd))
        tests, output = [], []
        with subprocess.Popen(cmd, cwd=dest, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) as proc:
            for line in proc.stdout:
                output.append(line)
                match = re.match(r'Running sanity test "([^"]+)"', line)
                if match:
                    tests.append(match.group(1))
                    log(line.rstrip())
        if proc.returncode != 0 or not tests:
            sys.stderr.write("".join(output[-60:]))
            raise GateError("ansible-test sanity did not run (exit %d)" % proc.returncode)
        findings = []
        for result in sorted(glob.glob(os.path.join(dest, "tests", "output", "bot", "ansible-test-sanity-*.json"))):
            test = os.path.basename(result)[len("ansible-test-sanity-"):-len(".json")]
            with open(result, encoding="utf-8") as handle:
                data = json.load(handle)
            for item in data.get("results", []):
                for line in item.get("output", "").splitlines():
                    if line.strip():
                        findings.append((test, line.split(":", 1)[0], line))
        failed = [t for t in tests if any(f[0] == t for f in findings)]
        for line in output:
            # a failed test whose output we could not attribute must not pass silently
            match = re.match(r"ERROR: Found \d+ (\S+) issue", line)
            if match and match.group(1) not in failed:
                raise GateError("ansible-test reported %s issues this gate did not read" % match.group(1))
    finally:
        if args.keep:
            log("export kept in %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    core = subprocess.run([os.path.join(BIN, "python"), "-c", "import ansible; print(ansible.__version__)"],
                          check=True, capture_output=True, text=True).stdout.strip()
    return report("ansible-test sanity (ansible-core %s, Python %s)" % (core, python),
                  findings, args.defer, time.monotonic() - started, tests)


# --- Galaxy's importer ----------------------------------------------------------


def untracked_members(tarball):
    """Files in the tarball that git does not track: a demo's secrets (.lab),
    build output or caches that build_ignore missed. Empty outside a git checkout."""
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    if tracked.returncode != 0:
        return []
    known = set(tracked.stdout.decode().split("\0"))
    with tarfile.open(tarball) as tar:
        return sorted(member.name for member in tar.getmembers()
                      if member.isfile() and member.name not in known | {"MANIFEST.json", "FILES.json"})


def run_importer(args):
    """Galaxy's importer on a built tarball: every ERROR or WARNING it logs blocks,
    and so does a file in it that the checkout does not track."""
    started = time.monotonic()
    tarball = os.path.abspath(args.tarball)
    stray = untracked_members(tarball)
    env = dict(os.environ, GALAXY_IMPORTER_CONFIG=os.path.join(ROOT, "tests", "lint", "galaxy-importer.cfg"),
               PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
    work = tempfile.mkdtemp(prefix="importer-")  # it writes importer_result.json to its cwd
    try:
        proc = subprocess.run([os.path.join(BIN, "python"), "-m", "galaxy_importer.main", tarball],
                              cwd=work, env=env, capture_output=True, text=True, check=False)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    findings = [(m.group(1).lower(), "", m.group(2))
                for m in re.finditer(r"^(ERROR|WARNING|CRITICAL): (.*)$", proc.stdout + proc.stderr, re.M)]
    if proc.returncode != 0 and not findings:
        sys.stderr.write(proc.stdout + proc.stderr)
        findings.append(("error", "", "the importer exited %d" % proc.returncode))
    findings += [("error", name, "%s: not tracked by git; add it to build_ignore in galaxy.yml" % name) for name in stray]
    return report("galaxy-importer on %s" % os.path.basename(tarball), findings, [],
                  time.monotonic() - started, ("error", "warning"))


# --- antsibull-docs lint-collection-docs ----------------------------------------


def run_docs_lint(args):
    started = time.monotonic()
    proc = subprocess.run([os.path.join(BIN, "antsibull-docs"), "lint-collection-docs", "--plugin-docs", "."],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    findings, last = [], None
    for line in proc.stdout.splitlines():
        match = re.match(r"^(\S+):\d+:\d+: (.*)$", line)
        if match:
            last = [os.path.dirname(match.group(1)), match.group(1), line]
            findings.append(last)
        elif last is not None and line.strip():
            last[2] += "\n" + line  # continuation of a multi-line finding
    if proc.returncode not in (0, 3) or (proc.returncode == 3 and not findings):
        sys.stderr.write(proc.stdout + proc.stderr)
        raise GateError("antsibull-docs lint-collection-docs failed (exit %d)" % proc.returncode)
    findings = [tuple(f) for f in findings]
    return report("antsibull-docs lint-collection-docs --plugin-docs", findings, args.defer,
                  time.monotonic() - started, sorted({f[0] for f in findings}))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    sub = parser.add_subparsers(dest="gate", required=True)
    sanity = sub.add_parser("sanity", help="ansible-test sanity, offline, from an exported checkout")
    sanity.add_argument("--python", help="Python version to test (default: this one)")
    sanity.add_argument("--keep", action="store_true", help="keep the exported checkout")
    sanity.add_argument("ansible_test_args", nargs="*", help="more ansible-test sanity arguments (after --)")
    importer = sub.add_parser("importer", help="Galaxy's importer on a built collection tarball")
    importer.add_argument("tarball")
    docs = sub.add_parser("docs-lint", help="antsibull-docs lint-collection-docs --plugin-docs")
    for gate in (sanity, docs):
        gate.add_argument("--defer", action="append", default=[], metavar="PATH",
                          help="count findings under PATH without failing (repeatable)")
    args = parser.parse_args(argv)
    run = {"sanity": run_sanity, "importer": run_importer, "docs-lint": run_docs_lint}[args.gate]
    try:
        return 1 if run(args) else 0
    except (GateError, subprocess.CalledProcessError) as exc:
        log("%s: error: %s" % (args.gate, exc))
        return 2


if __name__ == "__main__":
    sys.exit(main())
