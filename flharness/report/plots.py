"""Per-cell plots with Flent's own plotter (SVG), in parallel, redrawn only when the data
or the plot settings changed. Titles and flow labels come from the cell's coordinates;
axis bounds are shared by all cells of a scenario so plots compare at a glance."""
from __future__ import annotations

import datetime
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..flent_tests import PING
from ..results import cell_folder
from .charts import draw_if_changed
from .collect import CellResult, ScenarioResult

#: Flent plot per test; tcp_delivery_with_rtt (delivery rate, ping, TCP RTT) for upload
#: tests. Flent has that plot for no download test nor tcp_bidirectional (it samples the
#: client's sockets only): those get its bandwidth-and-ping plot.
PLOT_FOR_TEST = {"rrul": "all_scaled", "rrul_be": "all_scaled", "tcp_bidirectional": "totals"}
DEFAULT_PLOT = "tcp_delivery_with_rtt"
DOWNLOAD_PLOT = "totals"
NOTE_INDENT = " " * 16


@dataclass(frozen=True)
class Bounds:
    seconds: float
    mbit: float
    ms: float


def plot_name(cell: CellResult) -> str:
    test = cell.record.config.kernel_test.name  # what Flent ran: its ping alone where schemes run every flow
    if test == PING.name:
        return "ping"
    return PLOT_FOR_TEST.get(test, DOWNLOAD_PLOT if test.endswith("down") else DEFAULT_PLOT)


def plot_path(cell: CellResult) -> Path:
    return cell.dir / f"{cell.name}_{plot_name(cell)}.svg"


def scenario_bounds(s: ScenarioResult) -> Bounds:
    cells = [(c.record.config, c.metrics) for c in s.cells if c.metrics and c.metrics.flows]
    rate = max((config.bottleneck.of(d).rate_bps for config, _ in cells for d in ("up", "down")), default=1e6)
    ms = [p.p99 for _, m in cells for p in [m.ping_ms and m.ping_ms.loaded, *(f.tcp_rtt_ms for f in m.flows)] if p]
    seconds = max((config.length + 10 for config, _ in cells), default=60)
    return Bounds(seconds, round(rate / 1e6 * 1.15, 1), round(max(ms, default=10) * 1.15, 1))


def title(cell: CellResult) -> str:
    """E.g. 'cubic (80 ms) vs prague (20 ms), pfifo(1000), 50 Mbit/s'."""
    flows = [f.label for f in cell.metrics.flows] if cell.metrics else []
    bottleneck = cell.record.config.bottleneck
    up, down = bottleneck.up.rate_bps, bottleneck.down.rate_bps
    rate = _mbit(up) if up == down else f"{_mbit(up, unit=False)}/{_mbit(down)}"
    distinct = list(dict.fromkeys(flows))
    who = " vs ".join(flows) if len(distinct) > 1 else f"{len(flows)} × {distinct[0]}" if flows else ""
    return ", ".join(p for p in (who, cell.label("qdisc"), rate) if p)


def note(cell: CellResult) -> str:
    """The figure's note in place of Flent's annotation, whose time is the testbed's clock
    (a VM guest's runs ahead of this machine's): when the cell ran by fl's clock, where."""
    rec = cell.record
    when = datetime.datetime.fromtimestamp(rec.started, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC") if rec.started else "?"
    where = f"VM, kernel {rec.kernel}" if rec.backend.kind == "vm" else f"{rec.backend.testbed}, kernel {rec.kernel}"
    # Flent puts the note at the figure's left edge, which its tight bounding box cuts: indented
    return f"{NOTE_INDENT}run {when} (fl's clock), {rec.config.length} s test, {where}"


def _mbit(bps: float, unit: bool = True) -> str:
    return f"{bps / 1e6:g}" + (" Mbit/s" if unit else "")


def flent_argv(cell: CellResult, bounds: Bounds, out: Path) -> list[str]:
    data = next(cell.dir.glob(cell_folder.FLENT_DATA_GLOB))
    argv = ["flent", "-i", str(data), "-p", plot_name(cell), "-o", str(out),
            "--override-title", title(cell), "--no-annotation", "--figure-note", note(cell),
            "--bounds-x", f"0,{bounds.seconds:g}",
            "--bounds-y", f"0,{bounds.mbit:g}", "--bounds-y", f"0,{bounds.ms:g}",
            "--label-y", "Mbit/s", "--label-y", "ms",
            "--replace-legend", "Ping (ms) -- Ping (ms) ICMP=Ping (ICMP)"]
    flows = sorted(cell.metrics.flows if cell.metrics else [], key=lambda f: -len(f.series))
    for f in flows:  # '-- 10' before '-- 1'
        suffix = f.series.split("::")[-1]
        argv += ["--replace-legend", f"-- {suffix}={f.index}: {f.label}"]
    return argv


def draw_cell_plots(scenarios: list[ScenarioResult], workers: int | None = None) -> dict[str, int]:
    """Plot every cell that has data; returns {'drawn': n, 'current': n, 'failed': n}."""
    jobs = []
    for s in scenarios:
        bounds = scenario_bounds(s)
        jobs += [(c, bounds) for c in s.cells if c.metrics and c.metrics.flows]
    counts = {"drawn": 0, "current": 0, "failed": 0}

    def one(job: tuple[CellResult, Bounds]) -> str:
        cell, bounds = job
        out = plot_path(cell)
        argv = flent_argv(cell, bounds, out)
        data = next(cell.dir.glob(cell_folder.FLENT_DATA_GLOB)).stat()
        try:
            drawn = draw_if_changed(out, [argv, data.st_size, data.st_mtime_ns], lambda p: _run(argv, cell))
        except RuntimeError:
            return "failed"
        return "drawn" if drawn else "current"

    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        for result in pool.map(one, jobs):
            counts[result] += 1
    return counts


def _run(argv: list[str], cell: CellResult) -> None:
    env = {**os.environ, "MPLCONFIGDIR": os.environ.get("MPLCONFIGDIR", "/tmp/fl-mpl")}
    p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    out = Path(argv[argv.index("-o") + 1])
    if p.returncode != 0 or not out.is_file() or out.stat().st_size == 0:  # Flent exits 0 on a plot it lacks
        out.unlink(missing_ok=True)
        (cell.dir / "plot.log").write_text(p.stdout + p.stderr)
        raise RuntimeError(f"flent plot failed for {cell.name}")
