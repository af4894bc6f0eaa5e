"""Per cell, the bottleneck queue over time beside Flent's plot ({cell}_queue.svg): per
direction with flows, the queueing delay (the backlog's drain time at the link rate;
dualpi2's and cake's own sojourn times where they report them) and the drops and ECN
marks since the test began, on Flent's time axis (t = 0 when its ping starts)."""
from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from ..analysis import queue
from ..results import cell_folder
from ..results.cell_record import Direction
from .charts import draw_if_changed
from .collect import CellResult, ScenarioResult
from .plots import scenario_bounds, title

OWN_LABELS = {"delay_c": "dualpi2 C queue (own)", "delay_l": "dualpi2 L queue (own)", "delay_avg": "cake (own, busiest tin)"}


def queue_plot_path(cell: CellResult) -> Path:
    return cell.dir / f"{cell.name}_queue.svg"


def draw_queue_plots(scenarios: list[ScenarioResult]) -> dict[str, int]:
    """Draw each cell's queue plot when its samples changed: {'drawn': n, 'current': n}."""
    counts = {"drawn": 0, "current": 0}
    for s in scenarios:
        seconds = scenario_bounds(s).seconds
        for c in s.cells:
            log = c.dir / cell_folder.QUEUE_LOG
            directions = sorted(c.metrics.queue) if c.metrics else []
            if c.metrics is None or not directions or not log.is_file() or c.metrics.t0 is None:
                continue
            key = [log.stat().st_size, log.stat().st_mtime_ns, c.metrics.t0, seconds,
                   c.record.config.model_dump(mode="json"), title(c)]
            drawn = draw_if_changed(queue_plot_path(c), key, lambda p, c=c, d=directions, s=seconds: _draw(c, d, s, p))
            counts["drawn" if drawn else "current"] += 1
    return counts


def _draw(cell: CellResult, directions: list[Direction], seconds: float, out: Path) -> None:
    ports = cell.record.ports
    series = queue.load(cell.dir / cell_folder.QUEUE_LOG, ports.by_direction() if ports else None)
    assert cell.metrics is not None and cell.metrics.t0 is not None  # draw_queue_plots draws only such cells
    t0 = cell.metrics.t0
    fig = Figure(figsize=(8, 2.6 * len(directions) + 0.6), layout="constrained")
    axes = fig.subplots(len(directions), 2, squeeze=False, sharex=True)
    for (delay_ax, count_ax), d in zip(axes, directions):
        q = series.get(d)
        if q is None:
            continue
        t = q.t - t0
        delay_ax.plot(t, queue.drain_ms(q, t0, cell.record.config, d), label=f"{q.kind}: backlog ÷ rate")
        for name, values in q.own.items():
            if name in OWN_LABELS:
                delay_ax.plot(t, values, label=OWN_LABELS[name], linewidth=0.8)
        delay_ax.set_ylabel(f"{d}load queueing delay (ms)")
        delay_ax.legend(fontsize="small", loc="best")
        count_ax.step(t, q.drops - q.drops[0], where="post", label="drops")
        count_ax.step(t, q.marks - q.marks[0], where="post", label="ECN marks")
        count_ax.set_ylabel("packets since the first sample")
        count_ax.legend(fontsize="small", loc="upper left")
        for ax in (delay_ax, count_ax):
            ax.set_xlim(0, seconds)
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("time (s)")
    fig.suptitle(f"Bottleneck queue: {title(cell)}", fontsize="medium")
    fig.savefig(out)

