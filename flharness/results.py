"""The results folder: results/<run>/<scenario>/<cell>/ with cell.json, committed atomically.

A cell is written in ``.partial/<cell>`` and renamed into place when it ends. A failed,
skipped or interrupted attempt never replaces a cell that completed (it goes to
``.attempts/`` instead), so a completed cell is only ever replaced by a newer completed one.
"""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

Status = Literal["ok", "failed", "skipped", "interrupted"]
CELL_FILE = "cell.json"


class CellRecord(BaseModel):
    """cell.json: what ran, how it went, and everything needed to trust or redo it."""

    model_config = ConfigDict(extra="allow")
    scenario: str
    cell: str
    config_hash: str
    status: Status
    reason: str = ""
    coordinates: dict[str, Any] = {}
    swept: list[str] = []
    config: dict[str, Any] = {}
    started: float | None = None
    ended: float | None = None
    backend: dict[str, Any] = {}
    kernel: str = ""
    tools: dict[str, Any] = {}
    fl: dict[str, Any] = {}
    files: list[str] = []
    checks: dict[str, Any] = {}
    phases: dict[str, float] = {}  # seconds per Ansible task of the cell's playbook

    @property
    def duration(self) -> float | None:
        return self.ended - self.started if self.started and self.ended else None


class ScenarioResults:
    """One scenario's folder inside a run."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def cell_dir(self, name: str) -> Path:
        return self.root / name

    def record(self, name: str) -> CellRecord | None:
        path = self.cell_dir(name) / CELL_FILE
        try:
            return CellRecord.model_validate_json(path.read_text())
        except (OSError, ValidationError, ValueError):
            return None

    def records(self) -> list[CellRecord]:
        if not self.root.is_dir():
            return []
        recs = (self.record(p.name) for p in sorted(self.root.iterdir())
                if p.is_dir() and not p.name.startswith("."))
        return [r for r in recs if r is not None]

    def is_done(self, name: str, config_hash: str) -> bool:
        rec = self.record(name)
        return rec is not None and rec.status == "ok" and rec.config_hash == config_hash

    def new_partial(self, name: str) -> Path:
        path = self.root / ".partial" / name
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
        return path

    def commit(self, partial: Path, record: CellRecord) -> Path:
        """Write cell.json and move the attempt into place (or aside, see module doc)."""
        record.files = sorted({p.name for p in partial.iterdir() if p.is_file()} | {CELL_FILE})
        (partial / CELL_FILE).write_text(record.model_dump_json(indent=1) + "\n")
        target = self.cell_dir(record.cell)
        old = self.record(record.cell)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        if record.status != "ok" and old is not None and old.status == "ok":
            aside = self.root / ".attempts" / f"{record.cell}-{stamp}-{record.status}"
            aside.parent.mkdir(parents=True, exist_ok=True)
            partial.rename(aside)
            return aside
        if target.exists():
            trash = self.root / ".partial" / f".replaced-{record.cell}-{stamp}"
            target.rename(trash)
            shutil.rmtree(trash, ignore_errors=True)
        partial.rename(target)
        return target


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (temp file + rename)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")
    tmp.rename(path)
