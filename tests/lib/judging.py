"""A scenario of one cell with stand-in metrics, for tests of what `fl plot` judges
(expectations, findings) without a run."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from flharness.cells import expand
from flharness.report.collect import CellResult, ScenarioResult
from flharness.scenario import load_scenario


def one_cell(path: Path, metrics: Any) -> ScenarioResult:
    """The scenario file PATH (one cell) as `fl plot` sees it, the cell ok with METRICS."""
    scenario = load_scenario(path)
    (cell,) = expand(scenario, path)
    record = SimpleNamespace(label=lambda a: cell.coords[a].label if a in cell.coords else None, status="ok",
                             reason="", cell=cell.name, config=cell.config)
    return ScenarioResult(scenario.name, Path("/nonexistent"), scenario,
                          [CellResult(scenario.name, Path("/x"), record, metrics)])  # type: ignore[arg-type]
