"""Converge and roll out N single-node edge sites, and how the time per site grows with N.

For each N (default 10, 30, 100) a fresh lab (lab/fleetlab, one podman container per host):
a release mirror, one hub node (domain hub, accepting leaf connections) and N edge sites, each
a single node with its own JetStream domain, joined to the hub as a leaf. The fleet is in operator
mode as the fleet play makes it: operator BENCH, the system account and one account EDGE whose
user `leaf` each site's leaf link authenticates as (the system account is bound too, so the push
stage reaches every server through the hub). Then it times:

- `ping`: `ansible -m ping` on every host (the reference: Ansible's own cost of reaching them);
- `converge`: `nats_edge.fleet.site` (accounts, servers at nats-server 2.12.8 from the release
  mirror, push; `--play servers` times `nats_edge.fleet.servers` alone, without operator mode);
- `no-op`: the same again, nothing to change;
- `rollout`: `nats_edge.fleet.rollout` to 2.15.1 (hub first, then the edges in waves).

and prints each with its time per site, its ratio to `ping`, the load average while it ran (the
machine is shared: the ratios are what compare) and the CPU it cost per site: the controller's
(`ansible-playbook` and its workers) and the whole machine's (controller, the lab's hosts, podman,
from /proc/stat), with the share of the machine's cores that was busy. On a machine this size a
step's time is its CPU over the cores, so the time per site stays flat while the CPU per site does. Options set forks and fact caching (`--forks`,
`--fact-cache`) so the tuning is measured, not guessed. Needs root (podman).

`--idle M` tells the lab's cost from the controller's: M more edge sites (`idle001`...) are converged
first with the hub, untimed, and keep running (their servers leaf-linked to the hub) while the N
sites are converged beside them, from an inventory without them. Every run converges the hub first
(`warm-up`, untimed), so runs with and without idle sites differ in those sites alone.

`--tasks DIR` keeps each step's time per task (ansible.posix's profile_tasks) in DIR/<N>-<step>.log and, at
the end, lists the tasks of the converge whose time per site grew most from the smallest N to the largest:
where the time per site goes as the fleet grows.

    .venv/bin/python bench/bench_fleet.py --sites 10 30 100 --forks 110
    .venv/bin/python bench/bench_fleet.py --sites 10 --idle 0 90 --skip-noop --skip-rollout
    .venv/bin/python bench/bench_fleet.py --sites 10 100 --skip-noop --skip-rollout --tasks /tmp/fleet-tasks
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAB = os.path.join(ROOT, "lab", "fleetlab")
BIN = os.path.dirname(sys.executable)
VERSIONS = ("2.12.8", "2.15.1")

GROUP_VARS = {
    "all": {
        "nats_fleet_operator": "BENCH",
        "nats_accounts": [{"name": "EDGE", "jetstream": {}, "users": [{"name": "leaf"}]}],
        "nats_fleet_default_account": "EDGE",
        # one push through the hub, every server confirming (the system account is bound on the leaf links)
        "nats_fleet_push_via": "hub",
    },
    "nats_servers": {
        "nats_server_install_method": "archive",
        "nats_server_version": VERSIONS[0],
        "nats_server_archive_base_url": "http://mirror:8080",
        "nats_server_limit_nofile": 16384,
        "nats_server_advertise_host": "{{ inventory_hostname }}",
        "nats_server_jetstream_max_memory_store": "16MiB",
        "nats_server_jetstream_max_file_store": "256MiB",
        "nats_server_lame_duck_duration": "30s",
        "nats_server_lame_duck_grace_period": "1s",
        # the controller reaches the lab's hosts at their addresses on the lab network
        "nats_client_url": "nats://{{ lab_address }}:4222",
    },
    # The hub's heap grows with its leaf links (two per site): at 64 MiB and 30 sites its Go runtime spent
    # its time collecting (3-6 s read loops), the links went stale and flapped, and no push got through.
    "hub": {"nats_server_jetstream_domain": "hub", "nats_server_leafnodes_port": 7422, "nats_server_memory_limit": "1GiB"},
    # the small-device profile is the edges'
    "spokes": {"nats_server_jetstream_domain": "{{ inventory_hostname }}", "nats_server_memory_limit": "64MiB",
               "nats_server_leafnode_remotes": [{"hub_group": "hub", "system_account": True},
                                                {"hub_group": "hub", "account": "EDGE", "user": "leaf"}],
               "nats_rollout_edge_batches": [1, "25%"], "nats_rollout_max_fail_percentage": 10},
}
# --play servers: the servers stage alone, the nats_server role without operator mode
SERVERS_ONLY = {"all": {"nats_fleet_operator_mode": False},
                "spokes": {"nats_server_leafnode_remotes": [{"hub_group": "hub"}]}}


class LoadAverage:
    """The 1-minute load average sampled while a step runs: (mean, max)."""

    def __init__(self, every=5.0):
        self.every, self.samples, self._stop = every, [], threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self):
        while True:
            self.samples.append(os.getloadavg()[0])
            if self._stop.wait(self.every):
                return

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def summary(self):
        return (sum(self.samples) / len(self.samples), max(self.samples)) if self.samples else (0.0, 0.0)


CORES = os.cpu_count() or 1


def busy_cpu_seconds():
    """CPU seconds the whole machine has spent busy since boot (every field of /proc/stat's cpu line but
    idle and iowait)."""
    with open("/proc/stat", encoding="ascii") as handle:
        fields = [int(field) for field in handle.readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def controller_cpu_seconds():
    """CPU seconds of the finished children of this process (ansible-playbook and its workers)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(argv, env=None, check=True):
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    elapsed = time.monotonic() - started
    if check and proc.returncode != 0:
        # the whole output is kept; what failed is printed (a recap of a hundred hosts hides it)
        with tempfile.NamedTemporaryFile("w", prefix="bench-fleet-failed-", suffix=".log", delete=False) as log:
            log.write(proc.stdout + "\n" + proc.stderr)
        lines = proc.stdout.splitlines()
        bad = ("fatal:", "failed:")
        failed = [line for i, line in enumerate(lines) if line.startswith(bad) or (
            line.startswith("TASK [") and any(later.startswith(bad) for later in lines[i + 1:i + 4]))]
        sys.exit("bench_fleet: %s failed (%d); whole output in %s:\n%s\n%s" % (
            " ".join(argv[:4]), proc.returncode, log.name, "\n".join(line[:600] for line in failed[:40]),
            proc.stderr[-2000:]))
    return elapsed, proc


