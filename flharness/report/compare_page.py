"""The compare page: README.md and index.html in results/compare-…/ (pushable with
`fl push --run compare-…`), from templates/compare.md.j2, with a chart per scenario and
headline metric, the sides side by side."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from statistics import fmean
from typing import Any

from .. import REPO
from ..results import run_folder
from . import compare_chart
from .charts import draw_if_changed
from .compare import Comparison, Row, compared_text
from .index import environment, to_html
from .measures import MEASURES, Measure
from .stats import LEVEL

#: The metrics drawn as charts (every metric is in the tables).
CHARTED = ("goodput_mbit", "dss_mbit", "owd_p95_ms", "jain")


def write(cmp: Comparison, out: Path, template_dir: Path = REPO) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    charts = _charts(cmp, out / run_folder.CHARTS)
    text = environment(template_dir).get_template("compare.md.j2").render(_context(cmp, charts))
    (out / run_folder.INDEX).write_text(text)
    (out / run_folder.INDEX_HTML).write_text(to_html(text, f"fl compare: {cmp.title()}", template_dir))
    return out


def _by_scenario(rows: list[Row]) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        out[r.scenario].append(r)
    return dict(out)


def _charts(cmp: Comparison, out: Path) -> dict[str, list[dict[str, str]]]:
    names = [s.name for s in cmp.sides]
    charts: dict[str, list[dict[str, str]]] = defaultdict(list)
    for scenario, rows in _by_scenario(cmp.rows).items():
        for name in CHARTED:
            chosen = [r for r in rows if r.measure.name == name]
            if not chosen:
                continue
            title = f"{scenario}: {chosen[0].measure.title}, {' vs '.join(names)}"
            path = out / f"{scenario}_{name}.svg"
            data = [[r.cell, r.series, r.values, [d.verdict for d in r.diffs]] for r in chosen]
            draw_if_changed(path, {"rows": data, "names": names},
                            lambda p, c=chosen, t=title: compare_chart.draw(c, names, t, p))
            charts[scenario].append({"title": title, "path": f"charts/{path.name}"})
    return dict(charts)


def lines(r: Row, names: list[str]) -> list[dict[str, Any]]:
    """A row's table lines: the baseline's mean and n, then each side's with its
    difference from the baseline."""
    first = {"side": names[0], "mean": fmean(r.values[0]) if r.values[0] else None, "n": len(r.values[0]), "diff": None}
    return [first] + [{"side": name, "mean": d.b, "n": d.n_b, "diff": d} for name, d in zip(names[1:], r.diffs)]


def _context(cmp: Comparison, charts: dict[str, list[dict[str, str]]]) -> dict[str, Any]:
    names = [s.name for s in cmp.sides]
    return {"title": cmp.title(), "names": names, "baseline": names[0], "level": round(100 * LEVEL), "cmp": cmp,
            "margins": margins(), "compared": [(s.name, compared_text(cmp, s.name)) for s in cmp.others],
            "axes": cmp.matching.axes, "by": cmp.matching.by,
            "scenarios": [{"name": s, "charts": charts.get(s, []), "cells": len({r.cell for r in rows}),
                           "rows": [(r, lines(r, names)) for r in rows]}
                          for s, rows in _by_scenario(cmp.rows).items()]}


def margins() -> str:
    """Each metric's practical margin, as the page states it."""
    def one(m: Measure) -> str:
        share = f"{100 * m.margin:g} % of the baseline" if m.margin else ""
        floor = f"{m.floor:g}{' ' + m.unit if m.unit else ''}"
        return f"{m.title}: " + (f"{share}, at least {floor}" if share else floor)
    return "; ".join(one(m) for m in MEASURES.values())
