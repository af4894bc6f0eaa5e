"""The delay the flows induce on the latency probe (scenario key probe), as the L4S
report's Figure 5 compares it: per scenario, one line per kind of cell (repetitions
pooled) of the share of probe packets whose queueing delay exceeded x, both axes
logarithmic so that the tail (p99, p99.9) stays visible, with the 1 ms an L4S queue aims
for marked."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from numpy.typing import NDArray

from ..analysis.probe import load, queueing
from ..results import cell_folder
from .collect import CellResult, ScenarioResult

FLOOR_MS = 0.01  # delays below this are drawn at it (a log axis has no zero)
L4S_TARGET_MS = 1.0
STYLES = ("-", "--", ":")  # past matplotlib's ten colours, the next ten lines dashed, …


def key(cells: list[CellResult]) -> list[Any]:
    """What the chart is drawn from: its cells' metrics (the probe's file is one of their inputs)."""
    return sorted((c.name, c.metrics.key if c.metrics else "") for c in cells)


def curves(s: ScenarioResult, cells: list[CellResult]) -> dict[str, NDArray[np.float64]]:
    """Line label (the swept axes whose values tell these cells apart, the repetition's
    aside) → the pooled queueing delays (ms)."""
    axes = [a for a in s.swept if a != "repetition" and len({c.label(a) for c in cells}) > 1] or ["qdisc", "rate"]
    pooled: dict[str, list[NDArray[np.float64]]] = defaultdict(list)
    for c in cells:
        samples = load(c.dir / cell_folder.PROBE)
        if isinstance(samples, str):
            continue
        delays, _ = queueing(samples, c.record.backend.shared_clock)
        delays = delays[~np.isnan(delays)]
        pooled[", ".join(str(label) for a in axes if (label := c.label(a))) or c.name].append(delays)
    return {label: np.concatenate(parts) for label, parts in sorted(pooled.items()) if sum(map(len, parts))}


def draw(lines: dict[str, NDArray[np.float64]], source: str, title: str, path: Path) -> None:
    fig = Figure(figsize=(7.5, 4.5))
    ax = fig.subplots()
    for i, (label, delays) in enumerate(lines.items()):
        x = np.maximum(np.sort(delays), FLOOR_MS)
        exceed = 1 - np.arange(len(x)) / len(x)  # share of packets at or above each delay
        p99 = np.percentile(delays, 99)
        ax.step(x, exceed, where="post", color=f"C{i % 10}", linestyle=STYLES[i // 10 % len(STYLES)],
                label=f"{label} (p99 {p99:.2f} ms, n {len(delays)})")
    ax.axvline(L4S_TARGET_MS, color="grey", linestyle=":", linewidth=1, label="1 ms (the L queue's goal)")
    for share in (1e-2, 1e-3):
        ax.axhline(share, color="lightgrey", linewidth=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"queueing delay of the probe, {source} above its minimum (ms)")
    ax.set_ylabel("share of probe packets delayed more")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path)


def source(cells: list[CellResult]) -> str:
    """Where the cells' queueing delays come from: one-way delay, unless some used the round trip."""
    used = {c.metrics.probe.queueing_from for c in cells if c.metrics and c.metrics.probe}
    return "one-way" if used == {"one-way"} else "round trip"
