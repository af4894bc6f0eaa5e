"""The run's verdict on each claim of the findings files its scenarios name (`findings:`,
scenario/findings.py): a claim is the `expect:` entries that state it (`finding: N`), per
scenario. It holds when every cell they judged met them, does not hold when one missed,
and is not run when none was judged (its cells were skipped or their measurement is in
doubt). Where its cells ran under variants of one setting (dualpi2's step rules: the
cells' conditions, ScenarioResult.condition), it is judged once per variant, on that
variant's cells and the cells of none. A finding's scenarios that are not in the run are
named, not given rows of their own."""
from __future__ import annotations

import dataclasses
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
        published = self.key.published
        return [] if published is None else published if isinstance(published, list) else [published]


@dataclass(frozen=True)
class FindingRow:
    finding: Finding
    scenario: str  # "" for a finding no shipped scenario studies
    cells: int  # cells judged (met or missed)
    verdict: str
    detail: str  # the first miss, or why not run
    judged: list[tuple[str, bool]] = field(default_factory=list)  # (cell, met all) of the judged cells
    key: KeyResult | None = None  # on the row of the key's scenario
    elsewhere: list[str] = field(default_factory=list)  # the finding's other scenarios, not in this run
    condition: str = ""  # the variant its cells ran under ('dualpi2(2020)'), '' for none


@dataclass(frozen=True)
class FindingsTable:
    """A findings file's verdicts on a run: a row per finding and scenario of the run that
    studies it; the findings none of the run's scenarios studies, with the scenarios that do."""

    known: Findings
    rows: list[FindingRow]
    absent: list[tuple[Finding, list[str]]]


def key_findings(result: RunResult, judged: list[Judgement]) -> list[FindingsTable]:
    """Per findings file named by the run's scenarios, its table (scenarios that study a
    finding: the file's `scenarios:` and any of the run's that state it)."""
    names = list(dict.fromkeys(s.scenario.findings for s in result.scenarios if s.scenario.findings))
    return [_table(known, result, judged) for known in (load_findings(n) for n in names)]


def _table(known: Findings, result: RunResult, judged: list[Judgement]) -> FindingsTable:
    in_run = {s.name: s for s in result.scenarios}
    rows, absent = [], []
    for f in known.findings:
        stating = [n for n, s in in_run.items() if any(e.finding == f.id for e in s.scenario.expect)]
        scenarios = list(dict.fromkeys([*f.scenarios, *stating]))
        ran = [n for n in scenarios if n in in_run]
        if not ran:
            absent.append((f, scenarios))
        for name in ran:
            s = in_run[name]
            mine = [j for j in judged if j.scenario == name and j.expectation.finding == f.id]
            of = {c.name: s.condition(c) for c in s.cells}
            for condition in list(dict.fromkeys(of.get(j.cell, "") for j in mine if of.get(j.cell))) or [""]:
                theirs = [j for j in mine if of.get(j.cell, "") in ("", condition)]
                key = key_result(f.key, s, condition) if f.key and f.key.scenario == name else None
                row = _row(f, name, theirs, key, [n for n in scenarios if n not in in_run])
                rows.append(dataclasses.replace(row, condition=condition))
    return FindingsTable(known, rows, absent)


def _row(f: Finding, scenario: str, mine: list[Judgement], key: KeyResult | None, elsewhere: list[str]) -> FindingRow:
    decided = [j for j in mine if j.ok is not None]
    per_cell = {c: all(j.ok for j in decided if j.cell == c) for c in dict.fromkeys(j.cell for j in decided)}
    judged = sorted(per_cell.items(), key=lambda cm: (cm[1], cm[0]))  # misses first
    missed = next((j for j in decided if j.ok is False), None)
    if missed is not None:
        return FindingRow(f, scenario, len(per_cell), FAILS, f"{missed.cell}: {missed.expectation.text}: {missed.detail}",
                          judged, key, elsewhere)
    if decided:
        return FindingRow(f, scenario, len(per_cell), HOLDS, f"{len(decided)} statements met", judged, key, elsewhere)
    why = "no cell it selects was judged" if mine else "no cell it selects ran"
    return FindingRow(f, scenario, 0, NOT_RUN, why, [], key, elsewhere)


def key_result(key: KeyNumber, s: ScenarioResult, condition: str = "") -> KeyResult:
    """KEY's metric over the valid cells of S its rule selects (of CONDITION or none, where
    given): the mean per flow (or of the cell metric), None where no such cell has it."""
    cells = [c for c in s.cells if c.valid and c.metrics is not None and matches(s, c, {a: [v] for a, v in key.cell.items()})
             and (not condition or s.condition(c) in ("", condition))]
    m = measure(key.metric)
    got = [values(m, c.metrics) for c in cells if c.metrics is not None]
    width = max((len(v) for v in got), default=1)
    means = [fmean(xs) if (xs := [x for v in got if i < len(v) and (x := v[i]) is not None]) else None for i in range(width)]
    return KeyResult(key, means, [c.name for c in cells])