def mirror(lab, work):
    """The release mirror: archives laid out as upstream publishes them, served by a lab host."""
    dest = os.path.join(work, "mirror")
    run([sys.executable, os.path.join(ROOT, "lab", "release-mirror"), dest, *VERSIONS,
         "--cache", os.path.join(ROOT, ".cache", "wheels")])
    container = "%s-mirror" % lab
    run(["podman", "cp", dest + "/.", container + ":/srv/mirror"])
    run(["podman", "exec", container, "systemd-run", "--unit=release-mirror", "python3", "-m", "http.server",
         "8080", "--directory", "/srv/mirror"], check=False)
    for _attempt in range(30):
        if run(["podman", "exec", container, "python3", "-c", "import urllib.request;"
                "urllib.request.urlopen('http://127.0.0.1:8080/v%s/SHA256SUMS')" % VERSIONS[1]],
               check=False)[1].returncode == 0:
            return
        time.sleep(1)
    sys.exit("bench_fleet: the mirror does not answer")


def inventory(lab, work, args):
    _took, proc = run([LAB, "inventory", "--lab", lab, "--format", "json"])
    inv = json.loads(proc.stdout)
    children = inv["all"].setdefault("children", {})
    tuning = {"hub": {"nats_server_memory_limit": args.hub_memory}}
    if args.leaf_compression:
        tuning["hub"]["nats_server_extra_config"] = {"leafnodes": {"compression": args.leaf_compression}}
        tuning["spokes"] = {"nats_server_leafnode_remotes": [
            dict(remote, compression=args.leaf_compression)
            for remote in (SERVERS_ONLY if args.play == "servers" else GROUP_VARS)["spokes"]["nats_server_leafnode_remotes"]]}
    for overrides in (GROUP_VARS, SERVERS_ONLY if args.play == "servers" else {}, tuning):
        for group, variables in overrides.items():
            target = inv["all"] if group == "all" else children.setdefault(group, {})
            target.setdefault("vars", {}).update(variables)
    inv["all"]["vars"]["nats_fleet_dir"] = os.path.join(work, "fleet")
    path = os.path.join(work, "inventory.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(inv, handle)
    # the warm-up's: the hub and the idle sites as the fleet's servers, the measured sites left out
    idle = sorted(children.pop("idle_sites", {}).get("hosts", {}))
    edges = children["spokes"]["hosts"]
    children["nats_servers"]["hosts"] = dict.fromkeys(
        [host for host in children["nats_servers"]["hosts"] if host not in edges] + idle)
    children["spokes"]["hosts"] = dict.fromkeys(idle)
    warm = os.path.join(work, "warm-up.json")
    with open(warm, "w", encoding="utf-8") as handle:
        json.dump(inv, handle)
    return path, warm


def hub_memory(lab):
    """The hub's resident memory in MB as its /varz reports it (None when it does not answer)."""
    _took, proc = run(["podman", "exec", "%s-hub1" % lab, "python3", "-c", "import json, urllib.request; print(json.load("
                       "urllib.request.urlopen('http://127.0.0.1:8222/varz', timeout=10))['mem'])"], check=False)
    try:
        megabytes = round(int(proc.stdout.strip()) / 1e6)
    except ValueError:
        return None
    print("  hub /varz mem %.0f MB" % megabytes, file=sys.stderr, flush=True)
    return megabytes


def environment(args, work):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".collections"), ANSIBLE_FORKS=str(args.forks),
               ANSIBLE_TIMEOUT=str(args.timeout), ANSIBLE_PIPELINING="true", ANSIBLE_NOCOLOR="1", PATH=BIN + os.pathsep + os.environ["PATH"])
    if args.control_persist:
        # Ansible's own ssh_args with a longer-lived master: a host's next task reuses its connection
        env["ANSIBLE_SSH_ARGS"] = "-C -o ControlMaster=auto -o ControlPersist=%s" % args.control_persist
    # bench/callback/bench_runs.py counts each step's module runs, skips and retries and the controller's memory
    env.update(ANSIBLE_CALLBACK_PLUGINS=os.path.join(ROOT, "bench", "callback"), ANSIBLE_CALLBACKS_ENABLED="bench_runs")
    if args.tasks:
        env.update(ANSIBLE_CALLBACKS_ENABLED="bench_runs,ansible.posix.profile_tasks", PROFILE_TASKS_SORT_ORDER="none",
                   PROFILE_TASKS_TASK_OUTPUT_LIMIT="all")
    if args.fact_cache:
        env.update(ANSIBLE_CACHE_PLUGIN="jsonfile", ANSIBLE_CACHE_PLUGIN_CONNECTION=os.path.join(work, "facts"),
                   ANSIBLE_CACHE_PLUGIN_TIMEOUT="3600", ANSIBLE_GATHERING="smart")
    return env


