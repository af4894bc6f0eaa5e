"""Reproduction reports: the published values of a scenario's reference file
(scenario/reference.py) beside what the run measured, per row, metric and flow:
published | reproduced | Δ | verdict, on `<scenario>/reproduction.md` and `.html`.

The reproduced value is the mean over the row's cells (its repetitions); it agrees when
it is within the reference's tolerance of the published one. Rows whose cells did not
run say why (the kernel's skip reason, or that the run has no such cell). Rows where the
source gives words, not numbers (`says:`), are set beside the values of their `shows:`
metrics, without a verdict (the scenario's claims judge them)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any, Literal

from .. import REPO
from ..scenario.reference import Reference, Row, load_reference, tolerance
from ..scenario.values import slug
from ..units import significant
from .collect import CellResult, ScenarioResult
from .index import environment, to_html, write_if_changed
from .measures import measure, series, values

Verdict = Literal["agrees", "differs", "not run", "missing", "no value"]
MEASURED: tuple[Verdict, ...] = ("agrees", "differs", "no value")  # lines with cells that ran
NOT_IN_RUN = "no such cell in this run"
PAGE = "reproduction"


@dataclass(frozen=True)
class Line:
    row: str  # the row's cell key, as written
    metric: str
    series: str  # "flow 2", "" for a cell metric
    published: float
    reproduced: float | None
    n: int  # cells (repetitions) averaged
    tolerance: float
    verdict: Verdict
    why: str = ""  # not run: why; missing: the reference's reason; else where the published value is from
    condition: str = ""  # what sets these cells apart from the row's others: "qdisc dualpi2(mainline)"

    @property
    def delta(self) -> float | None:
        return None if self.reproduced is None else self.reproduced - self.published

    @property
    def pct(self) -> float | None:
        d = self.delta
        return None if d is None or not self.published else 100 * d / abs(self.published)


@dataclass(frozen=True)
class Said:
    """A row the source states in words: what it says, and what the run measured for it."""

    row: str
    says: str
    note: str
    measured: list[str]  # "D_SS (Mbit/s): flow 1 (prague) 40.1, flow 2 (cubic) 5.2", one per metric shown
    n: int  # cells (repetitions) averaged
    why: str = ""  # why nothing was measured
    condition: str = ""  # as Line's


def stated(s: ScenarioResult, ref: Reference) -> list[Said]:
    """The rows with `says:`, each with the mean of its `shows:` metrics over its valid cells."""
    out = []
    for row in (r for r in ref.rows if r.says):
        for condition, cells in conditions(s, row).items():
            valid = _valid(cells)
            runs = [c.metrics for c in valid]
            shown = [_shown(name, runs) for name in row.shows] if runs else []
            why = row.missing or ("" if valid else _why_not(cells))
            out.append(Said(row.key, row.says or "", row.note or "", shown, len(valid), why, condition))
    return out


def beside(s: ScenarioResult, ref: Reference) -> list[Said]:
    """The run's cells no row names (schemes a scenario runs beside the source's), grouped
    by their labels on the axes the rows name, each with the reference's metrics: the
    mean over its valid cells."""
    axes = list(dict.fromkeys(a for row in ref.rows for a in row.cell))
    groups: dict[str, list[CellResult]] = {}
    for c in s.cells:
        if not any(matches(c.label, row, lambda axis, c=c: s.variant_of(c, axis)) for row in ref.rows):
            key = ", ".join(f"{a} {label}" for a in axes if (label := c.label(a)) is not None)
            groups.setdefault(key, []).append(c)
    out = []
    for key, cells in groups.items():
        runs = [c.metrics for c in _valid(cells)]
        shown = [_shown(name, runs) for name in ref.tolerance] if runs else []
        out.append(Said(key, "", "", shown, len(runs), "" if runs else _why_not(cells)))
    return out


def _shown(name: str, runs: list[Any]) -> str:
    m = measure(name)
    keys = list(series(m, runs[0]))
    means = [fmean(col) if None not in col else None for col in zip(*(values(m, r) for r in runs))]
    unit = f" ({m.unit})" if m.unit else ""
    return f"{m.title}{unit}: " + ", ".join(f"{k} {significant(v)}".strip() if v is not None else f"{k} –".strip()
                                            for k, v in zip(keys, means))


def conditions(s: ScenarioResult, row: Row) -> dict[str, list[CellResult]]:
    """ROW's cells in the run by condition, what tells them apart beyond the row's own
    values: a variant's label where the row names the variants' name (dualpi2: its step
    rules), and their labels on the axes the row does not name, where those differ (a
    module parameter swept beside the reference's axes). One condition, '', for cells
    alike (repetitions)."""
    cells = [c for c in s.cells if matches(c.label, row, lambda axis, c=c: s.variant_of(c, axis))]
    unnamed = [a for a in s.swept if a not in row.cell]
    differ = len({tuple(c.label(a) for a in unnamed) for c in cells}) > 1
    out: dict[str, list[CellResult]] = {}
    for c in cells:
        parts = [(a, c.label(a)) for a, want in row.cell.items() if slug(c.label(a) or "") != slug(want)]
        parts += [(a, c.label(a)) for a in unnamed] if differ else []
        out.setdefault(", ".join(f"{a} {label}" for a, label in parts), []).append(c)
    return out or {"": []}


def _valid(cells: list[CellResult]) -> list[CellResult]:
    return [c for c in cells if c.valid and c.metrics]


def matches(label_of: Any, row: Row, variant_of: Any = lambda axis: None) -> bool:
    """Whether a cell (LABEL_OF: axis → its label or None; VARIANT_OF: axis → the name
    its value is a variant of, or None) is one of ROW's."""
    return all((label := label_of(axis)) is not None and (slug(label) == slug(want) or variant_of(axis) == want)
               for axis, want in row.cell.items())


def reproduce(s: ScenarioResult, ref: Reference) -> list[Line]:
    return [line for row in ref.rows for condition, cells in conditions(s, row).items()
            for line in _row(ref, row, cells, condition)]


def _row(ref: Reference, row: Row, cells: list[CellResult], condition: str) -> list[Line]:
    valid = _valid(cells)
    lines = []
    for name, (published, source) in row.published().items():
        m = measure(name)
        runs = [values(m, c.metrics) for c in valid if c.metrics]
        got = [fmean(col) if None not in col else None for col in zip(*runs)]
        if row.order == "any":
            published, got = sorted(published, reverse=True), sorted(got, key=lambda v: -(v or 0))
        for i, pub in enumerate(published):
            value = got[i] if i < len(got) else None
            verdict, why = _verdict(row, cells, valid, value, abs(value - pub) if value is not None else 0,
                                    tolerance(ref.tolerance[name], pub), source)
            lines.append(Line(row.key, name, f"flow {i + 1}" if m.per_flow else "", pub, value, len(valid),
                              tolerance(ref.tolerance[name], pub), verdict, why, condition))
    return lines


def _verdict(row: Row, cells: list[CellResult], valid: list[CellResult], value: float | None, off: float,
             tol: float, source: str) -> tuple[Verdict, str]:
    if row.missing:
        return "missing", row.missing
    if not valid:
        return "not run", _why_not(cells)
    if value is None:
        return "no value", source
    return ("agrees" if off <= tol else "differs"), source or row.note or ""


def _why_not(cells: list[CellResult]) -> str:
    if not cells:
        return NOT_IN_RUN
    return "; ".join(dict.fromkeys((f"unreadable: {c.damage}" if c.damage else c.record.reason or c.status) for c in cells))


def counts(lines: list[Line]) -> dict[str, int]:
    """Verdict → number of lines, in the page's order."""
    order = ("agrees", "differs", "no value", "not run", "missing")
    return {v: n for v in order if (n := sum(line.verdict == v for line in lines))}


def by_condition(lines: list[Line]) -> dict[str, dict[str, int]]:
    """Per condition of the measured lines, their counts; empty where every line is of one
    condition, ''."""
    names = list(dict.fromkeys(line.condition for line in lines if line.verdict in MEASURED))
    if names in ([], [""]):
        return {}
    return {name or "other": counts([line for line in lines if line.condition == name]) for name in names}


def write_page(s: ScenarioResult, template_dir: Path = REPO) -> dict[str, Any] | None:
    """Write the scenario's reproduction page (if it names a reference); its summary for the index."""
    if not s.scenario.reference:
        return None
    ref = load_reference(s.scenario.reference)
    lines = reproduce(s, ref)
    said, besides = stated(s, ref), beside(s, ref)
    summary = {"document": ref.document, "address": ref.address, "section": ref.source.get("section", ""),
               "counts": counts(lines) | ({"stated in words": len(said)} if said else {})
               | ({"rows beside the source's": len(besides)} if besides else {}),
               "by_condition": by_condition(lines), "href": f"{s.name}/{PAGE}.html", "rows": len(ref.rows)}
    measured = [line for line in lines if line.verdict in MEASURED]
    context = {"scenario": s.name, "ref": ref, "name": s.scenario.reference, "summary": summary,
               "lines": sorted(measured, key=lambda line: line.verdict != "differs"), "metrics": _metrics(ref),
               "not_run": unmeasured(lines, "not run"), "missing": unmeasured(lines, "missing"), "said": said,
               "beside": besides}
    text = environment(template_dir).get_template(f"{PAGE}.md.j2").render(context)
    write_if_changed(s.dir / f"{PAGE}.md", text)
    write_if_changed(s.dir / f"{PAGE}.html", to_html(text, f"fl reproduction: {s.name}", template_dir))
    return summary


def unmeasured(lines: list[Line], verdict: Verdict) -> list[dict[str, str]]:
    """The rows whose lines have VERDICT, one entry each: its key, what was published, and why."""
    rows: dict[str, dict[str, Any]] = {}
    for line in lines:
        if line.verdict == verdict:
            row = rows.setdefault(line.row, {"row": line.row, "why": line.why, "published": {}})
            row["published"].setdefault(line.metric, []).append(f"{line.published:g}")
    return [{**r, "published": "; ".join(f"{m} {' / '.join(v)}" for m, v in r["published"].items())}
            for r in sorted(rows.values(), key=lambda r: r["why"] == NOT_IN_RUN)]


def _metrics(ref: Reference) -> list[dict[str, str]]:
    """Each published metric: the source's definition, fl's, and the tolerance."""
    names = dict.fromkeys(k for row in ref.rows for k in [*row.published(), *row.shows])
    return [{"name": k, "title": measure(k).title, "unit": measure(k).unit,
             "published": ref.definition(k) or "in words only (no number)", "fl": measure(k).definition,
             "tolerance": str(ref.tolerance.get(k, "–"))} for k in names]

