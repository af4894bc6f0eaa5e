"""`fl compare A B`: two runs of the same scenarios, cell by cell and metric by metric.

Cells are matched by scenario and cell name (a repeated cell's runs, `-r1`, `-r2`, …,
are its repetitions); each metric's difference gets Welch's 95 % CI over them and a
verdict. Repetitions whose measurement fl doubts (a calibration flag, an impossible
figure) are left out of the statistics and listed. What differs between the runs' recorded configurations and provenance is
listed, and so are the cells only one run has.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .collect import CellResult, RunResult
from .measures import MEASURES, Measure, values
from .stats import Difference, compare

Key = tuple[str, str]  # scenario, cell name without its repetition


@dataclass(frozen=True)
class Row:
    scenario: str
    cell: str
    measure: Measure
    series: str  # "flow 1 (cubic)", or "" for a cell metric
    diff: Difference
    a_values: tuple[float, ...]  # per repetition
    b_values: tuple[float, ...]


@dataclass
class Comparison:
    a: RunResult
    b: RunResult
    rows: list[Row]
    matched: list[Key]
    only_a: list[Key]
    only_b: list[Key]
    config: list[tuple[str, str, str, int]] = field(default_factory=list)  # key, A, B, cells
    provenance: list[tuple[str, str, str]] = field(default_factory=list)  # key, A, B
    left_out: list[tuple[str, str, str, str]] = field(default_factory=list)  # run, scenario, cell, first doubt

    def verdicts(self, measure: str) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for r in self.rows:
            if r.measure.name == measure:
                out[r.diff.verdict] += 1
        return dict(out)

    def changed(self) -> list[Row]:
        return [r for r in self.rows if r.diff.verdict in ("higher", "lower")]


def base_name(c: CellResult) -> str:
    """The cell's name without the repetition suffix fl adds to repeated cells."""
    return c.name.removesuffix(f"-r{c.record.config.repetition}")


def groups(run: RunResult) -> dict[Key, list[CellResult]]:
    out: dict[Key, list[CellResult]] = defaultdict(list)
    for c in run.cells():
        out[(c.scenario, base_name(c))].append(c)
    return dict(out)


def compare_runs(a: RunResult, b: RunResult) -> Comparison:
    ga, gb = groups(a), groups(b)
    matched = [k for k in ga if k in gb]
    rows = [row for k in matched for row in _rows(k, ga[k], gb[k])]
    out = Comparison(a, b, rows, matched, [k for k in ga if k not in gb], [k for k in gb if k not in ga])
    out.config = config_differences([(ga[k], gb[k]) for k in matched])
    out.provenance = provenance_differences(a, b)
    out.left_out = [(run.name, c.scenario, c.name, c.mismeasured[0]) for run, g in ((a, ga), (b, gb))
                    for k in matched for c in g[k] if c.valid and c.mismeasured]
    out.left_out += [(run.name, s.name, name, f"unreadable: {why}") for run in (a, b) for s in run.scenarios
                     for name, why in s.findings()["unreadable"].items()]
    out.left_out += [(run.name, name, "", f"unreadable: {why}") for run in (a, b) for name, why in run.unreadable.items()]
    return out


def trusted(cells: list[CellResult]) -> list[CellResult]:
    """The repetitions whose measurement fl does not doubt (valid, and no calibration or
    impossible-figure flag): a path that did not behave as declared is no sample of it."""
    return [c for c in cells if c.valid and not c.mismeasured]


def _rows(key: Key, a: list[CellResult], b: list[CellResult]) -> list[Row]:
    va, vb = trusted(a), trusted(b)
    flows = max([len(c.metrics.flows) for c in va + vb if c.metrics] or [0])
    labels = _flow_labels(va + vb, flows)
    rows = []
    for m in MEASURES.values():
        for i, label in enumerate(labels if m.per_flow else [""]):
            xa, xb = _samples(m, va, i), _samples(m, vb, i)
            if xa or xb:
                rows.append(Row(key[0], key[1], m, label, compare(xa, xb, m.margin, m.floor), tuple(xa), tuple(xb)))
    return rows


def _flow_labels(cells: list[CellResult], flows: int) -> list[str]:
    first = next((c.metrics for c in cells if c.metrics and len(c.metrics.flows) == flows), None)
    return [f"flow {f.index} ({f.cc})" for f in first.flows] if first else []


