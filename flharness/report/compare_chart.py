"""A compare page's chart: one metric of one scenario, a row per matched cell (and flow),
each side's repetitions as small points and their mean as a large one, the sides one
colour each in the page's order; a row where some side differs from the baseline is
named in bold."""
from __future__ import annotations

import textwrap
from pathlib import Path
from statistics import fmean

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from .compare import Row

COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:gray",
           "tab:olive", "tab:cyan")
SPREAD = 0.7  # the share of a row's height its sides' points take, the baseline on top
TITLE_WIDTH = 80
HEADROOM = 1.08  # the x-axis ends this much beyond the largest value


def colour(side: int) -> str:
    return COLOURS[side % len(COLOURS)]


def draw(rows: list[Row], names: list[str], title: str, path: Path) -> None:
    fig = figure(rows, names, title)
    fig.savefig(path)
    plt.close(fig)


def figure(rows: list[Row], names: list[str], title: str) -> Figure:
    sides = len(names)
    fig, ax = plt.subplots(figsize=(7.5, 1.2 + (0.25 + 0.12 * sides) * len(rows)))
    step = SPREAD / max(sides - 1, 1)
    named: set[int] = set()  # sides in the legend: each the first time its mean is drawn, whatever the row
    for i, r in enumerate(rows):
        for j, vals in enumerate(r.values):
            y = i - SPREAD / 2 + j * step if sides > 1 else i
            ax.scatter(vals, [y] * len(vals), color=colour(j), s=16, alpha=0.5, linewidths=0)
            if vals:
                ax.scatter([fmean(vals)], [y], color=colour(j), s=60, marker="D", edgecolors="black", linewidths=0.6,
                           label=names[j] if j not in named else None)
                named.add(j)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{r.cell} {r.series}".strip() for r in rows], fontsize=7)
    for label, r in zip(ax.get_yticklabels(), rows):
        if any(d.verdict in ("higher", "lower") for d in r.diffs):
            label.set_fontweight("bold")
    ax.set_ylim(len(rows) - 0.5, -0.5)  # the first row on top, each row's points inside
    unit = rows[0].measure.unit
    ax.set_xlabel(f"{rows[0].measure.title}" + (f" ({unit})" if unit else ""))
    seen = [v for r in rows for vals in r.values for v in vals]
    ax.set_xlim(min([0.0, *seen]), HEADROOM * max([*seen, 1e-9]))
    ax.ticklabel_format(axis="x", useOffset=False, style="plain")
    ax.grid(axis="x", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    ordered = sorted(zip(handles, labels), key=lambda hl: names.index(hl[1]))  # the page's order of sides
    ax.legend(*zip(*ordered), loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, title="mean\n(points: runs)",
              title_fontsize=7)
    ax.set_title("\n".join(textwrap.wrap(title, TITLE_WIDTH)), fontsize=9)
    fig.tight_layout()
    return fig
