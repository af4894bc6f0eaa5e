"""A run's results folder as data: provenance, scenarios, cells with their metrics.

Metrics are computed in parallel for cells whose metrics.json is missing or stale. A file
that cannot be read costs its cell (or, for a scenario.yml, its scenario), never the run:
the cell is *unreadable*, with the file and the reason, and the rest is reported.
"""
from __future__ import annotations

import os
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ..analysis.cache import cached, compute_contained
from ..analysis.metrics import Settings
from ..errors import FlError
from ..results import cell_folder, files, run_folder
from ..results.cell_metrics import CellMetrics
from ..results.cell_record import CellRecord
from ..results.flags import Flag, mismeasured
from ..results.run_record import RunRecord
from ..scenario import load_scenario
from ..scenario.schema import Scenario
from ..scenario.values import Point

UNREADABLE = "unreadable"  # a cell whose files cannot be read (its status in the report only)


@dataclass
class CellResult:
    scenario: str
    dir: Path
    record: CellRecord
    metrics: CellMetrics | None = None  # None for cells that did not run
    damage: str | None = None  # a file of the cell that cannot be read, and why: it is unreadable

    @property
    def name(self) -> str:
        return self.record.cell

    @property
    def status(self) -> str:
        return UNREADABLE if self.damage else self.record.status

    @property
    def invalid(self) -> list[str]:
        return [f"{UNREADABLE}: {self.damage}"] if self.damage else self.metrics.invalid if self.metrics else []

    @property
    def flags(self) -> list[Flag]:
        """Findings such as a starved flow: the cell counts, with the flag shown."""
        return self.metrics.flags if self.metrics else []

    @property
    def mismeasured(self) -> list[Flag]:
        """The flags that doubt the measurement itself (the path did not behave as
        declared, a figure is impossible), not a result such as a starved flow."""
        return mismeasured(self.flags)

    @property
    def valid(self) -> bool:
        return self.metrics is not None and not self.invalid

    def label(self, axis: str) -> str | None:
        return self.record.label(axis)


@dataclass
class ScenarioResult:
    name: str
    dir: Path
    scenario: Scenario
    cells: list[CellResult] = field(default_factory=list)
    unreadable: dict[str, str] = field(default_factory=dict)  # cell folder → why its cell.json cannot be read

    @property
    def swept(self) -> list[str]:
        return self.scenario.swept_axes()

    @cached_property
    def _points(self) -> dict[str, list[Point]]:
        return {a: [p for axes in self.scenario.axes_list() for p in axes.get(a, [])] for a in ("qdisc",)}

    def variant_of(self, c: CellResult, axis: str) -> str | None:
        """The name claims and references give C's value of AXIS where it is one of that
        name's variants (`variant_of`: dualpi2's step rules), else None."""
        label = c.label(axis)
        return next((p.variant_of for p in self._points.get(axis, []) if p.variant_of and p.label == label), None)

    def condition(self, c: CellResult) -> str:
        """The variant C ran under (its qdisc's label: 'dualpi2(2020)'), or '' for none:
        claims and reproduction pages judge each variant apart."""
        return (c.label("qdisc") or "") if self.variant_of(c, "qdisc") else ""

    @property
    def settings(self) -> Settings:
        return Settings(self.scenario.analysis.steady_window)

    def status_counts(self) -> dict[str, int]:
        return dict(Counter([c.status for c in self.cells] + [UNREADABLE] * len(self.unreadable)))

    def findings(self) -> dict[str, dict[str, Any]]:
        """Per cell name: why it was skipped, why its data is invalid, what was flagged,
        which of its files cannot be read."""
        return {"skipped": {c.name: c.record.reason for c in self.cells if c.status == "skipped"},
                "invalid": {c.name: c.invalid for c in self.cells if c.metrics and c.invalid},
                "flagged": {c.name: c.flags for c in self.cells if c.valid and c.flags},
                "unreadable": {**{c.name: c.damage for c in self.cells if c.damage}, **self.unreadable}}


@dataclass
class RunResult:
    name: str
    dir: Path
    provenance: RunRecord
    scenarios: list[ScenarioResult]
    unreadable: dict[str, str] = field(default_factory=dict)  # scenario folder → why its scenario.yml cannot be read

    def cells(self) -> list[CellResult]:
        return [c for s in self.scenarios for c in s.cells]

    def unreadable_count(self) -> int:
        return len(self.unreadable) + sum(len(s.findings()["unreadable"]) for s in self.scenarios)


def collect(run_dir: Path, workers: int | None = None) -> RunResult:
    if not (run_dir / run_folder.RUN_RECORD).is_file():
        raise FlError(f"{run_dir}: not a run folder (no run.json); run `fl run` first")
    provenance = files.read(RunRecord, run_dir / run_folder.RUN_RECORD)
    scenarios, unreadable = [], {}
    for d in sorted(run_dir.iterdir()):
        if (d / run_folder.SCENARIO).is_file():
            try:
                scenarios.append(_scenario(d))
            except (FlError, OSError, UnicodeDecodeError) as e:
                unreadable[d.name] = _reason(d / run_folder.SCENARIO, e)
    _fill_metrics([s for s in scenarios], workers or os.cpu_count() or 1)
    return RunResult(run_dir.name, run_dir, provenance, scenarios, unreadable)


def _scenario(d: Path) -> ScenarioResult:
    out = ScenarioResult(d.name, d, load_scenario(d / run_folder.SCENARIO))
    for cell_json in sorted(d.glob(f"*/{cell_folder.CELL}")):
        try:
            out.cells.append(CellResult(d.name, cell_json.parent, files.read(CellRecord, cell_json)))
        except (FlError, OSError, UnicodeDecodeError) as e:
            out.unreadable[cell_json.parent.name] = _reason(cell_json, e)
    return out


def _reason(path: Path, e: Exception) -> str:
    """One line naming PATH (the errors of fl's readers name it already)."""
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return text if str(path) in text else f"{path.name}: {text}"


def _fill_metrics(scenarios: list[ScenarioResult], workers: int) -> None:
    """Cached metrics where current; the rest computed in WORKERS processes."""
    todo: list[tuple[CellResult, Settings]] = []
    for s in scenarios:
        for c in s.cells:
            if c.status == "skipped":
                continue
            c.metrics = cached(c.dir, s.settings)
            if c.metrics is None:
                todo.append((c, s.settings))
    if not todo:
        return
    with ProcessPoolExecutor(max_workers=min(workers, len(todo))) as pool:
        for (c, _), m in zip(todo, pool.map(compute_contained, [c.dir for c, _ in todo], [s for _, s in todo])):
            if isinstance(m, str):
                c.damage = m
            else:
                c.metrics = m
