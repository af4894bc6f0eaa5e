"""Judging a scenario's `expect:` thresholds on its cells (scenario/expectations.py), and
the verdicts as JUnit XML for a CI: a test case per cell and expectation, a failure for
a threshold missed or a cell without a result, skipped for a cell the kernel cannot run."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cells.model import jsonable
from ..results.flags import mismeasured
from ..scenario.expectations import BASELINE, OPERATORS, Expectation
from ..scenario.values import slug
from .collect import UNREADABLE, CellResult, ScenarioResult
from .measures import measure, values


@dataclass(frozen=True)
class Judgement:
    scenario: str
    cell: str
    expectation: Expectation
    ok: bool | None  # None: not judged (the cell was skipped, or its measurement is in doubt)
    detail: str


def judge(s: ScenarioResult) -> list[Judgement]:
    return [_judge(s, c, e) for e in s.scenario.expect for c in s.cells if selected(s, c, e)]


def selected(s: ScenarioResult, c: CellResult, e: Expectation) -> bool:
    """E's rule selects C as an include rule would."""
    return matches(s, c, e.rule)


def matches(s: ScenarioResult, c: CellResult, rule: dict[str, list[Any]]) -> bool:
    """RULE (axis → values) selects C as an include rule would: each axis's value is one
    of the rule's (by label, file-name form or value as written; a qdisc written with
    {{ }} is the value of cells that render it to several labels, pfifo_200 and pfifo_1000)."""
    for axis, wanted in rule.items():
        label = c.label(axis)
        if label is None:
            return False
        coordinate = c.record.coordinates.get(axis)
        ok = any(str(w) in (label, slug(label)) or slug(str(w)) == slug(label) for w in wanted)
        ok = ok or any(p.matches(w) and (p.label == label or (coordinate and jsonable(p.value) == coordinate.value))
                       for axes in s.scenario.axes_list() for p in axes.get(axis, []) for w in wanted)
        if not ok:
            return False
    return True


def physics(c: CellResult) -> dict[str, float]:
    """The names a bound may use (scenario/expectations.py PHYSICS), for cell C."""
    config = c.record.config
    direction = config.flows[0].direction if config.flows else "up"
    names = {"rate_mbit": config.bottleneck.of(direction).rate_bps / 1e6,
             "rtt_ms": max((f.rtt_ms for f in config.flows), default=0.0), "flows": float(len(config.flows))}
    if c.metrics is not None and direction in c.metrics.capacity:
        names["capacity_mbit"] = c.metrics.capacity[direction].mean_mbit
    return names


def baseline_cells(s: ScenarioResult, c: CellResult, e: Expectation) -> list[CellResult]:
    """The cells E's baseline names for C: its values on the baseline's axes, C's labels on
    every other axis the scenario sweeps (their repetitions, all)."""
    base = e.baseline or {}
    others = [a for a in s.swept if a not in base]
    return [b for b in s.cells if b is not c and matches(s, b, {a: [v] for a, v in base.items()})
            and all(b.label(a) == c.label(a) for a in others)]


def _baseline(s: ScenarioResult, c: CellResult, e: Expectation, width: int) -> tuple[list[float] | None, str]:
    """Per value judged, the mean of the same metric over C's baseline cells; or None and why not."""
    cells = baseline_cells(s, c, e)
    valid = [b for b in cells if b.valid and b.metrics is not None and not mismeasured(b.flags, e.metric)]
    if not valid:
        said = "; ".join(f"{b.name}: {b.status}" for b in cells) or "no such cell in this run"
        return None, f"baseline ({', '.join(f'{a} {v}' for a, v in (e.baseline or {}).items())}): {said}"
    runs = [values(measure(e.metric), b.metrics) for b in valid if b.metrics is not None]
    if e.flow is not None:
        runs = [r[e.flow - 1: e.flow] or [None] for r in runs]
    means = [None if None in col else sum(col) / len(col) for col in zip(*runs)]
    if len(means) != width or None in means:
        return None, f"baseline {valid[0].name}: {e.metric}: no value"
    return [float(m) for m in means if m is not None], f" against {valid[0].name}" + (f" (n={len(valid)})" if len(valid) > 1 else "")


