"""`fl compare`: runs side by side (or the values of one axis within a run), cell by cell
and metric by metric, each side against the first, the baseline.

Cells are matched as report/matching.py says (scenario and key axes; a cell's
repetitions are its samples). Each metric's difference from the baseline gets Welch's
95 % CI and a verdict. Repetitions whose measurement fl doubts (a calibration flag, an
impossible figure) are left out of the statistics and listed. What differs between
matched cells is stated: first what is compared (a label on an axis outside the key,
such as a fixed rate, that differs in every matched cell), then the rest of the
recorded configuration and the runs' provenance; cells only some sides have are listed.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..units import significant
from .collect import CellResult, RunResult
from .matching import Key, Matching, Side, differing_coordinates
from .measures import MEASURES, Measure, values
from .stats import Difference, compare

#: One difference between a side and the baseline: (side, what, baseline's, the side's, cells).
Change = tuple[str, str, str, str, int]


@dataclass(frozen=True)
class Row:
    key: Key
    measure: Measure
    series: str  # "flow 1 (cubic)", or "" for a cell metric
    values: tuple[tuple[float, ...], ...]  # per side: one value per trusted repetition
    diffs: tuple[Difference, ...]  # per side after the baseline: against it

    @property
    def scenario(self) -> str:
        return self.key.scenario

    @property
    def cell(self) -> str:
        return self.key.cell


@dataclass
class Comparison:
    sides: list[Side]
    matching: Matching
    rows: list[Row]
    matched: list[Key]  # the baseline has them, and another side
    unmatched: list[tuple[Key, list[str]]]  # the rest, with the sides that have them
    compared: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)  # side → (axis, baseline, side)
    coordinates: list[Change] = field(default_factory=list)  # other labels that differ, in some cells
    config: list[Change] = field(default_factory=list)
    provenance: list[Change] = field(default_factory=list)
    left_out: list[tuple[str, str, str, str]] = field(default_factory=list)  # side, scenario, cell, first doubt

    @property
    def baseline(self) -> Side:
        return self.sides[0]

    @property
    def others(self) -> list[Side]:
        return self.sides[1:]

    def verdicts(self, side: int, measure: str) -> dict[str, int]:
        """Verdict counts of side SIDE (1 on: the baseline has none) on one metric."""
        return dict(Counter(r.diffs[side - 1].verdict for r in self.rows if r.measure.name == measure))

    def changed(self) -> list[tuple[Row, int]]:
        """(row, side) of every difference judged higher or lower."""
        return [(r, i + 1) for r in self.rows for i, d in enumerate(r.diffs) if d.verdict in ("higher", "lower")]

    def title(self) -> str:
        if self.matching.by:
            return f"{self.matching.by} in {self.baseline.run.name}: " + " → ".join(s.value for s in self.sides)
        return f"{self.baseline.name} → {', '.join(s.name for s in self.others)}"


def compare_sides(sides: list[Side], matching: Matching) -> Comparison:
    base, others = sides[0], sides[1:]
    assert base.groups is not None and all(s.groups is not None for s in others)
    keys = list(dict.fromkeys(k for s in sides for k in s.groups or {}))
    matched = [k for k in keys if k in base.groups and any(k in (s.groups or {}) for s in others)]
    out = Comparison(sides, matching, [row for k in matched for row in _rows(k, [(s.groups or {}).get(k, []) for s in sides])],
                     matched, [(k, [s.name for s in sides if k in (s.groups or {})]) for k in keys if k not in matched])
    for side in others:
        assert side.groups is not None  # as every side's, above
        pairs = [(base.groups[k], side.groups[k]) for k in matched if k in (side.groups or {})]
        _coordinate_changes(out, side.name, pairs, matching)
        out.config += [(side.name, k, va, vb, n) for k, va, vb, n in config_differences(pairs)]
        if side.run is not base.run:
            out.provenance += [(side.name, k, va, vb, 0) for k, va, vb in provenance_differences(base.run, side.run)]
    out.left_out = [(s.name, c.scenario, c.name, str(c.mismeasured[0])) for s in sides
                    for k in matched for c in (s.groups or {}).get(k, []) if c.valid and c.mismeasured]
    runs = list({id(s.run): s.run for s in sides}.values())
    out.left_out += [(run.name, sc.name, name, f"unreadable: {why}") for run in runs for sc in run.scenarios
                     for name, why in sc.findings()["unreadable"].items()]
    out.left_out += [(run.name, name, "", f"unreadable: {why}") for run in runs for name, why in run.unreadable.items()]
    return out


def _coordinate_changes(out: Comparison, side: str, pairs: list[tuple[list[CellResult], list[CellResult]]],
                        matching: Matching) -> None:
    """Labels outside the key that differ: an axis on which every matched cell differs is
    what is compared (its labels joined, a qdisc's rendered per rate, say); the others are
    listed with their cells."""
    by_axis: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for a, b in pairs:
        for axis, va, vb in differing_coordinates(a, b, matching.axes[a[0].scenario]):
            by_axis[axis].append((va, vb))
    out.compared[side] = []
    for axis, changes in by_axis.items():
        if len(changes) == len(pairs):
            va, vb = ("/".join(dict.fromkeys(v[i] for v in changes)) for i in (0, 1))
            out.compared[side].append((axis, va, vb))
        else:
            out.coordinates += [(side, axis, va, vb, n) for (va, vb), n in Counter(changes).items()]


def trusted(cells: list[CellResult]) -> list[CellResult]:
    """The repetitions whose measurement fl does not doubt (valid, and no calibration or
    impossible-figure flag): a path that did not behave as declared is no sample of it."""
    return [c for c in cells if c.valid and not c.mismeasured]


def _rows(key: Key, per_side: list[list[CellResult]]) -> list[Row]:
    kept = [trusted(cells) for cells in per_side]
    labels = _flow_labels(kept)
    rows = []
    for m in MEASURES.values():
        for i, label in enumerate(labels if m.per_flow else [""]):
            samples = [_samples(m, cells, i) for cells in kept]
            if any(samples):
                diffs = tuple(compare(samples[0], s, m.margin, m.floor) for s in samples[1:])
                rows.append(Row(key, m, label, tuple(tuple(s) for s in samples), diffs))
    return rows


def _flow_labels(per_side: list[list[CellResult]]) -> list[str]:
    """flow N, with its congestion control where every side's flow N has the same."""
    firsts = [next((c.metrics for c in cells if c.metrics), None) for cells in per_side]
    flows = max((len(m.flows) for m in firsts if m), default=0)
    labels = []
    for i in range(flows):
        ccs = {m.flows[i].shown_cc for m in firsts if m and i < len(m.flows)}
        labels.append(f"flow {i + 1}" + (f" ({ccs.pop()})" if len(ccs) == 1 else ""))
    return labels


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


def provenance(result: RunResult) -> dict[str, str]:
    ran = [c.record for c in result.cells() if c.status != "skipped"]
    if not ran:
        return {}
    r = ran[-1]
    out = {"kernel": r.kernel, **flatten(r.fl.model_dump(mode="json"), "fl"),
           **flatten(r.backend.model_dump(mode="json", exclude=PROVENANCE_EXCLUDE), "backend"),
           **flatten(r.tools, "tools")}
    last = result.provenance.invocations[-1] if result.provenance.invocations else None
    if last is not None:
        out |= flatten(last.controller.model_dump(mode="json"), "controller")
    return out


def provenance_differences(a: RunResult, b: RunResult) -> list[tuple[str, str, str]]:
    pa, pb = provenance(a), provenance(b)
    return [(k, pa.get(k, "–"), pb.get(k, "–")) for k in sorted(set(pa) | set(pb)) if pa.get(k) != pb.get(k)]


def compared_text(cmp: Comparison, side: str) -> str:
    """What SIDE changes against the baseline in every matched cell: 'rate 10mbit → 20mbit'."""
    return "; ".join(f"{axis} {va} → {vb}" for axis, va, vb in cmp.compared.get(side, [])) or "nothing on the axes"


def summary_lines(cmp: Comparison) -> list[str]:
    """The terminal summary: what is compared, verdict counts per side and metric, every
    change, what else differs."""
    unmatched = f", {len(cmp.unmatched)} not matched" if cmp.unmatched else ""
    lines = [f"{cmp.title()}: {len(cmp.matched)} cells matched{unmatched}"]
    lines += [f"  compared: {s.name}: {compared_text(cmp, s.name)}" for s in cmp.others]
    for m in MEASURES.values():
        counts = ["; ".join(f"{n} {v}" for v, n in sorted(cmp.verdicts(i, m.name).items())) for i in range(1, len(cmp.sides))]
        if any(counts):
            lines.append(f"  {m.title}: " + "; ".join(f"{s.name}: {c}" for s, c in zip(cmp.others, counts) if c))
    lines += [f"  {r.diffs[i - 1].verdict}: {r.scenario}/{r.cell} {r.series} {r.measure.title} {_num(r.diffs[i - 1].a)} → "
              f"{_num(r.diffs[i - 1].b)} {r.measure.unit} ({_num(r.diffs[i - 1].pct)} %) in {cmp.sides[i].name}"
              for r, i in cmp.changed()]
    lines += [f"  labels {what}: {va} → {vb} in {side} ({n} cells)" for side, what, va, vb, n in cmp.coordinates]
    lines += [f"  configuration {what}: {va} → {vb} in {side} ({n} cells)" for side, what, va, vb, n in cmp.config]
    lines += [f"  provenance {what}: {va} → {vb} in {side}" for side, what, va, vb, _ in cmp.provenance]
    lines += [f"  not matched: {k.scenario}/{k.cell} (only in {', '.join(names)})" for k, names in cmp.unmatched]
    lines += [f"  left out: {side}/{s}/{c} ({why})" for side, s, c, why in cmp.left_out]
    return lines


def _num(v: float | None) -> str:
    return "–" if v is None else significant(v, 4)


def output_dir(results: Path, sides: list[Side], by: str | None) -> Path:
    if by:
        return results / f"compare-{sides[0].run.name}-by-{by}"
    return results / ("compare-" + "-vs-".join(s.name for s in sides))
