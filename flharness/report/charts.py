"""Scenario charts with matplotlib (SVG): grouped bars of per-flow steady-state goodput
by CC pair × qdisc and box plots of each flow's goodput over time (report/boxes.py), one
of each per combination of the other swept axes; and, as Pantheon
draws them, throughput against 95th percentile one-way delay per CC, one chart per
network condition (every swept axis but CC and repetition: cells of different rates or
RTTs are never averaged together; report/throughput_delay.py). Each chart is drawn only
when its data changed."""
from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from ..results.cell_metrics import FlowMetrics
from . import boxes, probe_chart, throughput_delay
from .collect import CellResult, ScenarioResult
from .tables import stat

FACET_SKIP = {"cc", "qdisc", "repetition", "test", "length"}
HATCHES = ["", "//", "..", "xx", "\\\\", "oo"]


def _stamp(path: Path, data: Any) -> tuple[Path, str]:
    """The .key file beside PATH, and DATA's key."""
    key = hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return path.with_name(f".{path.name}.key"), key


def is_current(path: Path, data: Any) -> bool:
    """Whether PATH exists and was drawn from the same DATA."""
    stamp, key = _stamp(path, data)
    return path.is_file() and stamp.is_file() and stamp.read_text() == key


def draw_if_changed(path: Path, data: Any, draw: Callable[..., None]) -> bool:
    """Draw PATH unless it exists and was drawn from the same DATA (a .key file beside it).
    DRAW is called with PATH (callers' lambdas bind loop variables as defaults)."""
    if is_current(path, data):
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    draw(path)
    stamp, key = _stamp(path, data)
    stamp.write_text(key)
    return True


def scenario_charts(s: ScenarioResult, out_dir: Path) -> list[dict[str, str]]:
    """Every chart of a scenario: [{'title', 'path'}], paths relative to OUT_DIR's parent."""
    charts = []
    cells = [c for c in s.cells if c.valid]
    facets = [a for a in s.swept if a not in FACET_SKIP]
    groups: dict[tuple[str | None, ...], list[CellResult]] = defaultdict(list)
    for c in cells:
        groups[tuple(c.label(a) for a in facets)].append(c)
    for key, group in sorted(groups.items(), key=lambda kv: [str(k) for k in kv[0]]):
        suffix = "_".join(str(k) for k in key if k) or "all"
        title = ", ".join(f"{a} {k or '–'}" for a, k in zip(facets, key)) or s.name
        path = out_dir / f"{s.name}_cc_qdisc_{_slug(suffix)}.svg"
        data = _bar_data(group)
        draw_if_changed(path, data, lambda p, d=data, t=title: _bars(d, f"{s.name}: {t}", p))
        charts.append({"title": f"Steady-state goodput per flow, {title}", "path": path.name})
        charts += _box_chart(s, group, title, out_dir / f"{s.name}_goodput_box_{_slug(suffix)}.svg")
    charts += _delay_charts(s, cells, out_dir)
    charts += _probe_chart(s, cells, out_dir)
    return charts


def _probe_chart(s: ScenarioResult, cells: list[CellResult], out_dir: Path) -> list[dict[str, str]]:
    """The queueing delay the latency probe saw, where some cell has one (report/probe_chart.py)."""
    probed = [c for c in cells if c.metrics and c.metrics.probe]
    if not probed:
        return []
    path = out_dir / f"{s.name}_probe_delay.svg"
    draw_if_changed(path, probe_chart.key(probed), lambda p: probe_chart.draw(
        probe_chart.curves(s, probed), probe_chart.source(probed), f"{s.name}: latency probe", p))
    return [{"title": "Queueing delay the flows induce on the latency probe (share of packets above x)", "path": path.name}]


def _box_chart(s: ScenarioResult, cells: list[CellResult], title: str, path: Path) -> list[dict[str, str]]:
    """The per-flow goodput box plot of one combination of the other swept axes."""
    capacity = max(_link_capacity_mbit(c) for c in cells)
    key = boxes.box_key(cells, capacity)

    def draw(p: Path) -> None:
        data, interval = boxes.samples(cells)
        boxes.draw(data, capacity, interval, f"{s.name}: {title}", p)

    if not any(c.metrics and c.metrics.flows for c in cells):
        return []
    draw_if_changed(path, key, draw)
    return [{"title": f"Goodput per flow over time (box plot), {title}", "path": path.name}]


def _delay_charts(s: ScenarioResult, cells: list[CellResult], out_dir: Path) -> list[dict[str, str]]:
    """One chart per network condition comparing its schemes: the CCs, or where each
    condition has one CC, its qdiscs."""
    scheme = _scheme_axis(s, cells)
    conditions = [a for a in s.swept if a not in (scheme, "repetition")]
    groups: dict[tuple[str | None, ...], list[CellResult]] = defaultdict(list)
    for c in cells:
        groups[tuple(c.label(a) for a in conditions)].append(c)
    charts = []
    for key, group in sorted(groups.items(), key=lambda kv: [str(k) for k in kv[0]]):
        condition = ", ".join(f"{a} {k or '–'}" for a, k in zip(conditions, key))
        title, figure_title = condition or s.name, f"{s.name}: {condition}" if condition else s.name
        owd = all(f.owd_ms is not None and f.owd_ms.p95 is not None for c in group for f in _flows(c))
        data = _delay_data(group, scheme, owd)
        suffix = "_".join(str(k) for k in key if k) or "all"
        path = out_dir / f"{s.name}_throughput_delay_{_slug(suffix)}.svg"
        draw_if_changed(path, (figure_title, data), lambda p, d=data, t=figure_title: throughput_delay.draw(d, t, p))
        what = "one-way delay" if owd else "TCP RTT"
        charts.append({"title": f"Throughput vs 95th percentile {what} per {scheme}, {title}", "path": path.name})
    return charts


