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

With --load K, every run is made a second time while K busy processes share the machine's cores (as a lab's
hosts share them with the controller in bench_fleet.py): the same work, what it costs the controller under that
load, in ratio to the quiet run of the same round.

Usage: .venv/bin/python bench/bench_host_scale.py [--hosts 10 100] [--rounds 3] [--before REF] [--reference] [--forks 50]
       [--load K [--load-memory MB]]
"""

import argparse
import os
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
             ansible_mounts=[{"mount": "/", "size_total": 10 * 1024 ** 3}], ansible_architecture="x86_64",
             # TLS on every listener, as site.yml sets it up (the files are only named: the checks run no host task)
             nats_server_tls_cert_file="/etc/nats-server/tls/server.pem",
             nats_server_tls_key_file="/etc/nats-server/tls/server-key.pem",
             nats_server_tls_ca_file="/etc/nats-server/tls/ca.pem",
             # no operator JWT to read: anonymous clients, the one check this leaves out
             nats_server_allow_anonymous=True)


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
    """Wall time and CPU of one ansible-playbook run: its own and its workers' (wait4 on it alone, so busy
    processes running beside it are not counted)."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections, ANSIBLE_FORKS=str(forks), ANSIBLE_NOCOLOR="1")
    with tempfile.TemporaryFile("w+") as output:
        started = time.monotonic()
        proc = subprocess.Popen(["ansible-playbook", "-i", inventory_file, play], stdout=output,
                                stderr=subprocess.STDOUT, env=env)
        _pid, status, usage = os.wait4(proc.pid, 0)
        took = time.monotonic() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            output.seek(0)
            sys.exit("bench: the play failed:\n%s" % output.read()[-5000:])
    return took, usage.ru_utime + usage.ru_stime


class Load:
    """``count`` busy processes while the block runs: each a bare loop, or with ``memory`` (MB) a loop that writes
    across that much memory (a cache line at a time), as servers with data do."""

    def __init__(self, count, memory=0):
        self.count, self.memory, self.procs = count, memory, []

    def __enter__(self):
        loop = "while True: pass" if not self.memory else (
            "b = bytearray(%d << 20)\nwhile True:\n    for i in range(0, len(b), 64):\n        b[i] = 1" % self.memory)
        self.procs = [subprocess.Popen([sys.executable, "-c", loop]) for _number in range(self.count)]
        return self

    def __exit__(self, *exc):
        for proc in self.procs:
            proc.kill()
        for proc in self.procs:
            proc.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[10, 100], help="edge sites (plus one hub host)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", help="a git ref: its collection is run alternately with this checkout's")
    parser.add_argument("--reference", action="store_true", help="also run a play of Ansible's own tasks")
    parser.add_argument("--forks", type=int, default=50)
    parser.add_argument("--load", type=int, default=0, help="also run each play beside this many busy processes")
    parser.add_argument("--load-memory", type=int, default=0, metavar="MB",
                        help="each busy process writes across this much memory (default: a bare loop)")
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
                    for load in [0] + ([args.load] if args.load else []):
                        with Load(load, args.load_memory):
                            took, cpu = run(inv, playbook, path, args.forks)
                        results.setdefault((label, sites, load), []).append((took, cpu))
                        print("round %d  %-14s %4d hosts  load %3d  %6.2f s  %6.2f CPU-s" % (
                            round_ + 1, label, sites + 1, load, took, cpu), flush=True)
        print("\n| collection | hosts | busy processes | wall s (median) | CPU-s (median) | CPU-s per host |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        per_host = {}
        for (label, sites, load), runs in results.items():
            wall = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            per_host[(label, sites, load)] = cpu / (sites + 1)
            print("| %s | %d | %d | %.2f | %.2f | %.3f |" % (label, sites + 1, load, wall, cpu, cpu / (sites + 1)))
        low, high = min(args.hosts), max(args.hosts)
        for label, _path, _playbook in versions:
            print("%s: CPU per host at %d hosts / at %d hosts = %.2fx" % (
                label, high + 1, low + 1, per_host[(label, high, 0)] / per_host[(label, low, 0)]))
            if args.load:
                for sites in args.hosts:
                    # the same play on the same hosts, each loaded run against the quiet run of its own round
                    pairs = zip(results[(label, sites, 0)], results[(label, sites, args.load)])
                    ratios = [loaded[1] / quiet[1] for quiet, loaded in pairs]
                    print("%s, %d hosts: CPU beside %d busy processes / quiet = %.2fx (median of %d rounds)" % (
                        label, sites + 1, args.load, statistics.median(ratios), len(ratios)))


if __name__ == "__main__":
    main()
