# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: nats_drift
type: aggregate
author:
  - nats_edge.fleet contributors (@nats_edge)
short_description: What a run of the fleet play would change, as Prometheus metrics
description:
  - Counts, per stage of the fleet play and per host, the tasks that report changed, and writes them at the end
    of the run as a Prometheus text file, which the monitoring exporter serves (its C(drift_file)). In a run
    with C(--check) these are the tasks that B(would) change, the fleet's drift from what its inventory
    declares. In a run without C(--check) they are what the run changed.
  - The metrics are C(nats_fleet_drift_changes{stage,site,host}) (tasks that report changed),
    C(nats_fleet_drift_hosts{stage}) (hosts with at least one of them), C(nats_fleet_drift_last_run_timestamp_seconds)
    (when the run ended) and C(nats_fleet_drift_run_success) (V(0) when a host failed or was unreachable, or the run
    stopped before its end; V(1) otherwise). When it is V(0), C(nats_fleet_drift_failures{stage,host}) counts the
    failed tasks (an unreachable host counts as one).
  - Every host that ran a task of a stage has a C(nats_fleet_drift_changes) series, V(0) when nothing of it changes,
    and every stage that ran a task has a C(nats_fleet_drift_hosts) series, so a drift that is fixed shows as V(0)
    rather than as a series that disappears. A stage none of whose tasks ran (left out by C(--tags), or a play
    without hosts) has no series.
  - The B(stage) is the play's tag among the fleet's stages (V(accounts), V(servers), V(push), V(streams),
    V(spark), V(monitoring); a play tagged V(preflight) or V(always) is V(preflight)), as C(site.yml) gives its
    imported stages; a play without one of these tags is named by its name, in lower case, with every run of
    other characters than letters and digits as one C(-).
  - The B(site) is the host's JetStream domain (its C(nats_server_jetstream_domain)); a host outside every domain
    (the controller, C(localhost)) is V(fleet).
  - A task the host delegated to the controller (C(delegate_to) C(localhost), or a host with the local connection)
    counts against the play host it ran for, with site V(fleet). The C(host) label so says B(for whom) the task
    would change something (per-host credentials or certificates kept on the controller) and C(site) says B(where)
    the change would be made, the controller and not the host's site. C(nats_fleet_drift_hosts) counts that host, as
    its state in the fleet drifts. A task with C(run_once) counts once, against the host Ansible ran it for.
  - Beside the metrics, O(file) with C(.json) appended lists, per stage and host, the B(names) of the tasks that
    report changed, and of those that failed, for whoever wants to know what drifted. Nothing else of a task goes
    there or into the metrics (no results, no diffs, no messages), as those can hold secrets.
  - Both files are replaced atomically (written beside, then renamed), the JSON file first, at the end of the run,
    also when a host failed; when the run stops early (an error, an interrupt) they are written as the process
    exits, with C(nats_fleet_drift_run_success) V(0).
  - Enable it for a run with C(ANSIBLE_CALLBACKS_ENABLED=nats_edge.fleet.nats_drift) and give it O(file).
requirements:
  - enable in configuration (C(callbacks_enabled) or C(ANSIBLE_CALLBACKS_ENABLED))
options:
  file:
    description:
      - The Prometheus text file to write. Its directory is created when missing.
      - The task names go to the same path with C(.json) appended.
      - Without it the callback writes nothing (and says so once).
    type: path
    env:
      - name: NATS_FLEET_DRIFT_FILE
    ini:
      - section: callback_nats_drift
        key: file
notes:
  - A task with a loop counts once per host, changed when any of its items is. A handler counts as a task.
  - A failure that C(ignore_errors) ignores, or that a block's C(rescue) handles, is not a failure of the run (what an
    ignored task changed counts); a failure that stops the host counts as a failure, never as a change.
  - Check mode predicts what it can; tasks whose outcome depends on an earlier change may show less than a real run
    would change (see the fleet guide, "Drift detection and scheduled enforcement").
seealso:
  - name: Prometheus text exposition format
    description: The format of O(file).
    link: https://prometheus.io/docs/instrumenting/exposition_formats/
