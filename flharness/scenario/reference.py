"""Reference files: published values a scenario reproduces (`reference: NAME` names
references/NAME.yml, transcribed from a paper or report). Validated with the scenario,
before anything runs; `fl plot` sets the run's values beside them (report/reproduction.py).

    source: {document: …, section: …, definition: {metric: how the source defines it}}
    scenario: s1-rttfair
    tolerance: {dss_mbit: 15%, jain: 0.05}      # relative to the published value, or absolute
    rows:
      - cell: {cc: cubic-vs-cubic, qdisc: dualpi2, rate: 10mbit, rtt: 10ms-10ms}
        dss_mbit: [4.61, 4.83]                  # per flow, in fl's flow order
        jain: 0.999                             # per cell

A row's `cell:` keys are axes with the values' file-name forms (as in cell names). A row
with `missing:` has no cell in fl's scenario (the text says why); `order: any` compares
per-flow lists sorted; `per_run:` gives the published runs, whose mean stands for a
metric the row does not give itself; `runs:` and `note:` are for the reader. Where the
source states a result in words only (a plot, no number), the row has `says:` (its words)
and `shows:` (the metrics fl sets beside them), and no published value.
"""
from __future__ import annotations

import math
from pathlib import Path
from statistics import fmean
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from ..errors import ScenarioError
from .expectations import METRICS
from .yaml_file import read_yaml

#: Where the files a scenario's `reference:` names live.
REFERENCE_DIR = Path(__file__).resolve().parents[2] / "references"


class Row(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    cell: dict[str, str]
    missing: str | None = None
    runs: int | None = None
    per_run: list[dict[str, Any]] | None = None
    order: Literal["flow", "any"] = "flow"
    note: str | None = None
    says: str | None = None  # the source's words where it gives no number
    shows: list[str] = []  # metrics set beside them

    @field_validator("shows")
    @classmethod
    def _shown(cls, v: list[str]) -> list[str]:
        if unknown := [k for k in v if k not in METRICS]:
            raise ValueError(f"{unknown[0]!r} is none of the metrics ({', '.join(METRICS)})")
        return v

    @field_validator("cell", mode="before")
    @classmethod
    def _texts(cls, v: Any) -> Any:
        return {k: str(x) for k, x in v.items()} if isinstance(v, dict) else v

    @model_validator(mode="after")
    def _numbers(self) -> Row:
        """Each published value is a finite number, or a list of them (one per flow)."""
        for where, v in [*(self.model_extra or {}).items(),
                         *((f"per_run[{i}].{k}", x) for i, run in enumerate(self.per_run or []) for k, x in run.items())]:
            if not isinstance(v, list) or not v:
                v = [v]
            if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v):
                raise ValueError(f"{where}: {str(v)[:60]} is no finite number or list of numbers")
        if self.shows and not self.says:
            raise ValueError("shows: the metrics set beside the source's words (says:), which this row lacks")
        return self

    @property
    def key(self) -> str:
        return ", ".join(f"{a} {v}" for a, v in self.cell.items())

    def published(self) -> dict[str, tuple[list[float], str]]:
        """metric → (values: one per flow, or one; where from: '' or 'mean of N published runs')."""
        out = {k: (_floats(v), "") for k, v in (self.model_extra or {}).items()}
        for name in dict.fromkeys(k for run in self.per_run or [] for k in run):
            if name not in out:
                runs = [_floats(run[name]) for run in self.per_run or [] if name in run]
                out[name] = ([fmean(col) for col in zip(*runs)], f"mean of {len(runs)} published runs")
        return out


class Reference(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    source: dict[str, Any]
    scenario: str
    tolerance: dict[str, str | float]
    rows: list[Row]

    @field_validator("tolerance")
    @classmethod
    def _tolerances(cls, v: dict[str, str | float]) -> dict[str, str | float]:
        for k, t in v.items():
            if k not in METRICS:
                raise ValueError(f"{k!r} is none of the metrics ({', '.join(METRICS)})")
            tolerance(t, 1.0)
        return v

    @property
    def document(self) -> str:
        return str(self.source.get("document", "?"))

    @property
    def address(self) -> str | None:
        """Where the document is (its URL), for pages that cite it."""
        return str(self.source["address"]) if self.source.get("address") else None

    def definition(self, metric: str) -> str:
        return str(self.source.get("definition", {}).get(metric, ""))


def _floats(v: Any) -> list[float]:
    return [float(x) for x in (v if isinstance(v, list) else [v])]


def tolerance(t: str | float, published: float) -> float:
    """'15%' of the published value, or an absolute number."""
    if isinstance(t, str):
        if not t.endswith("%"):
            raise ValueError(f"tolerance {t!r}: 'N%' or a number")
        return abs(published) * float(t[:-1]) / 100
    return float(t)


def reference_path(name: str) -> Path:
    return REFERENCE_DIR / f"{name}.yml"


def load_reference(name: str, scenario_path: Path | str = "") -> Reference:
    """references/NAME.yml, validated; a problem names the file and key (or the scenario's
    `reference` key when there is no such file)."""
    path = reference_path(name)
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in REFERENCE_DIR.glob("*.yml"))) or "none"
        raise ScenarioError(scenario_path, "reference", f"no file {name}.yml in {REFERENCE_DIR} (available: {known})")
    try:
        ref = Reference.model_validate(read_yaml(path, "a reference file is a mapping (source, scenario, tolerance, rows)"))
    except ValidationError as e:
        err = e.errors()[0]
        raise ScenarioError(path, ".".join(map(str, err["loc"])), err["msg"].removeprefix("Value error, ")) from None
    seen: set[str] = set()
    for i, row in enumerate(ref.rows):
        if row.key in seen:
            raise ScenarioError(path, f"rows[{i}].cell", f"{row.key}: a second row for the same cells")
        seen.add(row.key)
        for k in row.published():
            if k not in METRICS:
                raise ScenarioError(path, f"rows[{i}].{k}", f"not a metric ({', '.join(METRICS)})")
            if k not in ref.tolerance:
                raise ScenarioError(path, f"rows[{i}].{k}", "no tolerance given for this metric (tolerance:)")
    return ref
