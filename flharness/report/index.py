"""The results index: README.md rendered from the user-editable README.md.j2 (macros in
templates/), and index.html with the same content through a Markdown library. Links
are relative to the run folder, so it works wherever the folder is copied."""
from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import markdown
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import escape

from .. import REPO
from ..hosts import ENDPOINTS
from ..results import cell_folder
from ..results.cell_folder import capture, flent_data
from .cell_provenance import cell_provenance
from .collect import CellResult, RunResult, ScenarioResult
from .expect import Judgement, judge
from .findings import key_findings
from .host_settings import host_settings
from .plots import plot_path
from .tables import fairness_table, per_cc_table, probe_table, signals_table, udp_table, video_table

CELL_FILES = (("plot", None), ("queue", "{cell}_queue.svg"), ("one-way delay", "{cell}_owd.svg"),
              ("video and probe", "{cell}_video.svg"),
              *((capture(h, compressed=False), capture(h)) for h in ENDPOINTS),
              ("teardown", cell_folder.TEARDOWN_LOG), ("setup", cell_folder.SETUP_LOG), ("data", flent_data("{cell}")),
              ("metrics", cell_folder.METRICS))


def environment(template_dir: Path = REPO) -> Environment:
    env = Environment(loader=FileSystemLoader([str(template_dir), str(template_dir / "templates")]),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                      keep_trailing_newline=True)
    env.filters["cell"] = table_safe
    env.filters["verdicts"] = counted_verdicts
    env.filters["num"] = lambda v, digits=2: "–" if v is None else f"{v:.{digits}f}"
    env.filters["date"] = lambda t: "?" if t is None else datetime.datetime.fromtimestamp(
        t, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return env


def counted_verdicts(counts: dict[str, int]) -> str:
    """A reproduction's verdicts with their counts, as a sentence says them: '2 agree, 1
    differs, 2 not run'."""
    plural = {"agrees": "agree", "differs": "differ"}
    return ", ".join(f"{n} {v if n == 1 else plural.get(v, v)}" for v, n in counts.items())


def table_safe(value: Any) -> str:
    """Text for a Markdown table cell: HTML-escaped (the Markdown converter passes HTML
    through), pipes escaped, on one line; nothing is '–'."""
    if value is None or value == "":
        return "–"
    return str(escape(str(value))).replace("|", "\\|").replace("\n", " ")


def render(result: RunResult, charts: dict[str, list[dict[str, str]]], template_dir: Path = REPO,
           judgements: list[Judgement] | None = None, reproductions: dict[str, Any] | None = None) -> str:
    judged = judgements if judgements is not None else [j for s in result.scenarios for j in judge(s)]
    context = {"run": result, "host_settings": host_settings(result), "cell_provenance": cell_provenance(result),
               "key_findings": key_findings(result, judged),
               "cell_links": cell_links(result), "scenarios": [
        {**_scenario(s, charts.get(s.name, []), [j for j in judged if j.scenario == s.name]),
         "reproduction": (reproductions or {}).get(s.name)} for s in result.scenarios]}
    return environment(template_dir).get_template("README.md.j2").render(context)


def _scenario(s: ScenarioResult, charts: list[dict[str, str]], judged: list[Judgement]) -> dict[str, Any]:
    fair = fairness_table(s)
    if fair:
        by_name = {c.name: c for c in s.cells}
        for row in fair["rows"]:
            row["link"] = _href(s, by_name[row["cell"]], plot_path(by_name[row["cell"]]).name)
    counts = s.status_counts()
    findings = {kind: list(by_cell.items()) for kind, by_cell in s.findings().items()}
    return {
        "name": s.name, "description": s.scenario.description, "repetitions": _runs(s),
        "fairness": fair, "per_cc": per_cc_table(s), "udp": udp_table(s), "video": video_table(s), "probe": probe_table(s),
        "signals": signals_table(s),
        "charts": charts, "cells": [_cell(s, c, [j for j in judged if j.cell == c.name]) for c in s.cells],
        "expectations": judged, "expect_counts": expect_counts(judged),
        "counts": f"{len(s.cells) + len(s.unreadable)} cells: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())),
        **findings,
    }


def cell_links(result: RunResult) -> dict[str, str]:
    """"SCENARIO/CELL" → the cell's figure (Flent's plot), for pages that name cells."""
    return {f"{s.name}/{c.name}": _href(s, c, plot_path(c).name) for s in result.scenarios for c in s.cells
            if (c.dir / plot_path(c).name).is_file()}


def _runs(s: ScenarioResult) -> int:
    """How many times each cell ran: the scenario's repetitions, or 0 where its
    sub-matrices repeat their cells differently (each table row says its own n)."""
    counts = set(s.scenario.repetitions_list())
    return counts.pop() if len(counts) == 1 else 0


def expect_counts(judged: list[Judgement]) -> str:
    met, missed = sum(j.ok is True for j in judged), sum(j.ok is False for j in judged)
    return f"{met} met, {missed} missed, {len(judged) - met - missed} not judged"


def _expect_mark(judged: list[Judgement]) -> str:
    """✔ or ✘ with the counts, for a cell's row; '' where no expectation selects it."""
    if not judged:
        return ""
    missed = sum(j.ok is False for j in judged)
    if all(j.ok is None for j in judged):
        return "not judged"
    return f"✘ {missed} of {len(judged)} missed" if missed else f"✔ {len(judged)}"


def _cell(s: ScenarioResult, c: CellResult, judged: list[Judgement]) -> dict[str, Any]:
    m = c.metrics
    means = [f.mean_mbit for f in (m.flows if m else []) if f.mean_mbit is not None]
    loaded = m.ping_ms.loaded if m and m.ping_ms else None
    links = []
    for title, pattern in CELL_FILES:
        name = plot_path(c).name if pattern is None else pattern.format(cell=c.name)
        if (c.dir / name).is_file():
            links.append({"title": title, "href": _href(s, c, name), "figure": name.endswith(".svg")})
    seen = c.record.checks.calibration.effects if c.record.checks.calibration else []
    return {"name": c.name, "status": c.status, "valid": c.valid, "flagged": bool(c.flags), "goodput": sum(means) if means else None,
            "ping_p99": loaded.p99 if loaded else None, "links": links,
            "effects": f"{sum(e.ok for e in seen)} of {len(seen)}" if seen else "none declared",
            "expect": _expect_mark(judged)}


def _href(s: ScenarioResult, c: CellResult, name: str) -> str:
    return f"{s.name}/{c.dir.name}/{name}"


def write_if_changed(path: Path, text: str) -> None:
    """Write TEXT to PATH atomically, and only if it differs (a second `fl plot` writes nothing)."""
    if not path.is_file() or path.read_text() != text:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text)
        tmp.replace(path)


def to_html(md_text: str, title: str, template_dir: Path = REPO) -> str:
    body = markdown.markdown(md_text, extensions=["tables"], output_format="html")
    return environment(template_dir).get_template("index.html.j2").render(title=title, body=body)