def _samples(m: Measure, cells: list[CellResult], i: int) -> list[float]:
    out = []
    for c in cells:
        assert c.metrics is not None
        vs = values(m, c.metrics)
        if i < len(vs) and vs[i] is not None:
            out.append(float(vs[i]))  # type: ignore[arg-type]
    return out


def flatten(data: Any, prefix: str = "") -> dict[str, str]:
    """Nested mappings and lists as 'a.b[0].c' → value text."""
    if isinstance(data, dict):
        return {k: v for key, value in data.items() for k, v in flatten(value, f"{prefix}.{key}" if prefix else key).items()}
    if isinstance(data, list):
        return {k: v for i, value in enumerate(data) for k, v in flatten(value, f"{prefix}[{i}]").items()}
    return {prefix: "–" if data is None else str(data)}


def config_differences(pairs: list[tuple[list[CellResult], list[CellResult]]]) -> list[tuple[str, str, str, int]]:
    """Each configuration key whose value differs between matched cells, with the values
    and the number of cells where it does (repetition numbers aside)."""
    seen: dict[tuple[str, str, str], int] = defaultdict(int)
    for a, b in pairs:
        fa, fb = (flatten(cells[0].record.config.model_dump(mode="json", exclude={"repetition"})) for cells in (a, b))
        for k in sorted(set(fa) | set(fb)):
            if fa.get(k) != fb.get(k):
                seen[(k, fa.get(k, "–"), fb.get(k, "–"))] += 1
    return [(k, va, vb, n) for (k, va, vb), n in sorted(seen.items())]


#: Where the cells ran: what differs here explains a difference the configuration does not.
PROVENANCE_EXCLUDE = {"testbed_id", "testbed_label", "inventory"}


def provenance(run: RunResult) -> dict[str, str]:
    ran = [c.record for c in run.cells() if c.status != "skipped"]
    if not ran:
        return {}
    r = ran[-1]
    out = {"kernel": r.kernel, **flatten(r.fl.model_dump(mode="json"), "fl"),
           **flatten(r.backend.model_dump(mode="json", exclude=PROVENANCE_EXCLUDE), "backend"),
           **flatten(r.tools, "tools")}
    last = run.provenance.invocations[-1] if run.provenance.invocations else None
    if last is not None:
        out |= flatten(last.controller.model_dump(mode="json"), "controller")
    return out


def provenance_differences(a: RunResult, b: RunResult) -> list[tuple[str, str, str]]:
    pa, pb = provenance(a), provenance(b)
    return [(k, pa.get(k, "–"), pb.get(k, "–")) for k in sorted(set(pa) | set(pb)) if pa.get(k) != pb.get(k)]


def summary_lines(cmp: Comparison) -> list[str]:
    """The terminal summary: verdict counts per metric, every change, what differs."""
    lines = [f"{cmp.a.name} → {cmp.b.name}: {len(cmp.matched)} cells matched"
             + (f", {len(cmp.only_a)} only in {cmp.a.name}" if cmp.only_a else "")
             + (f", {len(cmp.only_b)} only in {cmp.b.name}" if cmp.only_b else "")]
    for m in MEASURES.values():
        counts = cmp.verdicts(m.name)
        if counts:
            lines.append(f"  {m.title}: " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    lines += [f"  {r.diff.verdict}: {r.scenario}/{r.cell} {r.series} {r.measure.title} {_num(r.diff.a)} → "
              f"{_num(r.diff.b)} {r.measure.unit} ({_num(r.diff.pct)} %)" for r in cmp.changed()]
    lines += [f"  configuration {k}: {va} → {vb} ({n} cells)" for k, va, vb, n in cmp.config]
    lines += [f"  provenance {k}: {va} → {vb}" for k, va, vb in cmp.provenance]
    lines += [f"  left out: {run}/{s}/{c} ({why})" for run, s, c, why in cmp.left_out]
    return lines


def _num(v: float | None) -> str:
    return "–" if v is None else f"{v:.4g}"


def output_dir(results: Path, a: str, b: str) -> Path:
    return results / f"compare-{a}-vs-{b}"
