"""A testbed's Ansible session: one ansible-playbook (playbooks/session.yml) that builds
the testbed and then runs the cells fl hands it, one at a time.

The hand-over is two files in the session folder (see plugins/lookup/fl_cell.py):
Ansible makes ``want`` when the testbed is free, fl answers with ``next.json``. What
each cell's tasks did comes from fl's callback (events.jsonl): when each task started,
and every failure. A cell's tasks are told apart by the phase each carries
(flharness/phases.py), never by their names.
"""
from __future__ import annotations

import json
import logging
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .. import REPO
from ..phases import Phase
from .ansible import PlaybookResult, UnsafeDumper, ansible_env, ansible_playbook, failure_of, kill_group, outputs_of, phases
from .playbook_vars import CellVars

LOG = logging.getLogger(__name__)
PLAYBOOK = REPO / "playbooks" / "session.yml"


@dataclass
class Events:
    """fl's callback output, read as it grows."""

    path: Path
    offset: int = 0
    pending: list[dict[str, Any]] = field(default_factory=list)

    def read(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n") + 1
        self.offset += end
        return [json.loads(line) for line in data[:end].splitlines() if line.strip()]


class Session:
    """ansible-playbook session.yml for one testbed; `poll` says when it wants a cell."""

    def __init__(self, inventory: Path, extra_vars: dict[str, Any], folder: Path, log: Path) -> None:
        self.inventory, self.extra_vars, self.folder, self.log = inventory, extra_vars, folder, log
        self.proc: subprocess.Popen[bytes] | None = None
        self.events = Events(folder / "events.jsonl")
        self.started = 0.0
        self._cell_events: list[dict[str, Any]] = []
        self._handed = 0.0  # when the current cell was handed over

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        for name in ("want", "next.json", "events.jsonl"):
            (self.folder / name).unlink(missing_ok=True)
        vars_file = self.folder / "vars.yml"
        vars_file.write_text(yaml.dump(self.extra_vars, Dumper=UnsafeDumper))
        vars_file.chmod(0o600)
        argv = [ansible_playbook(), "-i", str(self.inventory), str(PLAYBOOK), "-e", f"@{vars_file}"]
        env = ansible_env(self.folder, self.events.path) | {"FL_SESSION_DIR": str(self.folder)}
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("a") as out:
            out.write(f"\n### ansible-playbook session.yml ({self.inventory})\n")
            out.flush()
            self.started = time.time()
            LOG.debug("testbed session: %s", " ".join(map(str, argv)))
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO,
                                         start_new_session=True, stdin=subprocess.DEVNULL)

    def wants_cell(self) -> bool:
        """True once: the testbed is built, or the last cell is collected."""
        want = self.folder / "want"
        if want.exists():
            want.unlink()
            return True
        return False

    def exited(self) -> int | None:
        return self.proc.poll() if self.proc else None

    def give(self, cell: CellVars | None) -> None:
        """The next cell's variables, or None: no more cells (the playbook ends)."""
        self._cell_events = []
        self.events.read()  # what came before this cell (the build, the last cell) is read
        tmp = self.folder / "next.tmp"
        tmp.write_text(json.dumps(cell.to_ansible() if cell is not None else {"stop": True}))
        tmp.chmod(0o600)
        tmp.rename(self.folder / "next.json")
        self._handed = time.time()

    def cell_result(self) -> PlaybookResult:
        """The tasks of the cell handed over last: failures and seconds per phase."""
        return cell_result(self.events.read(), self._handed, time.time())

    def failures(self) -> list[str]:
        """Failures since the last cell (the testbed's removal, at the end)."""
        return [str(failure_of(e)) for e in self.events.read() if e["event"] in ("failed", "unreachable")]

    def build_failure(self) -> str:
        """Why the session ended before its first cell (the testbed could not be built)."""
        events = self.events.read()
        failures = [failure_of(e) for e in events if e["event"] in ("failed", "unreachable")]
        return str(failures[0]) if failures else f"ansible-playbook exited with status {self.exited()}"

    def stop(self, grace: float = 5.0) -> None:
        """Kill the playbook (its whole process group); idempotent."""
        if self.proc and self.proc.poll() is None:
            kill_group(self.proc, grace)

    def finish(self, timeout: float = 120.0) -> None:
        """Say stop and let the playbook remove the testbed and end (killed after TIMEOUT)."""
        if self.proc and self.proc.poll() is None:
            self.give(None)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.stop()


def cell_result(events: list[dict[str, Any]], handed: float, now: float) -> PlaybookResult:
    """A cell's EVENTS, from when it was HANDED over: its failures and seconds per phase
    (cell.json's phases). The cell ends where Ansible moves on to the next one (its first
    NEXT_CELL task), else NOW (the session died); a task without a phase counts as OTHER."""
    until = next((e["t"] for e in events if e.get("event") == "task" and e.get("phase") == Phase.NEXT_CELL), now)
    cell = [e for e in events if e.get("t", 0) < until or e.get("event") != "task"]
    failures = [failure_of(e) for e in cell if e["event"] in ("failed", "unreachable")]
    return PlaybookResult("cell", 0, failures, phases(cell, handed, until, lead=Phase.HAND_OVER.value, key=_phase,
                                                      after=Phase.OTHER.value), outputs_of(cell))


def _phase(event: dict[str, Any]) -> str:
    """The phase a task event names; OTHER for none (or one this fl does not know)."""
    try:
        return Phase(str(event.get("phase"))).value
    except ValueError:
        return Phase.OTHER.value