"""

EXAMPLES = r"""
# A scheduled check run of the fleet (the nats_monitoring role installs a timer that does this):
#   ANSIBLE_CALLBACKS_ENABLED=nats_edge.fleet.nats_drift NATS_FLEET_DRIFT_FILE=/var/lib/nats-fleet-drift/drift.prom \
#     ansible-playbook site.yml -i edge-fleet --check
#
# or in ansible.cfg:
#   [defaults]
#   callbacks_enabled = nats_edge.fleet.nats_drift
#   [callback_nats_drift]
#   file = /var/lib/nats-fleet-drift/drift.prom
#
# drift.prom then holds, for instance:
#   nats_fleet_drift_changes{stage="servers",site="spoke-1",host="spoke1-2"} 2
#   nats_fleet_drift_hosts{stage="servers"} 1
#   nats_fleet_drift_last_run_timestamp_seconds 1790000000.123
#   nats_fleet_drift_run_success 1
# and drift.prom.json:
#   {"changes": [{"stage": "servers", "site": "spoke-1", "host": "spoke1-2",
#                 "tasks": ["nats_edge.fleet.nats_server : Write the configuration", ...]}], ...}
"""

import atexit
import json
import os
import re
import tempfile
import time

from ansible import context
from ansible.plugins.callback import CallbackBase

# the stage tags of site.yml, in the order a play's tags are looked at: a play of a stage that also runs always
# belongs to its stage
STAGES = ("accounts", "servers", "push", "streams", "spark", "monitoring")
PREFLIGHT_TAGS = ("preflight", "always")
FLEET_SITE = "fleet"
DOMAIN_VAR = "nats_server_jetstream_domain"
LOCAL_NAMES = frozenset(("localhost", "127.0.0.1", "::1"))
LOCAL_CONNECTIONS = frozenset(("local", "ansible.builtin.local"))


def stage_of(tags, name):
    """The stage of a play: its stage tag, else a slug of its name."""
    tags = [str(tag) for tag in tags or []]
    for stage in STAGES:
        if stage in tags:
            return stage
    if any(tag in PREFLIGHT_TAGS for tag in tags):
        return "preflight"
    slug = re.sub(r"[^a-z0-9]+", "-", str(name or "").lower()).strip("-")
    return slug[:80] or "play"


def escape_label(value):
    """A label value as the text format writes it."""
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render(stages, failures, timestamp, success):
    """The Prometheus text of a run.

    stages: list of (stage, [(site, host, changes), ...]) in the order the stages ran;
    failures: list of (stage, host, count).
    """
    lines = [
        "# HELP nats_fleet_drift_changes Tasks that report changed (in a check run: would change), per stage and host.",
        "# TYPE nats_fleet_drift_changes gauge",
    ]
    for stage, hosts in stages:
        for site, host, changes in hosts:
            lines.append('nats_fleet_drift_changes{stage="%s",site="%s",host="%s"} %d'
                         % (escape_label(stage), escape_label(site), escape_label(host), changes))
    lines += [
        "# HELP nats_fleet_drift_hosts Hosts with at least one task that reports changed, per stage.",
        "# TYPE nats_fleet_drift_hosts gauge",
    ]
    for stage, hosts in stages:
        lines.append('nats_fleet_drift_hosts{stage="%s"} %d'
                     % (escape_label(stage), len(set(host for dummy, host, changes in hosts if changes > 0))))
    lines += [
        "# HELP nats_fleet_drift_last_run_timestamp_seconds When the drift run ended.",
        "# TYPE nats_fleet_drift_last_run_timestamp_seconds gauge",
        "nats_fleet_drift_last_run_timestamp_seconds %.3f" % timestamp,
        "# HELP nats_fleet_drift_run_success 1 when the drift run ended with no host failed or unreachable.",
        "# TYPE nats_fleet_drift_run_success gauge",
        "nats_fleet_drift_run_success %d" % (1 if success else 0),
    ]
    if failures:
        lines += [
            "# HELP nats_fleet_drift_failures Tasks that failed (a host unreachable counts one), per stage and host.",
            "# TYPE nats_fleet_drift_failures gauge",
        ]
        for stage, host, count in failures:
            lines.append('nats_fleet_drift_failures{stage="%s",host="%s"} %d'
                         % (escape_label(stage), escape_label(host), count))
    return "\n".join(lines) + "\n"


def write_atomically(path, text):
    """Write text to path through a file beside it and a rename: a reader sees the old file or the new one."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        # task names and counts only: readable, as the exporter that serves them runs as another user
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def _result_parts(result):
    """(host, task, result dict) of a task result, on every supported ansible-core."""
    host = getattr(result, "host", None) or result._host
    task = getattr(result, "task", None) or result._task
    data = getattr(result, "result", None)
    if not isinstance(data, dict):
        data = result._result
    return host, task, data


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "nats_edge.fleet.nats_drift"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._pid = os.getpid()
        self._file = None
        self._warned = False
        self._written = False
        self._registered = False
        self._play = None
        self._stage = None
        self._variable_manager = None
        self._stage_order = []          # stages in the order their first task ran
        self._seen = {}                 # stage -> {host name: Host}, the hosts that ran a task of it
        self._changed = {}              # (stage, site, host) -> [task names]
        self._failed = {}               # (stage, host) -> [task names]
        self._site_cache = {}

    # --- the run -----------------------------------------------------------------------------

    def _start(self):
        if self._registered:
            return
        self._registered = True
        self._file = self.get_option("file")
        if not self._file:
            self._display.warning("nats_edge.fleet.nats_drift: no file set (NATS_FLEET_DRIFT_FILE or "
                                  "[callback_nats_drift] file), nothing is written")
            return
        atexit.register(self._write_at_exit)

    def v2_playbook_on_start(self, playbook):
        self._start()

    def v2_playbook_on_play_start(self, play):
        self._start()
        self._play = play
        self._stage = stage_of(getattr(play, "tags", None), play.get_name())
        try:
            self._variable_manager = play.get_variable_manager() or self._variable_manager
        except AttributeError:
            pass

    def _host_ran(self, host):
        stage = self._stage or stage_of((), self._play.get_name() if self._play else "")
        hosts = self._seen.get(stage)
        if hosts is None:
            hosts = self._seen[stage] = {}
            self._stage_order.append(stage)
        hosts.setdefault(host.get_name(), host)
        return stage

    def _record_change(self, result):
        host, task, data = _result_parts(result)
        stage = self._host_ran(host)
        if not data.get("changed"):
            return
        site = FLEET_SITE if self._delegated_to_controller(task, data) else self._site(host)
        self._changed.setdefault((stage, site, host.get_name()), []).append(self._task_name(task))

    def _record_failure(self, result):
        host, task, dummy = _result_parts(result)
        stage = self._host_ran(host)
        self._failed.setdefault((stage, host.get_name()), []).append(self._task_name(task))

    def v2_runner_on_ok(self, result):
        self._record_change(result)

    def v2_runner_on_skipped(self, result):
        self._host_ran(_result_parts(result)[0])

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if ignore_errors:
            # an ignored failure is no failure of the run; what it changed, if anything, counts
            self._record_change(result)
        else:
            self._record_failure(result)

    def v2_runner_on_unreachable(self, result):
        task = _result_parts(result)[1]
        if getattr(task, "ignore_unreachable", False):
            self._host_ran(_result_parts(result)[0])
        else:
            self._record_failure(result)

    def v2_playbook_on_stats(self, stats):
        self._write(stats)

    def _write_at_exit(self):
        # the run stopped before its end (no stats): what was seen so far, as a failed run. Only in the process
        # that loaded the callback, never in a forked worker.
        if not self._written and os.getpid() == self._pid:
            try:
                self._write(None)
            except Exception as exc:  # pylint: disable=broad-except
                self._display.warning("nats_edge.fleet.nats_drift: cannot write %s: %s" % (self._file, exc))

    # --- what a task and a host are ----------------------------------------------------------

    @staticmethod
    def _task_name(task):
        """The task's name as the playbook writes it, its role's name before it: never templated, so a name is the
        same for every host, and no variable's value (a secret's) can get into the files through it."""
        written = None
        try:
            source = task.get_ds()
            if isinstance(source, dict) and isinstance(source.get("name"), str):
                written = str(source["name"])
        except Exception:  # pylint: disable=broad-except
            written = None
        # a task made by Ansible itself, or one without a name: its action
        written = " ".join((written or "").split()) or str(getattr(task, "action", "") or "task")
        role = getattr(task, "_role", None)
        if role is not None:
            try:
                return "%s : %s" % (role.get_name(), written)
            except Exception:  # pylint: disable=broad-except
                pass
        return written

    @staticmethod
    def _delegated_to_controller(task, data):
        if not getattr(task, "delegate_to", None):
            return False
        delegated = data.get("_ansible_delegated_vars")
        if not isinstance(delegated, dict):
            return False
        connection = str(delegated.get("ansible_connection") or "")
        address = str(delegated.get("ansible_host") or "")
        return connection in LOCAL_CONNECTIONS or address in LOCAL_NAMES

    def _site(self, host):
        name = host.get_name()
        if name not in self._site_cache:
            domain = self._domain(host)
            self._site_cache[name] = domain or FLEET_SITE
        return self._site_cache[name]

    def _domain(self, host):
        """The host's nats_server_jetstream_domain from the inventory (host and group variables, their files)."""
        variables = None
        manager = self._variable_manager
        if manager is not None:
            try:
                variables = manager.get_vars(host=host, include_hostvars=False)
            except Exception:  # pylint: disable=broad-except
                variables = None
        if variables is None:
            try:
                variables = host.get_vars()
            except Exception:  # pylint: disable=broad-except
                return ""
        value = variables.get(DOMAIN_VAR)
        if value is None:
            return ""
        if isinstance(value, str) and "{{" in value and manager is not None:
            try:
                from ansible.template import Templar
                value = Templar(loader=manager._loader, variables=variables).template(value)
            except Exception:  # pylint: disable=broad-except
                pass
        return str(value).strip()

    # --- the files ---------------------------------------------------------------------------

    def _write(self, stats):
        self._written = True
        if not self._file:
            return
        timestamp = time.time()
        complete = stats is not None
        failing = set(host for (dummy, host) in self._failed)
        if complete:
            counted = set(stats.failures) | set(stats.dark)
            counted = set(host for host in counted
                          if stats.failures.get(host, 0) > 0 or stats.dark.get(host, 0) > 0)
            # a failure a rescue handled is no failure of the run
            failing = failing & counted
            for host in counted - failing:
                failing.add(host)
                self._failed.setdefault((self._stage or "play", host), [])
        failures = [(stage, host, max(len(names), 1)) for (stage, host), names in self._failed.items()
                    if host in failing]
        success = complete and not failing

        stages = []
        for stage in self._stage_order:
            rows = []
            for name, host in sorted(self._seen[stage].items()):
                found = [(site, len(names)) for (entry_stage, site, entry_host), names in self._changed.items()
                         if entry_stage == stage and entry_host == name]
                if not found:
                    found = [(self._site(host), 0)]
                rows.extend((site, name, count) for site, count in sorted(found))
            stages.append((stage, rows))
        text = render(stages, sorted(failures, key=self._failure_key), timestamp, success)

        report = {
            "timestamp": round(timestamp, 3),
            "check_mode": bool(context.CLIARGS.get("check", False)),
            "complete": complete,
            "success": success,
            "changes": [{"stage": stage, "site": site, "host": host, "tasks": list(names)}
                        for (stage, site, host), names in sorted(self._changed.items(), key=self._change_key)],
            "failures": [{"stage": stage, "host": host, "tasks": list(self._failed[(stage, host)])}
                         for stage, host, dummy in sorted(failures, key=self._failure_key)],
        }
        write_atomically(self._file + ".json", json.dumps(report, indent=2, sort_keys=True) + "\n")
        write_atomically(self._file, text)

    def _stage_index(self, stage):
        return self._stage_order.index(stage) if stage in self._stage_order else len(self._stage_order)

    def _change_key(self, item):
        (stage, site, host) = item[0]
        return (self._stage_index(stage), host, site)

    def _failure_key(self, item):
        return (self._stage_index(item[0]), item[1])