def _delay_data(cells: list[CellResult], scheme: str, owd: bool) -> dict[str, Any]:
    """A throughput–delay chart's points: per flow where the cells have several (each
    flow's goodput and p95 delay, against one flow's capacity), else per cell."""
    if max(len(_flows(c)) for c in cells) > 1:
        return {"owd": owd, "capacity": max(_link_capacity_mbit(c) for c in cells),
                "points": [[_named(c, scheme), f.mean_mbit or 0.0, _p95_delay(f, owd), f"flow {f.index}: {f.label}"]
                           for c in cells for f in _flows(c)]}
    return {"owd": owd, "capacity": max(_capacity_mbit(c) for c in cells),
            "points": [[_named(c, scheme), sum(f.mean_mbit or 0 for f in _flows(c)),
                        max(_p95_delay(f, owd) for f in _flows(c))] for c in cells]}


def _named(c: CellResult, axis: str) -> str | None:
    """C's label on AXIS; on cc, each scheme in it (a user-space program) by what tables
    call it, its implementation and version with it ("QUIC Cubic (ngtcp2 0.12.1)-vs-cubic")."""
    label = c.label(axis)
    names = {f.cc: f.scheme for f in _flows(c) if f.scheme}
    if axis != "cc" or label is None or not names:
        return label
    return "-vs-".join(names.get(part, part) for part in label.split("-vs-"))


def _scheme_axis(s: ScenarioResult, cells: list[CellResult]) -> str:
    """'cc', unless no network condition holds two CCs and the qdisc is swept."""
    if "qdisc" not in s.swept:
        return "cc"
    conditions = [a for a in s.swept if a not in ("cc", "repetition")]
    ccs: dict[tuple[str | None, ...], set[str | None]] = defaultdict(set)
    for c in cells:
        ccs[tuple(c.label(a) for a in conditions)].add(c.label("cc"))
    return "cc" if any(len(v) > 1 for v in ccs.values()) else "qdisc"


def _capacities_mbit(c: CellResult) -> list[float]:
    """The payload capacity of each direction the cell's flows use, at the highest rate
    in force while they ran (metrics.json), Mbit/s."""
    return [cap.peak_mbit for _, cap in sorted(c.metrics.capacity.items())] if c.metrics else []


def _capacity_mbit(c: CellResult) -> float:
    """What the cell's flows can carry together (every direction they use), Mbit/s."""
    return sum(_capacities_mbit(c))


def _link_capacity_mbit(c: CellResult) -> float:
    """What one of the cell's flows can carry at most (its direction's capacity), Mbit/s."""
    return max(_capacities_mbit(c), default=0.0)


def _flows(c: CellResult) -> list[FlowMetrics]:
    return c.metrics.flows if c.metrics else []


def _p95_delay(flow: FlowMetrics, owd: bool) -> float:
    stats = flow.owd_ms if owd else flow.tcp_rtt_ms
    return (stats.p95 if stats else None) or 0.0


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in text)


def _bar_data(cells: list[CellResult]) -> dict[str, Any]:
    """{cc label: {qdisc label: [[flow label, mean, ci], ...]}} over repetitions (and over
    cells of other tests with the same CC and qdisc: flow i's label is the first seen)."""
    by: dict[str, dict[str, list[list[float]]]] = defaultdict(lambda: defaultdict(list))
    labels: dict[tuple[str, str], list[str]] = {}
    for c in cells:
        flows = _flows(c)
        runs = by[c.label("cc") or "?"][c.label("qdisc") or "?"]
        while len(runs) < len(flows):
            runs.append([])
        for i, f in enumerate(flows):
            runs[i].append(f.steady_mbit or 0.0)
        seen = labels.setdefault((c.label("cc") or "?", c.label("qdisc") or "?"), [])
        seen += [f.label for f in flows[len(seen):]]
    out: dict[str, Any] = {}
    for cc, per_q in by.items():
        out[cc] = {}
        for q, runs in per_q.items():
            stats = [stat(r) for r in runs]
            out[cc][q] = [[labels[(cc, q)][i], st.mean, st.ci or 0.0] for i, st in enumerate(stats) if st]
    return out


def _bars(data: dict[str, Any], title: str, path: Path) -> None:
    ccs = sorted(data)
    qdiscs = sorted({q for per_q in data.values() for q in per_q})
    nflows = max((len(v) for per_q in data.values() for v in per_q.values()), default=1)
    width = 0.8 / max(1, len(qdiscs) * nflows)
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(ccs) + 2), 4))
    colours = plt.get_cmap("tab10")
    for qi, q in enumerate(qdiscs):
        for fi in range(nflows):
            xs, ys, errs = [], [], []
            for xi, cc in enumerate(ccs):
                bars = data[cc].get(q, [])
                if fi < len(bars):
                    xs.append(xi - 0.4 + width * (qi * nflows + fi + 0.5))
                    ys.append(bars[fi][1])
                    errs.append(bars[fi][2])
            ax.bar(xs, ys, width, yerr=errs, color=colours(qi), hatch=HATCHES[fi % len(HATCHES)],
                   edgecolor="black", linewidth=0.4, label=f"{q}, flow {fi + 1}")
    ax.set_xticks(range(len(ccs)), ccs, rotation=20, ha="right")
    ax.set_ylabel("steady-state goodput (Mbit/s)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