def task_times(text):
    """[(task, seconds)] in the order run, from profile_tasks' recap (a task run twice is listed twice)."""
    recap = text[text.rfind("TASKS RECAP"):] if "TASKS RECAP" in text else ""
    return [(name, float(seconds)) for name, seconds in re.findall(r"^(\S.*?) -+ ([0-9.]+)s$", recap, re.M)]


def grown_tasks(smaller, larger, top=15):
    """The tasks of ``larger`` (sites, [(task, seconds)]) whose time per site grew most against ``smaller``'s:
    [(task, per site smaller, per site larger)], the largest growth in seconds per site first."""
    def per_site(sites, times):
        out, seen = {}, {}
        for name, seconds in times:
            seen[name] = seen.get(name, 0) + 1
            out[(name, seen[name])] = seconds / sites
        return out
    small, large = per_site(*smaller), per_site(*larger)
    rows = [(key[0], small.get(key, 0.0), value) for key, value in large.items()]
    return sorted(rows, key=lambda row: row[1] - row[2])[:top]


def grown(smaller, larger, step, value, top=12):
    """[(task, value per site in ``smaller``, in ``larger``)]: the tasks of one step whose ``value`` (of bench_runs'
    entry for the task) per site grew most, the largest growth first."""
    def per_site(row):
        return dict((name, value(task) / row["sites"]) for name, task in row["runs " + step]["tasks"].items())
    small, large = per_site(smaller), per_site(larger)
    rows = [(name, small.get(name, 0.0), large.get(name, 0.0)) for name in set(small) | set(large)]
    return sorted(rows, key=lambda row: row[1] - row[2])[:top]


