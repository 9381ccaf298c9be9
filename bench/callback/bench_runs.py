# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Counts what a playbook run made each host do, for bench_fleet.py: per task, the hosts it ran on, the hosts
that skipped it and the retries of its ``until`` loops (each one more module run), and the controller's CPU from
its start to the next task's start (``cpu_main``: ansible-playbook's own; ``cpu_workers``: the workers it reaped
meanwhile, with their ssh clients); and the controller's largest resident memory. Written as JSON to
$BENCH_RUNS_FILE when the run ends. Not part of the collection."""

from __future__ import annotations

import json
import os
import resource

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: bench_runs
type: aggregate
short_description: Module runs, skips and retries per task, for bench_fleet.py
description: Module runs, skips and retries per task, written as JSON to BENCH_RUNS_FILE at the end of the run.
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "bench_runs"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.tasks, self.current, self.mark = {}, None, None

    def _entry(self, name):
        return self.tasks.setdefault(name or "?", {"ran": 0, "skipped": 0, "retries": 0, "items": 0,
                                                   "cpu_main": 0.0, "cpu_workers": 0.0})

    def _count(self, result, key):
        # named as v2_playbook_on_task_start names the task (with its role), so the counts and the CPU share an entry
        task = getattr(result, "task", None) or result._task
        self._entry(task.get_name())[key] += 1

    @staticmethod
    def _cpu():
        own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime, reaped.ru_utime + reaped.ru_stime

    def _close(self, name=None):
        """The CPU since the current task started goes to it; ``name`` starts the next one."""
        now = self._cpu()
        if self.current is not None:
            entry = self._entry(self.current)
            entry["cpu_main"] += now[0] - self.mark[0]
            entry["cpu_workers"] += now[1] - self.mark[1]
        self.current, self.mark = name, now

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._close(task.get_name())

    def v2_playbook_on_handler_task_start(self, task):
        self._close(task.get_name())

    def v2_playbook_on_play_start(self, play):
        self._close()

    def v2_runner_on_ok(self, result):
        self._count(result, "ran")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._count(result, "ran")

    def v2_runner_on_skipped(self, result):
        self._count(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._count(result, "ran")

    def v2_runner_item_on_ok(self, result):
        self._count(result, "items")

    def v2_runner_item_on_failed(self, result):
        self._count(result, "items")

    def v2_runner_retry(self, result):
        self._count(result, "retries")

    def v2_playbook_on_stats(self, stats):
        self._close()
        path = os.environ.get("BENCH_RUNS_FILE")
        if path:
            with open(path, "w", encoding="utf-8") as handle:
                json.dump({"tasks": self.tasks, "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024},
                          handle)
