"""Which cells a run will run, skip (the kernel lacks something) or keep (done before)."""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path

from ..capabilities import Capabilities
from ..cells import Cell, expand
from ..errors import FlError
from ..results import ScenarioFolder
from ..results.cell_record import CellRecord
from ..scenario import Scenario, load_scenario
from ..scenario.values import valid_name

DONE = "completed earlier with the same configuration"


@dataclass(frozen=True)
class PlannedCell:
    cell: Cell
    action: str  # 'run', 'skip' (kernel cannot), 'done' (completed earlier, same config)
    reason: str = ""


@dataclass
class ScenarioPlan:
    path: Path
    name: str
    store: ScenarioFolder
    planned: list[PlannedCell]

    def cells(self, action: str) -> list[Cell]:
        return [p.cell for p in self.planned if p.action == action]


def check_run_name(name: str) -> None:
    valid_name(name, "run name", "--run: ")


def select(cells: list[Cell], patterns: list[str], require_match: bool = True) -> list[Cell]:
    """--only: glob patterns (*, ?, [..]) or plain substrings of cell names."""
    if not patterns:
        return cells
    for p in patterns:
        if not p or len(p) > 200 or not p.isprintable():
            raise FlError(f"--only {p[:60]!r}: a glob or substring of cell names (1-200 printable characters)")

    def hit(p: str, name: str) -> bool:
        return fnmatch.fnmatchcase(name, p) if any(ch in p for ch in "*?[") else p in name

    chosen = [c for c in cells if any(hit(p, c.name) for p in patterns)]
    if not chosen and require_match:
        raise FlError(f"--only {' '.join(patterns)}: no cell matches (cells look like {cells[0].name})")
    return chosen


def require_some(cells: list[Cell], patterns: list[str]) -> None:
    """--only over several scenarios: one of them without a matching cell is fine, all of them is not."""
    if patterns and not cells:
        raise FlError(f"--only {' '.join(patterns)}: no cell of these scenarios matches")


def load_selected(path: Path, only: list[str], require_match: bool = True) -> tuple[Scenario, list[Cell]]:
    scenario = load_scenario(path)
    return scenario, select(expand(scenario, path), only, require_match)


def scenario_name(scenario: Scenario) -> str:
    """The name a run stores a scenario under: load_scenario gives it its file's unless
    the file says `name: null`, which a run cannot store."""
    assert scenario.name is not None, "a scenario without a name"
    return scenario.name


@dataclass(frozen=True)
class KnownKernel:
    """What a testbed runs cells with, as far as it is known: its kernel release and the
    sha256 of its congestion-control modules (module name → sha256)."""

    release: str | None
    modules: dict[str, str]

    @classmethod
    def of(cls, caps: Capabilities) -> KnownKernel:
        return cls(caps.kernel, {m.module: m.sha256 for m in caps.reply.cc_modules.values() if m.sha256})

    def change(self, rec: CellRecord) -> str | None:
        """How this kernel differs from the one REC's cell ran with, or None (the same,
        as far as both are known)."""
        if self.release and rec.kernel and rec.kernel != self.release:
            return f"it ran on kernel {rec.kernel}, this testbed has {self.release}"
        for m in rec.cc_modules.values():
            now = self.modules.get(m.module)
            if m.sha256 and now and now != m.sha256:
                return f"it ran with {m.module} sha256 {m.sha256[:12]}…, this testbed has {now[:12]}…"
        return None


def plan(cells: list[Cell], caps: Capabilities, store: ScenarioFolder, force: bool) -> list[PlannedCell]:
    """Each cell's action; a cell completed with the same configuration but another
    kernel or congestion-control module is an error (one line naming both), never kept."""
    out, kernel = [], KnownKernel.of(caps)
    for cell in cells:
        if not force and store.is_done(cell.name, cell.config_hash):
            rec = store.record(cell.name)
            if rec is not None and (changed := kernel.change(rec)) is not None:
                raise FlError(f"{store.root / cell.name}: completed with the same configuration, but {changed}: "
                              "run into another label (--run NAME) to keep both, or --force to run it again here")
            out.append(PlannedCell(cell, "done", DONE))
        elif (why := caps.unsupported(cell)) is not None:
            out.append(PlannedCell(cell, "skip", why))
        else:
            out.append(PlannedCell(cell, "run"))
    return out


def all_done(selected: list[tuple[Scenario, list[Cell]]], paths: list[Path], root: Path,
             kernel: KnownKernel) -> list[ScenarioPlan] | None:
    """The plans of a run whose every selected cell completed earlier with the same
    configuration on the same KERNEL (nothing to run: no testbed needed), else None;
    None too where the testbed's kernel is not known without probing it."""
    if kernel.release is None:
        return None
    plans = [ScenarioPlan(path, scenario_name(s), ScenarioFolder(root / scenario_name(s)), [])
             for (s, _), path in zip(selected, paths)]
    for sp, (_, cells) in zip(plans, selected):
        for c in cells:
            rec = sp.store.record(c.name) if sp.store.is_done(c.name, c.config_hash) else None
            if rec is None or kernel.change(rec) is not None:
                return None
        sp.planned = [PlannedCell(c, "done", DONE) for c in cells]
    return plans if any(sp.planned for sp in plans) else None
