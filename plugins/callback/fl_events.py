"""Ansible callback plugin: record failed and unreachable tasks, when each task starts,
and the output of fl's registered scripts, as JSON lines.

fl sets FL_ANSIBLE_EVENTS to a file; each failure becomes one line with the host,
the task, the command and its error output, so fl can say precisely why a cell or
the testbed failed instead of pointing at a long Ansible log. Task start times, with
the phase a task of a cell names in its own variable fl_phase (flharness/phases.py; null
for other tasks), give fl the time each phase of a cell took (cell.json "phases") and
where a cell ends: fl never reads a task's name for that. What a task registered as
``fl_*_out`` printed (the cell's setup and collection scripts) becomes an "output"
line: fl writes the cell's setup.log and teardown.log from them.
"""
from __future__ import annotations

DOCUMENTATION = """
    name: fl_events
    type: notification
    short_description: write task failures, start times and fl's script output as JSON lines for fl
    description: Writes one JSON object per event to $FL_ANSIBLE_EVENTS.
    requirements: [enabled in callbacks_enabled]
"""

import json
import os
import time

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "fl_events"
    CALLBACK_NEEDS_ENABLED = True

    def _append(self, event: dict) -> None:
        path = os.environ.get("FL_ANSIBLE_EVENTS")
        if path:
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps(event) + "\n")

    def v2_playbook_on_task_start(self, task, is_conditional):
        phase = (task.vars or {}).get("fl_phase")  # the task's own vars, never a parent's (an include's)
        self._append({"event": "task", "task": task.get_name(), "phase": None if phase is None else str(phase),
                      "t": time.time()})

    def v2_playbook_on_stats(self, stats):
        self._append({"event": "end", "t": time.time()})

    def _write(self, kind: str, result) -> None:
        r = result._result
        cmd = r.get("cmd")
        event = {
            "event": kind,
            "host": result._host.get_name(),
            "task": result._task.get_name(),
            "msg": str(r.get("msg", ""))[:2000],
            "rc": r.get("rc"),
            "cmd": " ".join(cmd) if isinstance(cmd, list) else cmd,
            "stderr": str(r.get("stderr", ""))[-2000:],
            "stdout": str(r.get("stdout", ""))[-2000:],
        }
        self._append(event)

    def _output(self, result) -> None:
        name = result._task.register
        if name and name.startswith("fl_") and name.endswith("_out"):
            self._append({"event": "output", "host": result._host.get_name(), "var": name,
                          "stdout": str(result._result.get("stdout", "")),
                          "msg": str(result._result.get("msg", ""))[:2000]})

    def v2_runner_on_ok(self, result):
        self._output(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._output(result)
        if not ignore_errors:
            self._write("failed", result)

    def v2_runner_on_unreachable(self, result):
        self._write("unreachable", result)
