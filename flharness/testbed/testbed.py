"""The testbed for one run: built once by Ansible, torn down whatever happens.

A state file under /run/fl/testbeds/ records each live testbed (its id, inventory, the
fl process) so `fl clean` can remove what a killed run left behind.
"""
from __future__ import annotations

import json
import os
import secrets
import signal
import time
from pathlib import Path
from typing import Any

from ..errors import FlError
from . import netns
from .ansible import PlaybookResult, run_playbook
from .inventory import Inventory

STATE_ROOT = Path("/run/fl")
STATE_DIR = STATE_ROOT / "testbeds"


class TestbedError(FlError):
    pass


class Testbed:
    """Context manager: __enter__ builds the testbed, __exit__ always removes it."""

    def __init__(self, inventory: Inventory, run_vars: dict[str, Any], log: Path,
                 testbed_id: str | None = None) -> None:
        self.inv, self.run_vars, self.log = inventory, run_vars, log
        self.id = testbed_id or f"fl-{secrets.token_hex(3)}"
        self.state_file = STATE_DIR / f"{self.id}.json"
        self.started = time.time()

    def extra_vars(self, cell: dict[str, Any] | None = None) -> dict[str, Any]:
        ev: dict[str, Any] = {"fl_testbed_id": self.id, "fl_state_root": str(STATE_ROOT),
                              "fl_run": self.run_vars}
        if cell is not None:
            ev["fl_cell"] = cell
        return ev

    def playbook(self, name: str, cell: dict[str, Any] | None = None) -> PlaybookResult:
        return run_playbook(name, self.inv.path, self.extra_vars(cell), self.log,
                            on_start=lambda pid: self._save_state(playbook_pid=pid))

    def _save_state(self, **extra: Any) -> None:
        if not self.state_file.exists() and not extra.get("create"):
            return
        state = {"id": self.id, "inventory": str(self.inv.path), "backend": self.inv.backend,
                 "pid": os.getpid(), "started": self.started, "run_vars": self.run_vars,
                 "playbook_pid": extra.get("playbook_pid")}
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        tmp.rename(self.state_file)

    def __enter__(self) -> "Testbed":
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        self._save_state(create=True)
        try:
            result = self.playbook("testbed_up")
        except BaseException:
            self.down()
            raise
        if not result.ok:
            self.down()
            raise TestbedError(f"building the testbed failed: {result.reason()} (log: {self.log})")
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def down(self) -> None:
        """Remove everything; Ctrl-C is ignored meanwhile so cleanup cannot be cut short."""
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            result = self.playbook("testbed_down")
            if not result.ok:
                with self.log.open("a") as f:
                    f.write(f"\n# testbed_down: {result.reason()}\n")
            if self.inv.backend == "netns":
                for ns in netns.testbed_namespaces(self.id):  # safety net
                    netns.remove(ns)
            self.state_file.unlink(missing_ok=True)
        finally:
            signal.signal(signal.SIGINT, previous)

    def run_cell(self, cell: dict[str, Any]) -> PlaybookResult:
        """Configure, run Flent, collect (playbooks/cell.yml)."""
        return self.playbook("cell", cell)


def stale_testbeds() -> list[dict[str, Any]]:
    """State files of testbeds whose fl process is gone."""
    out = []
    for path in sorted(STATE_DIR.glob("fl-*.json")) if STATE_DIR.is_dir() else []:
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not _alive(int(state.get("pid", 0))):
            out.append(state)
    return out


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
