"""A run's results folder as data: provenance, scenarios, cells with their metrics.

Metrics are computed in parallel for cells whose metrics.json is missing or stale.
"""
from __future__ import annotations

import os
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..analysis.cache import cached, compute
from ..analysis.metrics import CALIBRATION_FLAG, MEASUREMENT_ERROR, Settings
from ..errors import FlError
from ..results import files
from ..results.cell_metrics import CellMetrics
from ..results.cell_record import CellRecord
from ..results.run_record import RunRecord
from ..results.store import CELL_FILE
from ..scenario import load_scenario
from ..scenario.schema import Scenario


@dataclass
class CellResult:
    scenario: str
    dir: Path
    record: CellRecord
    metrics: CellMetrics | None = None  # None for cells that did not run

    @property
    def name(self) -> str:
        return self.record.cell

    @property
    def status(self) -> str:
        return self.record.status

    @property
    def invalid(self) -> list[str]:
        return self.metrics.invalid if self.metrics else []

    @property
    def flags(self) -> list[str]:
        """Findings such as a starved flow: the cell counts, with the flag shown."""
        return self.metrics.flags if self.metrics else []

    @property
    def mismeasured(self) -> list[str]:
        """The flags that doubt the measurement itself (the path did not behave as
        declared, a figure is impossible), not a result such as a starved flow."""
        return [f for f in self.flags if f.startswith(CALIBRATION_FLAG) or MEASUREMENT_ERROR in f]

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

    @property
    def swept(self) -> list[str]:
        return self.scenario.swept_axes()

    @property
    def settings(self) -> Settings:
        return Settings(self.scenario.analysis.steady_window)

    def status_counts(self) -> dict[str, int]:
        return dict(Counter(c.status for c in self.cells))

    def findings(self) -> dict[str, dict[str, Any]]:
        """Per cell name: why it was skipped, why its data is invalid, what was flagged."""
        return {"skipped": {c.name: c.record.reason for c in self.cells if c.status == "skipped"},
                "invalid": {c.name: c.invalid for c in self.cells if c.metrics and c.invalid},
                "flagged": {c.name: c.flags for c in self.cells if c.valid and c.flags}}


@dataclass
class RunResult:
    name: str
    dir: Path
    provenance: RunRecord
    scenarios: list[ScenarioResult]

    def cells(self) -> list[CellResult]:
        return [c for s in self.scenarios for c in s.cells]


def collect(run_dir: Path, workers: int | None = None) -> RunResult:
    if not (run_dir / "run.json").is_file():
        raise FlError(f"{run_dir}: not a run folder (no run.json); run `fl run` first")
    provenance = files.read(RunRecord, run_dir / "run.json")
    scenarios = [_scenario(d) for d in sorted(run_dir.iterdir()) if (d / "scenario.yml").is_file()]
    _fill_metrics([s for s in scenarios], workers or os.cpu_count() or 1)
    return RunResult(run_dir.name, run_dir, provenance, scenarios)


def _scenario(d: Path) -> ScenarioResult:
    out = ScenarioResult(d.name, d, load_scenario(d / "scenario.yml"))
    for cell_json in sorted(d.glob(f"*/{CELL_FILE}")):
        out.cells.append(CellResult(d.name, cell_json.parent, files.read(CellRecord, cell_json)))
    return out


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
        for (c, _), m in zip(todo, pool.map(compute, [c.dir for c, _ in todo], [s for _, s in todo])):
            c.metrics = m