def _judge(s: ScenarioResult, c: CellResult, e: Expectation) -> Judgement:
    def verdict(ok: bool | None, detail: str) -> Judgement:
        return Judgement(s.name, c.name, e, ok, detail)

    if c.status in ("skipped", "interrupted"):  # never measured: neither met nor missed
        return verdict(None, f"{c.status}: {c.record.reason}")
    if c.damage:
        return verdict(False, f"{UNREADABLE}: {c.damage}")
    if not c.valid or c.metrics is None:
        return verdict(False, f"no valid result ({c.status}{': ' + '; '.join(c.invalid) if c.invalid else ''})")
    if doubted := mismeasured(c.flags, e.metric):  # neither a pass nor a miss of what was declared
        return verdict(None, f"measurement in doubt: {doubted[0]}")
    got = values(measure(e.metric), c.metrics)
    if e.flow is not None:
        got = got[e.flow - 1: e.flow] or [None]
    if not got or None in got:
        return verdict(False, f"{e.metric}: no value")
    bases: list[float | None] = [None] * len(got)
    against = ""
    if e.baseline:
        found, against = _baseline(s, c, e, len(got))
        if found is None:  # no contrast to judge against: neither met nor missed
            return verdict(None, against)
        bases = list(found)
    try:
        limits = [e.limit({**physics(c), **({BASELINE: b} if b is not None else {})}) for b in bases]
    except ValueError as err:  # the bound, with this cell's physics, is no finite number
        return verdict(False, f"bound: {err}")
    passed = all(OPERATORS[e.op](v, lim) for v, lim in zip(got, limits))  # type: ignore[arg-type]
    shown = ", ".join(f"{v:.4g}" for v in got)
    limit = ", ".join(f"{lim:.4g}" for lim in dict.fromkeys(limits))
    bound = f" ({e.bound})" if e.bound != limit else ""
    return verdict(passed, f"{e.metric} = {shown}, expected {e.op} {limit}{bound}{against}")


def write_junit(judgements: list[Judgement], path: Path, unreadable: dict[str, dict[str, str]] | None = None) -> None:
    """The verdicts, an error where a cell is unreadable (UNREADABLE: per scenario, cell
    → why, for cells whose record itself cannot be read)."""
    root = ET.Element("testsuites", name="fl expectations")
    lost = unreadable or {}
    for scenario in dict.fromkeys([*(j.scenario for j in judgements), *lost]):
        mine = [j for j in judgements if j.scenario == scenario]
        errors = [j for j in mine if j.detail.startswith(f"{UNREADABLE}: ")]
        suite = ET.SubElement(root, "testsuite", name=scenario, tests=str(len(mine) + len(lost.get(scenario, {}))),
                              failures=str(sum(j.ok is False for j in mine) - len(errors)),
                              errors=str(len(errors) + len(lost.get(scenario, {}))),
                              skipped=str(sum(j.ok is None for j in mine)))
        for cell, why in lost.get(scenario, {}).items():
            case = ET.SubElement(suite, "testcase", classname=f"{scenario}.{cell}", name="cell record")
            ET.SubElement(case, "error", message=why).text = why
        for j in mine:
            case = ET.SubElement(suite, "testcase", classname=f"{scenario}.{j.cell}", name=j.expectation.text)
            if j in errors:
                ET.SubElement(case, "error", message=j.detail).text = j.detail
            elif j.ok is False:
                ET.SubElement(case, "failure", message=j.detail).text = j.detail
            elif j.ok is None:
                ET.SubElement(case, "skipped", message=j.detail)
            else:
                ET.SubElement(case, "system-out").text = j.detail
    ET.indent(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
