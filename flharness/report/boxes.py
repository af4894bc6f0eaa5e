"""Box plots of per-flow goodput, as the L4S report's `box_totals`: for each combination of
the swept axes other than CC pair and qdisc (as the bar charts), one box per scheme (CC
pair × qdisc) and flow over the flow's goodput per interval (series.npz: the payload
that first reached the receiver in each interval, from the flow's start to the end of the
test; repetitions pooled), beside the link's payload capacity."""
from __future__ import annotations

import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from ..results.cell_series import SERIES_FILE, read_series
from .collect import CellResult

COLOURS = [f"C{i}" for i in range(10)]  # flow i's colour, as in the one-way delay plots
TITLE_WIDTH = 90


def box_key(cells: list[CellResult], capacity: float) -> list[Any]:
    """What a box chart is drawn from: its cells' metrics (their series come with them)."""
    return [sorted((c.name, c.metrics.key if c.metrics else "") for c in cells), capacity]


def samples(cells: list[CellResult]) -> tuple[dict[str, list[tuple[str, np.ndarray]]], float]:
    """Scheme ('cc, qdisc') → per flow (its label, its goodput per interval over every
    repetition), flows in fl's order; and the intervals' width (s)."""
    pooled: dict[str, dict[int, list[np.ndarray]]] = defaultdict(lambda: defaultdict(list))
    labels: dict[tuple[str, int], str] = {}
    interval = 0.0
    for c in cells:
        if not c.metrics or not (c.dir / SERIES_FILE).is_file():
            continue
        scheme = f"{c.label('cc')}, {c.label('qdisc')}"
        series = read_series(c.dir / SERIES_FILE)
        interval = max(interval, series.interval_s)
        for f in c.metrics.flows:
            if f.index in series.flows:
                pooled[scheme][f.index].append(series.flows[f.index].goodput_mbit)
                labels.setdefault((scheme, f.index), f.label)
    return {scheme: [(labels[(scheme, i)], np.concatenate(runs)) for i, runs in sorted(flows.items())]
            for scheme, flows in sorted(pooled.items())}, interval


def draw(data: dict[str, list[tuple[str, np.ndarray]]], capacity: float, interval: float, heading: str,
         path: Path) -> None:
    figure(data, capacity, interval, heading).savefig(path)


def figure(data: dict[str, list[tuple[str, np.ndarray]]], capacity: float, interval: float, heading: str) -> Figure:
    """DATA: scheme → per flow (label, goodput samples): one box per flow, grouped by scheme."""
    nboxes = sum(len(v) for v in data.values())
    fig = Figure(figsize=(max(6.0, 0.45 * nboxes + 2.5), 4.2), layout="constrained")
    ax = fig.subplots()
    pos, ticks, names = 0.0, [], []
    for scheme, flows in data.items():
        first = pos
        for (label, values), colour in zip(flows, COLOURS):
            box = ax.boxplot([values], positions=[pos], widths=0.7, patch_artist=True, whis=(5, 95),
                             showfliers=False, medianprops={"color": "black", "gid": "median"})
            box["boxes"][0].set(facecolor=colour, alpha=0.7)
            ax.text(pos, 0, label, rotation=90, fontsize=6, ha="center", va="bottom")
            pos += 1
        ticks.append((first + pos - 1) / 2)
        names.append(scheme)
        pos += 0.8
    if capacity > 0:
        ax.axhline(capacity, color="grey", linestyle="--", linewidth=0.8, label="payload capacity")
        ax.legend(fontsize=7, loc="upper right")
    ax.set_xticks(ticks, names, rotation=20, ha="right", fontsize=8)
    ax.set_ylim(0, max(capacity, *(float(v.max()) for fl in data.values() for _, v in fl if len(v))) * 1.08)
    ax.set_ylabel(f"goodput per {interval:g} s (Mbit/s)")
    ax.set_title(textwrap.fill(heading, TITLE_WIDTH) + "\n(box: 25-75 %, whiskers: 5-95 %, line: median)",
                 fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    return fig
