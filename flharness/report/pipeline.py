"""The `fl plot` pipeline: collect (metrics) → per-cell plots → charts → dataset →
reproduction pages → index."""
from __future__ import annotations

import logging
import time
from pathlib import Path

from .. import REPO, log
from ..results import run_folder
from .charts import scenario_charts
from .collect import collect
from .dataset import rows, write_csv, write_summary
from .expect import judge, write_junit
from .index import expect_counts, render, to_html, write_if_changed
from .owd_plot import draw_owd_plots
from .plots import draw_cell_plots
from .queue_plot import draw_queue_plots
from .reproduction import write_page
from .video_plot import draw_video_plots

LOG = logging.getLogger(__name__)


def build(run_dir: Path, workers: int | None = None, template_dir: Path = REPO, junit: Path | None = None,
          strict: bool = False) -> int:
    """Exit status 1 when a plot failed or a cell was unreadable, or with STRICT when an
    expectation was missed."""
    if not (run_dir / run_folder.RUN_RECORD).is_file():
        return _build(run_dir, workers, template_dir, junit, strict)  # collect says what is wrong
    with log.debug_log(run_dir):
        return _build(run_dir, workers, template_dir, junit, strict)


def _build(run_dir: Path, workers: int | None, template_dir: Path, junit: Path | None, strict: bool) -> int:
    started = time.monotonic()
    LOG.debug("fl plot %s", run_dir)
    run = collect(run_dir, workers)
    LOG.debug("collected %d cells (metrics) in %.1f s", len(run.cells()), time.monotonic() - started)
    judged = [j for s in run.scenarios for j in judge(s)]
    if junit is not None:
        write_junit(judged, junit, {s.name: s.unreadable for s in run.scenarios if s.unreadable})
    counts = draw_cell_plots(run.scenarios, workers)
    LOG.debug("Flent plots: %s (%.1f s)", counts, time.monotonic() - started)
    queues = draw_queue_plots(run.scenarios)
    owds = draw_owd_plots(run.scenarios, workers)
    videos = draw_video_plots(run.scenarios)
    LOG.debug("queue, one-way delay and video plots: %s, %s, %s (%.1f s)", queues, owds, videos, time.monotonic() - started)
    charts = {s.name: scenario_charts(s, s.dir / run_folder.CHARTS) for s in run.scenarios}
    write_csv(rows(run), run_dir / run_folder.DATASET)
    write_summary(run, run_dir / run_folder.SUMMARY)
    reproductions = {s.name: summary for s in run.scenarios if (summary := write_page(s, template_dir))}
    text = render(run, charts, template_dir, judged, reproductions)
    write_if_changed(run_dir / run_folder.INDEX, text)
    write_if_changed(run_dir / run_folder.INDEX_HTML, to_html(text, f"fl results: {run.name}", template_dir))
    cells = run.cells()
    invalid = sum(len(s.findings()["invalid"]) for s in run.scenarios)
    flagged = sum(len(s.findings()["flagged"]) for s in run.scenarios)
    unreadable = run.unreadable_count()
    for where, why in [*run.unreadable.items(), *((f"{s.name}/{n}", w) for s in run.scenarios
                                                   for n, w in s.findings()["unreadable"].items())]:
        LOG.error(f"unreadable: {where}: {why}")
    LOG.info(f"{run_dir}: {len(cells)} cells ({invalid} invalid, {flagged} flagged, {unreadable} unreadable); plots: {counts['drawn']} drawn, "
          f"{counts['current']} current, {counts['failed']} failed; queue plots: {queues['drawn']} drawn, "
          f"{queues['current']} current; one-way delay plots: {owds['drawn']} drawn, {owds['current']} current; "
          f"index: README.md, index.html "
          f"({time.monotonic() - started:.1f} s)")
    if judged:
        LOG.info(f"expectations: {expect_counts(judged)}" + (f"; JUnit XML: {junit}" if junit else ""))
        for j in judged:
            if j.ok is False:
                LOG.info(f"  ✘ {j.scenario}/{j.cell}: {j.expectation.text}: {j.detail}")
    missed = strict and any(j.ok is False for j in judged)
    return 1 if counts["failed"] or missed or unreadable else 0

