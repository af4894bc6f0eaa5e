"""A compare page's paired chart: one metric of one scenario, a row per cell (and flow),
each run's repetitions as small points and their mean as a large one, A and B side by
side in two colours; a row whose verdict is a change is named in bold."""
from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from .compare import Row

COLOURS = ("tab:blue", "tab:orange")
OFFSET = 0.17  # A above, B below each row's line
TITLE_WIDTH = 80
HEADROOM = 1.08  # the x-axis ends this much beyond the largest value


def draw(rows: list[Row], names: tuple[str, str], title: str, path: Path) -> None:
    height = 1.2 + 0.42 * len(rows)
    fig, ax = plt.subplots(figsize=(7.5, height))
    for i, r in enumerate(rows):
        for side, (vals, mean, colour) in enumerate(((r.a_values, r.diff.a, COLOURS[0]), (r.b_values, r.diff.b, COLOURS[1]))):
            y = i + (OFFSET if side else -OFFSET)
            ax.scatter(vals, [y] * len(vals), color=colour, s=16, alpha=0.5, linewidths=0)
            if mean is not None:
                ax.scatter([mean], [y], color=colour, s=70, marker="D", edgecolors="black", linewidths=0.6,
                           label=names[side] if i == 0 else None)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{r.cell} {r.series}".strip() for r in rows], fontsize=7)
    for label, r in zip(ax.get_yticklabels(), rows):
        if r.diff.verdict in ("higher", "lower"):
            label.set_fontweight("bold")
    ax.set_ylim(len(rows) - 0.5, -0.5)  # the first row on top, each row's points inside
    unit = rows[0].measure.unit
    ax.set_xlabel(f"{rows[0].measure.title}" + (f" ({unit})" if unit else ""))
    seen = [v for r in rows for v in r.a_values + r.b_values]
    ax.set_xlim(min([0.0, *seen]), HEADROOM * max([*seen, 1e-9]))
    ax.ticklabel_format(axis="x", useOffset=False, style="plain")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, title="mean\n(points: runs)", title_fontsize=7)
    ax.set_title("\n".join(textwrap.wrap(title, TITLE_WIDTH)), fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
