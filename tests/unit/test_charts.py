"""The throughput–delay chart builder (flharness/report/throughput_delay.py) on the data
that once made it unreadable: throughputs 47.776–47.784 Mbit/s (an offset-zoomed y-axis)
and p95 delays 248.5–249 ms (overlapping log-axis labels), three schemes of 3, 3 and 1
runs. The chart must read as Pantheon's: y from 0 to the capacity, no offset, the delay
axis base-2 log and inverted with plain labels, legend colours those of the points."""
from __future__ import annotations

import numpy as np
from matplotlib.colors import to_rgba
from matplotlib.patches import Polygon

from flharness.report import throughput_delay

CAPACITY = 50e6 * 1448 / 1514 / 1e6
DATA = {"owd": True, "capacity": CAPACITY, "points": [
    ["cubic", 47.776, 248.5], ["cubic", 47.780, 248.9], ["cubic", 47.784, 249.0],
    ["bbr", 47.10, 60.2], ["bbr", 46.90, 75.1], ["bbr", 47.40, 66.0],
    ["reno", 47.70, 249.0],
]}


def drawn():
    fig = throughput_delay.figure(DATA, "test")
    fig.canvas.draw()
    return fig, fig.axes[0]


def test_the_throughput_axis_runs_from_zero_to_the_capacity_without_an_offset():
    _, ax = drawn()
    lo, hi = ax.get_ylim()
    assert lo == 0 and hi >= CAPACITY
    assert ax.yaxis.get_offset_text().get_text() == "" and ax.xaxis.get_offset_text().get_text() == ""


def test_the_delay_axis_is_base_2_log_inverted_with_plain_distinct_labels():
    _, ax = drawn()
    left, right = ax.get_xlim()
    assert ax.get_xscale() == "log" and left > right  # low delay to the right
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    values = [float(t) for t in labels]
    assert len(labels) >= 3 and len(set(labels)) == len(labels), labels
    assert all(np.log2(v) == round(np.log2(v)) for v in values), labels  # powers of 2, plain numbers
    assert right <= 60.2 and left >= 249.0


def test_legend_entries_have_their_points_colours_and_runs_their_scheme():
    _, ax = drawn()
    legend = ax.get_legend()
    handles = getattr(legend, "legend_handles", None) or legend.legendHandles  # matplotlib < 3.7
    entries = {t.get_text(): h for t, h in zip(legend.get_texts(), handles)}
    assert set(entries) == {"bbr (n=3)", "cubic (n=3)", "reno (n=1)", "payload capacity"}
    for scheme in ("bbr", "cubic", "reno"):
        (mean,) = [c for c in ax.collections if c.get_label().startswith(f"{scheme} ")]
        runs = ax.collections[ax.collections.index(mean) - 1]
        colour = to_rgba(entries[f"{scheme} (n={len(runs.get_offsets())})"].get_facecolor()[0])
        assert to_rgba(mean.get_facecolor()[0]) == colour
        assert to_rgba(runs.get_facecolor()[0])[:3] == colour[:3]  # the runs: the same colour, lighter
    assert len({to_rgba(h.get_facecolor()[0]) for k, h in entries.items() if k != "payload capacity"}) == 3


def test_schemes_with_three_runs_get_a_one_sigma_ellipse():
    _, ax = drawn()
    assert sum(isinstance(p, Polygon) for p in ax.patches) == 2  # bbr and cubic, not reno's single run


def test_cells_of_several_flows_give_a_series_per_flow_in_their_schemes_colour():
    """Per flow, as a reader compares the qdiscs of one condition: each scheme's flows share
    its colour and differ by marker; the legend names scheme and flow."""
    data = {"owd": True, "capacity": 9.56, "points": [
        ["dualpi2", 4.7, 12.0, "flow 1: cubic (10 ms)"], ["dualpi2", 4.6, 3.0, "flow 2: prague (10 ms)"],
        ["pfifo_200", 6.5, 240.0, "flow 1: cubic (10 ms)"], ["pfifo_200", 2.9, 245.0, "flow 2: prague (10 ms)"]]}
    fig = throughput_delay.figure(data, "test")
    ax = fig.axes[0]
    means = {c.get_label(): c for c in ax.collections if c.get_label().endswith("(n=1)")}
    assert set(means) == {f"{q}, flow {i}: {cc} (10 ms) (n=1)" for q in ("dualpi2", "pfifo_200")
                          for i, cc in ((1, "cubic"), (2, "prague"))}
    colour = {k: to_rgba(c.get_facecolor()[0]) for k, c in means.items()}
    marker = {k: c.get_paths()[0].vertices.tobytes() for k, c in means.items()}
    d1, d2, p1, p2 = sorted(means)
    assert colour[d1] == colour[d2] != colour[p1] == colour[p2]
    assert marker[d1] == marker[p1] != marker[d2] == marker[p2]
    assert ax.get_ylabel() == "average throughput per flow (Mbit/s)" and ax.get_ylim()[1] >= 9.56
