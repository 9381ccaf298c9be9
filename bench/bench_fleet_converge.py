"""Idempotent converge of the whole fleet against the Ansible floor on the same hosts.

Runs, alternating, on a lab that site.yml has already converged (``make demo``):

  floor  one play over nats_servers that gathers facts and runs one ``stat``
         and one ``command`` per host: what any play on these hosts costs
  site   ``ansible-playbook site.yml -i edge-fleet`` in the demo project, which
         must report changed=0 on every host

  before site.yml again with the collection found under --before (a collections
         path holding another version of nats_edge.fleet), when given

and prints every run, the medians and the ratio site / floor, with the time
of each stage (by tag) from one extra run per stage, and the load average
over the run. The lab is the one the inventory names: LAB_NAME and
LAB_PORT_OFFSET from the environment select another than the demo's.

Usage: .venv/bin/python bench/bench_fleet_converge.py [--project .lab] [--rounds 3] [--stages] [--before PATH]
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

FLOOR = """---
- name: The floor
  hosts: nats_servers
  gather_facts: true
  tasks:
    - name: Stat
      ansible.builtin.stat:
        path: /etc/hostname
    - name: Command
      ansible.builtin.command: "true"
      changed_when: false
"""


def run(argv, cwd, collections=None):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections) if collections else None
    started = time.monotonic()
    out = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False, env=env)
    took = time.monotonic() - started
    if out.returncode:
        sys.exit("bench: %s failed:\n%s" % (" ".join(argv), out.stdout[-3000:] + out.stderr[-2000:]))
    changed = sum(int(n) for n in re.findall(r"changed=(\d+)", out.stdout.split("PLAY RECAP")[-1]))
    return took, changed


def site(project, collections=None, tags=None):
    argv = ["ansible-playbook", "site.yml", "-i", "edge-fleet"] + (["--tags", tags] if tags else [])
    took, changed = run(argv, project, collections)
    if changed and not tags:
        sys.exit("bench: site.yml was not idempotent (changed=%d)" % changed)
    return took


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--project", default=".lab")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stages", action="store_true", help="also time each stage alone")
    parser.add_argument("--before", help="a collections path with the version to compare with, run alternately")
    args = parser.parse_args()
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as handle:
        handle.write(FLOOR)
    runs = {"floor": [], "site": [], "before": []}
    loads = [os.getloadavg()[0]]
    stages = {}
    try:
        for i in range(args.rounds):
            runs["floor"].append(run(["ansible-playbook", handle.name, "-i", "edge-fleet"], args.project)[0])
            runs["site"].append(site(args.project))
            if args.before:
                runs["before"].append(site(args.project, args.before))
            loads.append(os.getloadavg()[0])
            print("round %d: %s (load %.1f)" % (i + 1, ", ".join(
                "%s %.1f s" % (name, times[-1]) for name, times in runs.items() if times), loads[-1]), flush=True)
        if args.stages:
            for tag in ("accounts", "servers", "push", "streams", "spark"):
                for name, collections in (("site", None), ("before", args.before)):
                    if name == "site" or collections:
                        stages.setdefault(tag, {})[name] = site(args.project, collections, tag)
                loads.append(os.getloadavg()[0])
    finally:
        os.unlink(handle.name)
    floor = statistics.median(runs["floor"])
    print("\nload average (1 min) %.1f to %.1f during the run" % (min(loads), max(loads)))
    print("median floor %.1f s" % floor)
    for name, label in (("site", "idempotent site.yml"), ("before", "idempotent site.yml, --before")):
        if runs[name]:
            took = statistics.median(runs[name])
            print("median %s %.1f s: %.1fx the floor" % (label, took, took / floor))
    for tag, took in stages.items():
        print("  --tags %-8s %s (includes the preflight)" % (tag, ", ".join(
            "%s %.1f s = %.1fx the floor" % (name, value, value / floor) for name, value in took.items())))


if __name__ == "__main__":
    main()
