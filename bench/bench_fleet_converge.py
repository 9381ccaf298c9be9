"""Idempotent converge of the whole fleet against the Ansible floor on the same hosts.

Runs, alternating, on a lab that site.yml has already converged (``make demo``):

  floor  one play over nats_servers that gathers facts and runs one ``stat``
         and one ``command`` per host: what any play on these hosts costs
  site   ``ansible-playbook site.yml -i edge-fleet`` in the demo project, which
         must report changed=0 on every host

and prints every run, the medians and the ratio site / floor, with the time
of each stage (by tag) from one extra run per stage.

Usage: .venv/bin/python bench/bench_fleet_converge.py [--project .lab] [--rounds 3] [--stages]
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


def run(argv, cwd):
    started = time.monotonic()
    out = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    took = time.monotonic() - started
    if out.returncode:
        sys.exit("bench: %s failed:\n%s" % (" ".join(argv), out.stdout[-3000:] + out.stderr[-2000:]))
    changed = sum(int(n) for n in re.findall(r"changed=(\d+)", out.stdout.split("PLAY RECAP")[-1]))
    return took, changed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", default=".lab")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stages", action="store_true", help="also time each stage alone")
    args = parser.parse_args()
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as handle:
        handle.write(FLOOR)
    floor, site = [], []
    try:
        for i in range(args.rounds):
            took, _ = run(["ansible-playbook", handle.name, "-i", "edge-fleet"], args.project)
            floor.append(took)
            took, changed = run(["ansible-playbook", "site.yml", "-i", "edge-fleet"], args.project)
            site.append(took)
            print("round %d: floor %.1f s, site.yml %.1f s (changed=%d)" % (i + 1, floor[-1], site[-1], changed))
            if changed:
                sys.exit("bench: site.yml was not idempotent (changed=%d)" % changed)
        stages = {}
        if args.stages:
            for tag in ("accounts", "servers", "push", "streams"):
                stages[tag] = run(["ansible-playbook", "site.yml", "-i", "edge-fleet", "--tags", tag], args.project)[0]
    finally:
        os.unlink(handle.name)
    f, s = statistics.median(floor), statistics.median(site)
    print("\nmedian floor %.1f s, median idempotent site.yml %.1f s: %.1fx the floor" % (f, s, s / f))
    for tag, took in stages.items():
        print("  --tags %-8s %.1f s (%.1fx the floor; includes the preflight)" % (tag, took, took / f))


if __name__ == "__main__":
    main()
