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
from numpy.typing import NDArray

from ..results import cell_folder
from ..results.cell_series import read_series
from .collect import CellResult

COLOURS = [f"C{i}" for i in range(10)]  # flow i's colour, as in the one-way delay plots
TITLE_WIDTH = 90


def box_key(cells: list[CellResult], capacity: float) -> list[Any]:
    """What a box chart is drawn from: its cells' metrics (their series come with them)."""
    return [sorted((c.name, c.metrics.key if c.metrics else "") for c in cells), capacity]


def samples(cells: list[CellResult]) -> tuple[dict[str, list[tuple[str, NDArray[np.float64]]]], float]:
    """Scheme ('cc, qdisc') → per flow (its label, its goodput per interval over every
    repetition), flows in fl's order; and the intervals' width (s)."""
    pooled: dict[str, dict[int, list[NDArray[np.float64]]]] = defaultdict(lambda: defaultdict(list))
    labels: dict[tuple[str, int], str] = {}
    interval = 0.0
    for c in cells:
        if not c.metrics or not (c.dir / cell_folder.SERIES).is_file():
            continue
        scheme = f"{c.label('cc')}, {c.label('qdisc')}"
        series = read_series(c.dir / cell_folder.SERIES)
        interval = max(interval, series.interval_s)
        for f in c.metrics.flows:
            if f.index in series.flows:
                pooled[scheme][f.index].append(series.flows[f.index].goodput_mbit)
                labels.setdefault((scheme, f.index), f.label)
    return {scheme: [(labels[(scheme, i)], np.concatenate(runs)) for i, runs in sorted(flows.items())]
            for scheme, flows in sorted(pooled.items())}, interval


def draw(data: dict[str, list[tuple[str, NDArray[np.float64]]]], capacity: float, interval: float, heading: str,
         path: Path) -> None:
    figure(data, capacity, interval, heading).savefig(path)


def figure(data: dict[str, list[tuple[str, NDArray[np.float64]]]], capacity: float, interval: float, heading: str) -> Figure:
    """DATA: scheme → per flow (label, goodput samples): one horizontal box per flow, named
    by its scheme and flow, coloured by the flow's position; the capacity a dashed line."""
    names, values, colours = [], [], []
    for scheme, flows in data.items():
        for i, (label, samples_) in enumerate(flows):
            names.append(f"{scheme} · {label}")
            values.append(samples_)
            colours.append(COLOURS[i % len(COLOURS)])
    fig = Figure(figsize=(8.0, 1.4 + 0.32 * len(names)), layout="constrained")
    ax = fig.subplots()
    positions = list(range(len(names), 0, -1))  # the first scheme on top
    boxes = ax.boxplot(values, positions=positions, vert=False, widths=0.6, patch_artist=True, whis=(5, 95),
                       showfliers=False, medianprops={"color": "black", "gid": "median"})
    for patch, colour in zip(boxes["boxes"], colours):
        patch.set(facecolor=colour, alpha=0.7)
    ax.set_yticks(positions, names, fontsize=7)
    if capacity > 0:
        ax.axvline(capacity, color="grey", linestyle="--", linewidth=0.8, label="payload capacity")
        ax.legend(fontsize=7, loc="lower right")
    top = max([capacity, *(float(v.max()) for v in values if len(v))])
    ax.set_xlim(0, top * 1.05)
    ax.set_xlabel(f"goodput per {interval:g} s interval (Mbit/s)")
    ax.set_title(textwrap.fill(heading, TITLE_WIDTH) + "\n(each flow from its start to the end of the test, "
                 "runs pooled; box 25-75 %, whiskers 5-95 %, line median)", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return fig
