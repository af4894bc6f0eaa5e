"""Per cell, every data packet's one-way delay ({cell}_owd.svg), from series.npz (the
packets matched between the two captures): its CDF per flow, as the L4S report draws its
latency figures, and the delays over time on Flent's axis. Every matched packet is a
point; the dense layers are rasterised inside the SVG so that a plot of a million
packets stays small. Drawn in parallel, only where the cell's metrics changed."""
from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from numpy.typing import NDArray

from ..results import cell_folder
from ..results.cell_series import FlowSeries, read_series
from .charts import draw_if_changed, is_current
from .collect import CellResult, ScenarioResult
from .plots import scenario_bounds, title

COLOURS = [f"C{i}" for i in range(10)]  # flow i's colour, as in the box plots


def owd_plot_path(cell: CellResult) -> Path:
    return cell.dir / f"{cell.name}_owd.svg"


def cdf(delays: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The empirical CDF of DELAYS: every value in order, and the share of values up to it."""
    x = np.sort(np.asarray(delays, dtype=float))
    return x, np.arange(1, len(x) + 1) / max(len(x), 1)


def draw_owd_plots(scenarios: list[ScenarioResult], workers: int | None = None) -> dict[str, int]:
    """Draw each cell's one-way delay plot where its metrics changed: {'drawn': n, 'current': n}."""
    jobs = []
    for s in scenarios:
        seconds = scenario_bounds(s).seconds
        for c in s.cells:
            flows = [f for f in c.metrics.flows if f.owd_ms and f.owd_ms.n] if c.valid and c.metrics else []
            if flows and (c.dir / cell_folder.SERIES).is_file():
                labels = {f.index: f"{f.index}: {f.label}" for f in flows}
                jobs.append((c, [c.metrics.key if c.metrics else "", labels, seconds, title(c)]))
    todo = [(c, key) for c, key in jobs if not is_current(owd_plot_path(c), key)]
    if todo:
        with ProcessPoolExecutor(max_workers=min(len(todo), workers or os.cpu_count() or 1)) as pool:
            list(pool.map(_draw_one, [c.dir for c, _ in todo], [owd_plot_path(c) for c, _ in todo],
                          [key for _, key in todo]))
    return {"drawn": len(todo), "current": len(jobs) - len(todo)}


def _draw_one(cell_dir: Path, out: Path, key: list[Any]) -> None:
    _, labels, seconds, heading = key
    draw_if_changed(out, key, lambda p: draw(read_series(cell_dir / cell_folder.SERIES).flows, labels, seconds, heading, p))


def draw(flows: dict[int, FlowSeries], labels: dict[int, str], seconds: float, heading: str, out: Path) -> None:
    figure(flows, labels, seconds, heading).savefig(out, dpi=110)


def figure(flows: dict[int, FlowSeries], labels: dict[int, str], seconds: float, heading: str) -> Figure:
    """Left the CDF of each flow's delays, right every packet's delay over time."""
    fig = Figure(figsize=(10, 3.6), layout="constrained")
    cdf_ax, time_ax = fig.subplots(1, 2, width_ratios=[1, 1.6])
    for i, label in labels.items():
        s = flows.get(i)
        if s is None or not len(s.owd_ms):
            continue
        colour = COLOURS[(i - 1) % len(COLOURS)]
        x, y = cdf(s.owd_ms)
        cdf_ax.plot(x, y, color=colour, label=f"{label} (n={len(x)})", rasterized=len(x) > 2000)
        time_ax.plot(s.owd_t, s.owd_ms, ",", color=colour, rasterized=True)
    cdf_ax.set_xlabel("one-way delay (ms)")
    cdf_ax.set_ylabel("fraction of data packets")
    cdf_ax.set_ylim(0, 1)
    cdf_ax.set_xlim(left=0)
    cdf_ax.legend(fontsize="small", loc="lower right")
    time_ax.set_xlabel("time (s)")
    time_ax.set_ylabel("one-way delay (ms), each data packet")
    time_ax.set_xlim(0, seconds)
    time_ax.set_ylim(bottom=0)
    for ax in (cdf_ax, time_ax):
        ax.grid(alpha=0.3)
    fig.suptitle(f"One-way delay per packet: {heading}", fontsize="medium")
    return fig
