"""The controller's CPU per host for the nats_server role's checks, at two inventory sizes.

The role's preflight (tasks_from: preflight: the config model built from the inventory, the checks
of install method, service manager and listeners) runs on the controller only, so a play over N
inventory hosts with ``connection: local`` and the facts given as host variables measures what
the controller spends per host, without N containers beside it. A hub and N edge sites, each its
own JetStream domain with a leaf remote to the hub, as bench_fleet.py's lab has them.

Runs, alternating, at each size: this checkout's collection, and with --before (a git ref) the
collection as that commit had it; with --reference, also a play of Ansible's own tasks (40 rounds of a
``set_fact`` and a skipped ``debug``) over the same hosts: how much Ansible's own cost per host grows.
Prints every run's wall time and CPU (ansible-playbook and its workers), the medians, the CPU per
host, and the ratio of the CPU per host at the largest size to the smallest: 1.0 is flat.

Usage: .venv/bin/python bench/bench_host_scale.py [--hosts 10 100] [--rounds 3] [--before REF] [--reference] [--forks 50]
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLAY = """---
- name: The nats_server role's checks on every host
  hosts: all
  gather_facts: false
  tasks:
    - name: Checks
      ansible.builtin.include_role:
        name: nats_edge.fleet.nats_server
        tasks_from: preflight
"""
REFERENCE = "---\n" + yaml.safe_dump([{
    "name": "Ansible's own tasks on every host", "hosts": "all", "gather_facts": False,
    "tasks": [task for number in range(40) for task in (
        {"name": "Set a fact %d" % number, "ansible.builtin.set_fact": {"fact_%d" % number: "{{ inventory_hostname }}"}},
        {"name": "Skip a task %d" % number, "ansible.builtin.debug": {"msg": "never"},
         "when": "fact_%d is not defined" % number})]}], sort_keys=False)
FACTS = dict(ansible_connection="local", ansible_python_interpreter=sys.executable, ansible_memtotal_mb=1024,
             ansible_default_ipv4={"address": "10.0.0.1"}, ansible_service_mgr="systemd",
             ansible_mounts=[{"mount": "/", "size_total": 10 * 1024 ** 3}], ansible_architecture="x86_64")


def inventory(sites):
    return {"all": {"vars": FACTS, "children": {
        "hub": {"hosts": {"hub-1": {"nats_server_jetstream_domain": "hub", "nats_server_leafnodes_port": 7422}}},
        "edges": {"hosts": dict(("edge-%03d" % i, edge(i)) for i in range(sites))}}}}


def edge(number):
    return {"nats_server_jetstream_domain": "edge-%03d" % number, "nats_server_leafnode_remotes": [{"hub_group": "hub"}]}


def collection(tmp, ref):
    """A collections path holding the collection as ``ref`` has it (None: the working tree's files)."""
    path = os.path.join(tmp, ref or "worktree")
    dest = os.path.join(path, "ansible_collections", "nats_edge", "fleet")
    os.makedirs(dest)
    if ref:
        archive = subprocess.run(["git", "archive", ref], cwd=ROOT, capture_output=True, check=True).stdout
    else:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        archive = subprocess.run(["tar", "-c", "--null", "-T", "-"], cwd=ROOT, input=listed, capture_output=True,
                                 check=True).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True)
    return path


def run(inventory_file, play, collections, forks):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections, ANSIBLE_FORKS=str(forks), ANSIBLE_NOCOLOR="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    out = subprocess.run(["ansible-playbook", "-i", inventory_file, play], capture_output=True, text=True, env=env,
                         check=False)
    took = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode:
        sys.exit("bench: the play failed:\n%s" % (out.stdout[-3000:] + out.stderr[-2000:]))
    return took, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[10, 100], help="edge sites (plus one hub host)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", help="a git ref: its collection is run alternately with this checkout's")
    parser.add_argument("--reference", action="store_true", help="also run a play of Ansible's own tasks")
    parser.add_argument("--forks", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        play = os.path.join(tmp, "play.yml")
        with open(play, "w") as handle:
            handle.write(PLAY)
        reference = os.path.join(tmp, "reference.yml")
        with open(reference, "w") as handle:
            handle.write(REFERENCE)
        versions = [("this checkout", collection(tmp, None), play)]
        if args.before:
            versions.append((args.before, collection(tmp, args.before), play))
        if args.reference:
            versions.append(("Ansible's own", versions[0][1], reference))
        results = {}
        for sites in args.hosts:
            inv = os.path.join(tmp, "inventory-%d.yml" % sites)
            with open(inv, "w") as handle:
                yaml.safe_dump(inventory(sites), handle)
            for round_ in range(args.rounds):
                for label, path, playbook in versions:
                    took, cpu = run(inv, playbook, path, args.forks)
                    results.setdefault((label, sites), []).append((took, cpu))
                    print("round %d  %-14s %4d hosts  %6.2f s  %6.2f CPU-s" % (round_ + 1, label, sites + 1, took, cpu),
                          flush=True)
        print("\n| collection | hosts | wall s (median) | CPU-s (median) | CPU-s per host |")
        print("| --- | ---: | ---: | ---: | ---: |")
        per_host = {}
        for (label, sites), runs in results.items():
            wall = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            per_host[(label, sites)] = cpu / (sites + 1)
            print("| %s | %d | %.2f | %.2f | %.3f |" % (label, sites + 1, wall, cpu, cpu / (sites + 1)))
        low, high = min(args.hosts), max(args.hosts)
        for label, _path, _playbook in versions:
            print("%s: CPU per host at %d hosts / at %d hosts = %.2fx" % (
                label, high + 1, low + 1, per_host[(label, high)] / per_host[(label, low)]))


if __name__ == "__main__":
    main()
