"""The compare page: README.md and index.html in results/compare-A-vs-B/ (pushable with
`fl push --run compare-A-vs-B`), from templates/compare.md.j2, with a paired chart per
scenario and headline metric."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from .. import REPO
from . import compare_chart
from .charts import draw_if_changed
from .compare import Comparison, Row
from .index import environment, to_html
from .measures import MEASURES
from .stats import LEVEL

#: The metrics drawn as paired charts (every metric is in the tables).
CHARTED = ("goodput_mbit", "dss_mbit", "owd_p95_ms", "jain")


def write(cmp: Comparison, out: Path, template_dir: Path = REPO) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    charts = _charts(cmp, out / "charts")
    text = environment(template_dir).get_template("compare.md.j2").render(_context(cmp, charts))
    (out / "README.md").write_text(text)
    (out / "index.html").write_text(to_html(text, f"fl compare: {cmp.a.name} → {cmp.b.name}", template_dir))
    return out


def _by_scenario(rows: list[Row]) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        out[r.scenario].append(r)
    return dict(out)


def _charts(cmp: Comparison, out: Path) -> dict[str, list[dict[str, str]]]:
    charts: dict[str, list[dict[str, str]]] = defaultdict(list)
    for scenario, rows in _by_scenario(cmp.rows).items():
        for name in CHARTED:
            chosen = [r for r in rows if r.measure.name == name]
            if not chosen:
                continue
            title = f"{scenario}: {chosen[0].measure.title}, {cmp.a.name} vs {cmp.b.name}"
            path = out / f"{scenario}_{name}.svg"
            data = [[r.cell, r.series, r.a_values, r.b_values, r.diff.verdict] for r in chosen]
            draw_if_changed(path, {"rows": data, "names": [cmp.a.name, cmp.b.name]},
                            lambda p, c=chosen, t=title: compare_chart.draw(c, (cmp.a.name, cmp.b.name), t, p))
            charts[scenario].append({"title": title, "path": f"charts/{path.name}"})
    return dict(charts)


def _context(cmp: Comparison, charts: dict[str, list[dict[str, str]]]) -> dict[str, Any]:
    return {"a": cmp.a.name, "b": cmp.b.name, "level": round(100 * LEVEL), "cmp": cmp, "margins": margins(),
            "scenarios": [{"name": s, "rows": rows, "charts": charts.get(s, []),
                           "cells": len({r.cell for r in rows})}
                          for s, rows in _by_scenario(cmp.rows).items()]}


def margins() -> str:
    """Each metric's practical margin, as the page states it."""
    def one(m) -> str:
        share = f"{100 * m.margin:g} % of A" if m.margin else ""
        floor = f"{m.floor:g}{' ' + m.unit if m.unit else ''}"
        return f"{m.title}: " + (f"{share}, at least {floor}" if share else floor)
    return "; ".join(one(m) for m in MEASURES.values())
