"""Which cells a run will run, skip (the kernel lacks something) or keep (done before)."""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path

from ..capabilities import Capabilities
from ..cells import Cell, expand
from ..errors import FlError
from ..results import ScenarioResults
from ..scenario import Scenario, load_scenario
from ..scenario.values import valid_name
from ..units import human_duration

DONE = "completed earlier with the same configuration"


@dataclass(frozen=True)
class Planned:
    cell: Cell
    action: str  # 'run', 'skip' (kernel cannot), 'done' (completed earlier, same config)
    reason: str = ""


@dataclass
class ScenarioPlan:
    path: Path
    name: str
    store: ScenarioResults
    planned: list[Planned]

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


def plan(cells: list[Cell], caps: Capabilities, store: ScenarioResults, force: bool) -> list[Planned]:
    out = []
    for cell in cells:
        if not force and store.is_done(cell.name, cell.config_hash):
            out.append(Planned(cell, "done", DONE))
        elif (why := caps.unsupported(cell)) is not None:
            out.append(Planned(cell, "skip", why))
        else:
            out.append(Planned(cell, "run"))
    return out


def all_done(selected: list[tuple[Scenario, list[Cell]]], paths: list[Path], root: Path) -> list[ScenarioPlan] | None:
    """The plans of a run whose every selected cell completed earlier with the same
    configuration (nothing to run: no testbed needed), else None."""
    plans = [ScenarioPlan(path, s.name, ScenarioResults(root / s.name), []) for (s, _), path in zip(selected, paths)]
    for sp, (_, cells) in zip(plans, selected):
        if not all(sp.store.is_done(c.name, c.config_hash) for c in cells):
            return None
        sp.planned = [Planned(c, "done", DONE) for c in cells]
    return plans if any(sp.planned for sp in plans) else None


def estimate_total(cells: list[Cell], overhead: float) -> str:
    from ..testbed.plan import estimated_seconds
    return human_duration(sum(estimated_seconds(c, overhead) for c in cells))
