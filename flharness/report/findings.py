"""The run's verdict on each claim of the findings files its scenarios name (`findings:`,
scenario/findings.py): a claim is the `expect:` entries that state it (`finding: N`), per
scenario. It holds when every cell they judged met them, does not hold when one missed,
and is not run when none was judged (the scenario is not in the run, or its cells were
skipped or their measurement is in doubt)."""
from __future__ import annotations

from dataclasses import dataclass, field
from statistics import fmean

from ..scenario.findings import Finding, Findings, KeyNumber, load_findings
from .collect import RunResult, ScenarioResult
from .expect import Judgement, matches
from .measures import measure, values

HOLDS, FAILS, NOT_RUN = "holds", "does not hold", "not run"


@dataclass(frozen=True)
class KeyResult:
    """A finding's key number: published, and the run's mean over the cells of its rule."""

    key: KeyNumber
    reproduced: list[float | None]  # per flow, or one per cell metric; None: no valid cell
    cells: list[str]  # the run's cells it was read from

    @property
    def published(self) -> list[float]:
        return self.key.published if isinstance(self.key.published, list) else [self.key.published]


@dataclass(frozen=True)
class FindingRow:
    finding: Finding
    scenario: str  # "" for a finding no shipped scenario studies
    cells: int  # cells judged (met or missed)
    verdict: str
    detail: str  # the first miss, or why not run
    judged: list[tuple[str, bool]] = field(default_factory=list)  # (cell, met all) of the judged cells
    key: KeyResult | None = None  # on the row of the key's scenario


def key_findings(result: RunResult, judged: list[Judgement]) -> list[tuple[Findings, list[FindingRow]]]:
    """Per findings file named by the run's scenarios: a row per finding and scenario that
    studies it (the file's `scenarios:` and any of the run's that state it)."""
    names = list(dict.fromkeys(s.scenario.findings for s in result.scenarios if s.scenario.findings))
    return [(known, _rows(known, result, judged)) for known in (load_findings(n) for n in names)]


def _rows(known: Findings, result: RunResult, judged: list[Judgement]) -> list[FindingRow]:
    in_run = {s.name: s for s in result.scenarios}
    rows = []
    for f in known.findings:
        stating = [n for n, s in in_run.items() if any(e.finding == f.id for e in s.scenario.expect)]
        scenarios = list(dict.fromkeys([*f.scenarios, *stating]))
        if not scenarios:
            rows.append(FindingRow(f, "", 0, NOT_RUN, f.note or "no scenario states it"))
        for name in scenarios:
            mine = [j for j in judged if j.scenario == name and j.expectation.finding == f.id]
            key = key_result(f.key, in_run[name]) if f.key and f.key.scenario == name and name in in_run else None
            rows.append(_row(f, name, mine, name in in_run, key))
    return rows


def _row(f: Finding, scenario: str, mine: list[Judgement], ran: bool, key: KeyResult | None) -> FindingRow:
    decided = [j for j in mine if j.ok is not None]
    per_cell = {c: all(j.ok for j in decided if j.cell == c) for c in dict.fromkeys(j.cell for j in decided)}
    judged = sorted(per_cell.items(), key=lambda cm: (cm[1], cm[0]))  # misses first
    missed = next((j for j in decided if j.ok is False), None)
    if missed is not None:
        return FindingRow(f, scenario, len(per_cell), FAILS, f"{missed.cell}: {missed.expectation.text}: {missed.detail}",
                          judged, key)
    if decided:
        return FindingRow(f, scenario, len(per_cell), HOLDS, f"{len(decided)} statements met", judged, key)
    why = "not in this run" if not ran else ("no cell it selects was judged" if mine else "no cell it selects ran")
    return FindingRow(f, scenario, 0, NOT_RUN, why, [], key)


def key_result(key: KeyNumber, s: ScenarioResult) -> KeyResult:
    """KEY's metric over the valid cells of S its rule selects: the mean per flow (or of
    the cell metric), None where no such cell has it."""
    cells = [c for c in s.cells if c.valid and c.metrics is not None and matches(s, c, {a: [v] for a, v in key.cell.items()})]
    m = measure(key.metric)
    got = [values(m, c.metrics) for c in cells if c.metrics is not None]
    width = max((len(v) for v in got), default=1)
    means = [fmean(xs) if (xs := [x for v in got if i < len(v) and (x := v[i]) is not None]) else None for i in range(width)]
    return KeyResult(key, means, [c.name for c in cells])
