"""The results folder: results/<run>/<scenario>/<cell>/ with cell.json, committed atomically.

A cell is written in ``.partial/<cell>`` and renamed into place when it ends. A failed,
skipped or interrupted attempt never replaces a cell that completed (it goes to
``.attempts/`` instead), so a completed cell is only ever replaced by a newer completed one.
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path

from pydantic import BaseModel, ValidationError

from . import cell_folder
from . import files
from .cell_record import CellRecord, Status



class _StatusOnly(BaseModel):
    status: Status | None = None  # any version's cell.json has it


class ScenarioFolder:
    """One scenario's folder inside a run."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def cell_dir(self, name: str) -> Path:
        return self.root / name

    def record(self, name: str) -> CellRecord | None:
        """The cell's record; None when it has none or an unreadable one (it runs again).
        A record of another version is an error (files.VersionError)."""
        try:
            return files.read(CellRecord, self.cell_dir(name) / cell_folder.CELL)
        except (OSError, files.InvalidFile):
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
        record.files = sorted({p.name for p in partial.iterdir() if p.is_file()} | {cell_folder.CELL})
        files.write(partial / cell_folder.CELL, record)
        target = self.cell_dir(record.cell)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        if record.status != "ok" and self._completed(record.cell):
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

    def set_aside(self, name: str, why: str) -> Path:
        """Move the cell NAME's folder into .attempts/ (a failed attempt that is run again)."""
        aside = self.root / ".attempts" / f"{name}-{time.strftime('%Y%m%dT%H%M%S')}-{why}"
        aside.parent.mkdir(parents=True, exist_ok=True)
        self.cell_dir(name).rename(aside)
        return aside

    def _completed(self, name: str) -> bool:
        """Whether the cell in place completed, whatever fl version wrote it (--force over
        an older run's cells must not lose them to a failure)."""
        try:
            return _StatusOnly.model_validate_json((self.cell_dir(name) / cell_folder.CELL).read_text()).status == "ok"
        except (OSError, ValidationError):
            return False