def module_runs_of(task):
    """A task's module runs: each host's run and each retry."""
    return task["ran"] + task["retries"]


def controller_cpu_of(task):
    """A task's controller CPU: ansible-playbook's own and its workers' (and their ssh clients')."""
    return task.get("cpu_main", 0.0) + task.get("cpu_workers", 0.0)


def timed(row, name, argv, env, sites=None, tasks_dir=None):
    """Run one step, keeping its time and the load average while it ran (printed at once: a run cut short
    still leaves the steps it finished); per site is per measured site unless ``sites`` says how many the step
    converges. With ``tasks_dir``, the step's output (its time per task) is kept there."""
    machine, controller = busy_cpu_seconds(), controller_cpu_seconds()
    runs_file = os.path.join(tempfile.gettempdir(), "bench-fleet-runs-%d.json" % os.getpid())
    with LoadAverage() as load:
        row[name], proc = run(argv, env=dict(env, BENCH_RUNS_FILE=runs_file))
    row["runs " + name] = module_runs(runs_file)
    if tasks_dir:
        os.makedirs(tasks_dir, exist_ok=True)
        with open(os.path.join(tasks_dir, "%d-%s.log" % (row["sites"], name)), "w", encoding="utf-8") as handle:
            handle.write(proc.stdout)
        row["tasks " + name] = task_times(proc.stdout)
    row["load " + name] = load.summary()
    row["cpu controller " + name] = controller_cpu_seconds() - controller
    row["cpu machine " + name] = busy_cpu_seconds() - machine
    row["busy " + name] = row["cpu machine " + name] / (row[name] * CORES)
    sites = sites or row["sites"]
    runs = row["runs " + name]
    print("  %d sites: %s %.1f s (%.2f s per site), load %.1f/%.1f; CPU per site: controller %.2f s (ansible-playbook's "
          "own %.2f, its workers' %.2f), machine %.2f s; %.0f%% of %d cores busy; per site: %.1f task runs, %.1f retries, "
          "%.1f skips; controller peak RSS %.0f MB" % (
              sites, name, row[name], row[name] / sites, *row["load " + name], row["cpu controller " + name] / sites,
              runs["cpu_main"] / sites, runs["cpu_workers"] / sites,
              row["cpu machine " + name] / sites, 100 * row["busy " + name], CORES, runs["ran"] / sites,
              runs["retries"] / sites, runs["skipped"] / sites, runs["maxrss_mb"]), file=sys.stderr, flush=True)
    if tasks_dir:
        with open(os.path.join(tasks_dir, "%d-%s.runs.json" % (row["sites"], name)), "w", encoding="utf-8") as handle:
            json.dump(runs, handle, indent=1)
    return proc


def module_runs(path):
    """bench_runs' count of one step: totals of task runs, skips, retries and loop items, the controller's peak
    RSS and the per-task counts (zeros when the callback wrote nothing)."""
    try:
        with open(path, encoding="utf-8") as handle:
            found = json.load(handle)
        os.unlink(path)
    except (OSError, ValueError):
        found = {"tasks": {}, "maxrss_mb": 0.0}
    totals = dict((key, sum(task.get(key, 0) for task in found["tasks"].values()))
                  for key in ("ran", "skipped", "retries", "items", "cpu_main", "cpu_workers"))
    return dict(totals, maxrss_mb=found["maxrss_mb"], tasks=found["tasks"])


