"""The throughput–delay chart as Pantheon draws it: x the 95th percentile one-way delay on
a base-2 log axis, inverted so that better is up and to the right; y the throughput from
0 to at least the link's payload capacity; one colour and marker per scheme, each run a
small point, the mean a large one, and a 1-σ ellipse (in the axes' own log-x space) for
a scheme with 3 runs or more."""
from __future__ import annotations

import math
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Polygon
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
from numpy.typing import NDArray

MARKERS = "os^Dv<>ph*"
ELLIPSE_RUNS = 3  # fewer runs draw no ellipse
HEADROOM = 1.08  # the y-axis ends this much above the capacity (or the highest point)
TITLE_WIDTH = 80  # characters per title line (a condition of many swept axes is long)


def figure(data: dict[str, Any], title: str) -> Figure:
    """DATA: {'owd': bool, 'capacity': Mbit/s, 'points': [[scheme, Mbit/s, ms], ...]}; a
    point may name a flow as its fourth item ('flow 2: prague (20 ms)'): then each
    scheme's flows are series of their own, in the scheme's colour, one marker per flow."""
    by: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for scheme, tput, delay, *flow in data["points"]:
        by[(scheme or "?", flow[0] if flow else "")].append((delay, tput))
    schemes = sorted({scheme for scheme, _ in by})
    flows = sorted({flow for _, flow in by})
    rows = len(by) + 1 if len(by) <= 8 else (len(by) + 2) // 2  # the legend's, below the axes
    fig, ax = plt.subplots(figsize=(6.4 if len(by) <= 8 else 7.6, 3.9 + 0.17 * rows))
    colours = plt.get_cmap("tab10")
    for i, ((scheme, flow), pts) in enumerate(sorted(by.items())):
        colour = colours(schemes.index(scheme) % 10)
        marker = MARKERS[(flows.index(flow) if len(flows) > 1 else i) % len(MARKERS)]
        xs, ys = np.array([p[0] for p in pts]), np.array([p[1] for p in pts])
        ax.scatter(xs, ys, color=colour, marker=marker, s=22, alpha=0.45, linewidths=0)
        name = f"{scheme}, {flow}" if flow else scheme
        ax.scatter([_log_mean(xs)], [ys.mean()], color=colour, marker=marker, s=120, edgecolors="black",
                   linewidths=0.6, label=f"{name} (n={len(pts)})", zorder=3)
        if len(pts) >= ELLIPSE_RUNS and np.all(xs > 0):
            ax.add_patch(_ellipse(xs, ys, colour))
    capacity = float(data.get("capacity") or 0)
    if capacity > 0:
        ax.axhline(capacity, color="grey", linestyle="--", linewidth=0.8, label="payload capacity")
    _delay_axis(ax, [p[0] for pts in by.values() for p in pts])
    per_flow = any(flow for _, flow in by)
    top = max([capacity, *(p[1] for pts in by.values() for p in pts)]) or 1.0
    ax.set_ylim(0, top * HEADROOM)
    ax.ticklabel_format(axis="y", style="plain", useOffset=False)
    ax.set_xlabel("95th percentile one-way delay (ms)" if data["owd"] else "95th percentile TCP RTT (ms)")
    ax.set_ylabel("average throughput per flow (Mbit/s)" if per_flow else "average throughput (Mbit/s)")
    ax.set_title(textwrap.fill(title, TITLE_WIDTH) + "\n(small: each run; large: mean)", fontsize=9)
    ax.grid(True, which="major", linewidth=0.3)
    # below the axes: a legend inside them hides the points it names (a starved flow near 0)
    ax.legend(fontsize=7 if len(by) <= 8 else 6, loc="upper center", bbox_to_anchor=(0.5, -0.14),
              ncol=1 if len(by) <= 8 else 2, frameon=False)
    fig.tight_layout()
    return fig


def draw(data: dict[str, Any], title: str, path: Path) -> None:
    fig = figure(data, title)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)


def _log_mean(xs: NDArray[np.float64]) -> float:
    """The mean on the chart's axis: geometric for positive delays."""
    return float(2 ** np.log2(xs).mean()) if np.all(xs > 0) else float(xs.mean())


def _delay_axis(ax: Any, delays: list[float]) -> None:
    """Base-2 log axis over whole powers of 2 around the delays (at least a factor of 4,
    so there are ticks to read), labelled in plain ms, inverted: low delay to the right."""
    positive = [d for d in delays if d > 0] or [1.0]
    lo = 2 ** math.floor(math.log2(min(positive) / 1.2))
    hi = 2 ** math.ceil(math.log2(max(positive) * 1.2))
    while hi / lo < 4:
        lo, hi = lo / 2, hi * 2
    ax.set_xscale("log", base=2)
    ax.set_xlim(hi, lo)  # inverted: better is to the right
    ax.xaxis.set_major_locator(LogLocator(base=2, numticks=12))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _ellipse(xs: NDArray[np.float64], ys: NDArray[np.float64], colour: Any) -> Polygon:
    """The runs' 1-σ covariance ellipse, computed where the chart draws them: log2 of delay."""
    lx = np.log2(xs)
    cov = np.cov(np.vstack([lx, ys]))
    values, vectors = np.linalg.eigh(cov)
    angle = np.linspace(0, 2 * np.pi, 100)
    circle = np.vstack([np.cos(angle), np.sin(angle)]) * np.sqrt(np.maximum(values, 0))[:, None]
    pts = vectors @ circle + np.array([[lx.mean()], [ys.mean()]])
    return Polygon(np.column_stack([2 ** pts[0], pts[1]]), closed=True, facecolor=colour, alpha=0.15,
                   edgecolor=colour, linewidth=0.8)
