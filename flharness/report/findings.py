"""The run's verdict on each claim of the findings files its scenarios name (`findings:`,
scenario/findings.py): a claim is the `expect:` entries that state it (`finding: N`), per
scenario. It holds when every cell they judged met them, does not hold when one missed,
and is not run when none was judged (the scenario is not in the run, or its cells were
skipped or their measurement is in doubt)."""
from __future__ import annotations

from dataclasses import dataclass

from ..scenario.findings import Finding, Findings, load_findings
from .collect import RunResult
from .expect import Judgement

HOLDS, FAILS, NOT_RUN = "holds", "does not hold", "not run"


@dataclass(frozen=True)
class FindingRow:
    finding: Finding
    scenario: str  # "" for a finding no shipped scenario studies
    cells: int  # cells judged (met or missed)
    verdict: str
    detail: str  # the first miss, or why not run


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
            rows.append(_row(f, name, mine, name in in_run))
    return rows


def _row(f: Finding, scenario: str, mine: list[Judgement], ran: bool) -> FindingRow:
    decided = [j for j in mine if j.ok is not None]
    cells = len({j.cell for j in decided})
    missed = next((j for j in decided if j.ok is False), None)
    if missed is not None:
        return FindingRow(f, scenario, cells, FAILS, f"{missed.cell}: {missed.expectation.text}: {missed.detail}")
    if decided:
        return FindingRow(f, scenario, cells, HOLDS, f"{len(decided)} statements met")
    why = "not in this run" if not ran else ("no cell it selects was judged" if mine else "no cell it selects ran")
    return FindingRow(f, scenario, 0, NOT_RUN, why)