def measure(sites, args, idle=None):
    lab = "%s-%d" % (args.lab, sites) + ("-idle%d" % idle if idle is not None else "")
    hosts = ["mirror:mirror", "hub1:nats_servers,hub"] + ["edge%03d:nats_servers,spokes" % i for i in range(1, sites + 1)]
    hosts += ["idle%03d:idle_sites" % i for i in range(1, (idle or 0) + 1)]
    run([LAB, "down", "--lab", lab], check=False)
    up, _proc = run([LAB, "up", "--lab", lab, *hosts])
    try:
        with tempfile.TemporaryDirectory(prefix="bench-fleet-") as work:
            mirror(lab, work)
            inv, warm = inventory(lab, work, args)
            env = environment(args, work)
            playbook = [os.path.join(BIN, "ansible-playbook"), "-i", inv]
            play = "nats_edge.fleet." + args.play
            row = {"sites": sites, "up": up, "forks": args.forks, "play": play}
            if idle is not None:
                row["idle"] = idle
                timed(row, "warm-up", [os.path.join(BIN, "ansible-playbook"), "-i", warm, play], env, sites=max(idle, 1))
            timed(row, "ping", [os.path.join(BIN, "ansible"), "-i", inv, "nats_servers", "-m", "ansible.builtin.ping"], env)
            timed(row, "converge", playbook + [play], env, tasks_dir=args.tasks)
            row["hub MB converge"] = hub_memory(lab)
            if not args.skip_noop:
                timed(row, "no-op", playbook + [play], env, tasks_dir=args.tasks)
            if args.skip_rollout:
                return row
            report = os.path.join(work, "rollout.json")
            proc = timed(row, "rollout", playbook + ["nats_edge.fleet.rollout", "-e", json.dumps(
                {"nats_server_version": VERSIONS[1], "nats_rollout_report_file": report})], env, tasks_dir=args.tasks)
            row["hub MB rollout"] = hub_memory(lab)
            with open(report, encoding="utf-8") as handle:
                nodes = json.load(handle)["nodes"]
            row["restarted"] = sum(1 for node in nodes if node["restarted"] and node["after"] == VERSIONS[1])
            row["turn"] = [float(node["seconds"]) for node in nodes]
            if row["restarted"] != sites + 1:
                sys.exit("bench_fleet: the rollout restarted %d of %d servers:\n%s"
                         % (row["restarted"], sites + 1, proc.stdout[-4000:]))
            return row
    finally:
        if not args.keep:
            run([LAB, "down", "--lab", lab], check=False)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sites", type=int, nargs="+", default=[10, 30, 100])
    parser.add_argument("--forks", type=int, default=20)
    parser.add_argument("--timeout", type=int, default=60,
                        help="ssh connect timeout: a loaded lab machine answers 50 connections slowly")
    parser.add_argument("--fact-cache", action="store_true", help="jsonfile fact cache, gathering=smart")
    parser.add_argument("--lab", default="%s-fleet" % (os.environ.get("FLEETLAB_PREFIX") or "bench"),
                        help="lab name prefix (one lab per N, removed after; default FLEETLAB_PREFIX-fleet)")
    parser.add_argument("--skip-noop", action="store_true", help="leave out the second, no-change converge")
    parser.add_argument("--control-persist", help="ssh ControlPersist for the runs (Ansible's default 60s), e.g. 30m")
    parser.add_argument("--skip-rollout", action="store_true", help="leave out the rollout (converge only)")
    parser.add_argument("--keep", action="store_true", help="leave the labs up")
    parser.add_argument("--play", choices=["site", "servers"], default="site",
                        help="site: the fleet play in operator mode; servers: the servers stage alone, no operator mode")
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--idle", type=int, nargs="+",
                        help="for each N, a run per value M with M idle edge sites running beside the N converged")
    parser.add_argument("--leaf-compression", help="leaf link compression at the hub and on every remote (e.g. off, "
                        "s2_fast); nats-server's default s2_auto picks a stronger level as round trips grow")
    parser.add_argument("--tasks", help="keep each step's time per task in this directory, and list the converge's "
                        "tasks whose time per site grew most from the smallest N to the largest")
    parser.add_argument("--hub-memory", default="1GiB",
                        help="the hub's nats_server_memory_limit (its heap grows with two leaf links per site)")
    args = parser.parse_args()
    rows = []
    print("%s, forks %d, fact cache %s, pipelining on, hub memory %s, leaf compression %s, ssh ControlPersist %s" % (
        "nats_edge.fleet." + args.play, args.forks, "jsonfile" if args.fact_cache else "off", args.hub_memory,
        args.leaf_compression or "nats-server's default", args.control_persist or "60s"))
    print("%6s %7s %7s %9s %8s %7s %8s %8s %9s %9s  %s" % (
        "sites", "up s", "ping s", "converge", "per site", "no-op", "rollout", "per site", "conv/ping", "roll/ping",
        "CPU s per site (controller/machine) converge, rollout; load (mean/max) converge, rollout; "
        "node turn s (mean/max); hub MB after converge, rollout"))
    nan = float("nan")
    for sites, idle in [(sites, idle) for sites in args.sites for idle in args.idle or [None]]:
        row = measure(sites, args, idle)
        rows.append(row)
        if idle is not None:
            print("%6s idle sites beside the %d: %d (hub warm-up %.1f s)" % ("", sites, idle, row["warm-up"]))
        rollout = row.get("rollout", nan)
        turn = row.get("turn") or [nan]
        print("%6d %7.1f %7.1f %9.1f %8.2f %7.1f %8.1f %8.2f %9.1f %9.1f  %.2f/%.2f, %.2f/%.2f; %.1f/%.1f, %.1f/%.1f; "
              "%.1f/%.1f; %s, %s" % (
                  sites, row["up"], row["ping"], row["converge"], row["converge"] / sites, row.get("no-op", nan),
                  rollout, rollout / sites, row["converge"] / row["ping"], rollout / row["ping"],
                  row["cpu controller converge"] / sites, row["cpu machine converge"] / sites,
                  row.get("cpu controller rollout", nan) / sites, row.get("cpu machine rollout", nan) / sites,
                  *row["load converge"], *row.get("load rollout", (nan, nan)), sum(turn) / len(turn), max(turn),
                  row["hub MB converge"], row.get("hub MB rollout")), flush=True)
    measured = [row for row in rows if row.get("tasks converge")]
    if args.tasks and len(measured) > 1:
        smaller, larger = min(measured, key=lambda r: r["sites"]), max(measured, key=lambda r: r["sites"])
        print("\nconverge, the tasks whose time per site grew most from %d to %d sites (s per site):"
              % (smaller["sites"], larger["sites"]))
        for name, small, large in grown_tasks((smaller["sites"], smaller["tasks converge"]),
                                              (larger["sites"], larger["tasks converge"])):
            print("  %7.3f -> %7.3f  %s" % (small, large, name[:110]))
    if len(rows) > 1:
        smaller, larger = min(rows, key=lambda r: r["sites"]), max(rows, key=lambda r: r["sites"])
        for step in ("converge", "no-op", "rollout"):
            if "runs " + step in smaller and "runs " + step in larger:
                print("\n%s, the tasks whose module runs per site (runs + retries) grew most from %d to %d sites:"
                      % (step, smaller["sites"], larger["sites"]))
                for name, small, large in grown(smaller, larger, step, module_runs_of):
                    print("  %7.2f -> %7.2f  %s" % (small, large, name[:110]))
                print("\n%s, the tasks whose controller CPU per site grew most from %d to %d sites (CPU-s per site):"
                      % (step, smaller["sites"], larger["sites"]))
                for name, small, large in grown(smaller, larger, step, controller_cpu_of):
                    print("  %7.3f -> %7.3f  %s" % (small, large, name[:110]))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(rows, handle, indent=2)


if __name__ == "__main__":
    main()
