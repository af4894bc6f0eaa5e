"""Per cell with a video flow or a latency probe ({cell}_video.svg), on Flent's time axis:
above, each flow's goodput per interval (the TCP flows' from series.npz, the video's
payload arriving in the server's capture in the same intervals); below, each whole
frame's delay at the time it was sent and the probe's queueing delay at the time of each
round trip. Drawn only where the cell's metrics changed."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from ..analysis.capture import read_udp
from ..analysis.probe import load, queueing
from ..analysis.video import frames, video_datagrams
from ..hosts import CLIENT, SERVER
from ..results import cell_folder
from ..results.cell_series import read_series
from .charts import draw_if_changed
from .collect import CellResult, ScenarioResult
from .plots import scenario_bounds, title

COLOURS = [f"C{i}" for i in range(10)]  # flow i's colour, as in the other per-cell figures
VIDEO_COLOUR, PROBE_COLOUR = "black", "C9"


def video_plot_path(cell: CellResult) -> Path:
    return cell.dir / f"{cell.name}_video.svg"


def draw_video_plots(scenarios: list[ScenarioResult]) -> dict[str, int]:
    """Draw each such cell's figure where its metrics changed: {'drawn': n, 'current': n}."""
    drawn = current = 0
    for s in scenarios:
        seconds = scenario_bounds(s).seconds
        for c in s.cells:
            m = c.metrics
            if not (c.valid and m and (m.video or m.probe) and m.t0 is not None):
                continue
            key = [m.key, seconds, title(c)]
            if draw_if_changed(video_plot_path(c), key, lambda p, c=c, k=key: figure(c, k[1], k[2]).savefig(p, dpi=110)):
                drawn += 1
            else:
                current += 1
    return {"drawn": drawn, "current": current}


def figure(c: CellResult, seconds: float, heading: str) -> Figure:
    m = c.metrics
    assert m is not None and m.t0 is not None
    fig = Figure(figsize=(10, 5.6), layout="constrained")
    rate_ax, delay_ax = fig.subplots(2, 1, sharex=True)
    interval = _tcp_goodput(c, rate_ax)
    cfg = c.record.config
    if cfg.video and m.video:
        _video(c, m.t0, interval or 0.2, cfg.video.fps, rate_ax, delay_ax)
    if cfg.probe and m.probe:
        samples = load(c.dir / cell_folder.PROBE)
        if not isinstance(samples, str):
            delays, source = queueing(samples, c.record.backend.shared_clock)
            delay_ax.plot(samples.t - m.t0, delays, ".", markersize=2, color=PROBE_COLOUR,
                          label=f"probe ({m.probe.codepoint}): queueing delay, {source}", rasterized=len(delays) > 2000)
    rate_ax.set_ylabel("goodput (Mbit/s)")
    rate_ax.set_ylim(bottom=0)
    delay_ax.set_ylabel("delay (ms)")
    delay_ax.set_yscale("symlog", linthresh=1.0)
    drawn = [y[np.isfinite(y)] for line in delay_ax.get_lines() if (y := np.asarray(line.get_ydata(), dtype=float)).size]
    highest = max((float(y.max()) for y in drawn if y.size), default=1.0)
    delay_ax.set_ylim(0, max(2.0, 2 * highest))
    delay_ax.set_xlabel("time (s)")
    delay_ax.set_xlim(0, seconds)
    for ax in (rate_ax, delay_ax):
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small", loc="best")
    fig.suptitle(f"Video and probe: {heading}", fontsize="medium")
    return fig


def _tcp_goodput(c: CellResult, ax: Any) -> float | None:
    """Each TCP flow's goodput per interval; the intervals' width (s), or None without series."""
    if not (c.dir / cell_folder.SERIES).is_file() or not c.metrics:
        return None
    series = read_series(c.dir / cell_folder.SERIES)
    for f in c.metrics.flows:
        if (s := series.flows.get(f.index)) is not None and len(s.goodput_t):
            ax.step(s.goodput_t, s.goodput_mbit, where="post", color=COLOURS[(f.index - 1) % len(COLOURS)],
                    label=f"{f.index}: {f.label}")
    return series.interval_s or None


def _video(c: CellResult, t0: float, interval: float, fps: int, rate_ax: Any, delay_ax: Any) -> None:
    """The video's payload arriving per interval, and each whole frame's delay."""
    try:
        sent = video_datagrams(read_udp(c.dir / cell_folder.capture(CLIENT)))
        received = video_datagrams(read_udp(c.dir / cell_folder.capture(SERVER)))
    except (OSError, ValueError):
        return
    if not len(received):
        return
    edges = np.arange(0, received.ts.max() - t0 + interval, interval)
    got, _ = np.histogram(received.ts - t0, bins=edges, weights=received.payload)
    rate_ax.step(edges[:-1], got * 8 / interval / 1e6, where="post", color=VIDEO_COLOUR, label="video (UDP payload)")
    f = frames(sent, received, fps)
    whole = ~np.isnan(f.done)
    delay_ax.plot(f.start[whole] - t0, (f.done - f.start)[whole] * 1e3, "x", markersize=3, color=VIDEO_COLOUR,
                  label="video: each whole frame's delay (first datagram sent to last received)")
