"""The bottleneck queue over time, from the middlebox's samples (mid.qdisc.log, written by
flharness/programs/fl-qdisc-sample: a "# devices NAME=DEV..." header naming each array's
device, then per sample a "# EPOCH" line and one `tc -s -d -j qdisc show` array per port).
Which direction a port queues is cell.json's `ports`; only cells recorded before it had
them take it from the header's NAMEs.

The bottleneck queue of a port is the qdisc the scenario declared: handle 10: under
fl's HTB shaper, or the root 1: when it shapes by itself (commands.py). Its
queueing delay is the backlog's drain time at the link rate in force (rate schedules
included): what a packet arriving at that moment waits, for a FIFO exactly and for a
flow-queueing qdisc the wait behind every queue. Qdiscs that measure their own sojourn
time report it too (dualpi2: delay-c, delay-l; cake: its tins' average delay)."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast, get_args

import numpy as np
from numpy.typing import NDArray

from .. import layout
from ..results import cell_folder
from ..results.cell_metrics import QueueSummary, Spread
from ..results.cell_record import CellConfig, Direction
from .link import rate_at

#: Counters of CE marks, as tc's JSON names them: AQM marks (fq_codel, codel, pie, red, dualpi2)
#: and ce_threshold marks (fq_codel, fq).
MARK_KEYS = ("ecn_mark", "ce_mark", "ecn-mark", "marked")
#: Sojourn times a qdisc reports itself, in µs: name in fl → tc's JSON key.
OWN_DELAYS = {"delay_c": "delay-c", "delay_l": "delay-l"}
#: dualpi2's per-queue packet counters and step marks (L4S queue).
DUALPI2_COUNTERS = {"pkts_in_c": "pkts-in-c", "pkts_in_l": "pkts-in-l", "step_marks": "step-mark"}


@dataclass
class QueueSeries:
    """One port's bottleneck qdisc, sample by sample (t in epoch seconds; drops and
    marks are the qdisc's cumulative counters)."""
    kind: str
    t: NDArray[np.float64]
    backlog_bytes: NDArray[np.float64]
    backlog_pkts: NDArray[np.float64]
    drops: NDArray[np.float64]
    marks: NDArray[np.float64]
    own: dict[str, NDArray[np.float64]] = field(default_factory=dict)  # OWN_DELAYS (ms), DUALPI2_COUNTERS


def load(path: Path, ports: dict[Direction, str] | None = None) -> dict[str, QueueSeries]:
    """{direction ('up', 'down'): its series} from a sample log; {} if there is none.
    PORTS: direction → device (cell.json's); None for a cell recorded without them, whose
    header's NAMEs are the directions. A port the log did not sample has no series; a
    sample cut short when the sampler was stopped is left out."""
    names: list[str | None] = []  # each array's direction, in the log's order
    rows: dict[str, list[dict[str, Any]]] = {}
    sample: list[list[dict[str, Any]]] = []
    stamp = 0.0

    def keep() -> None:
        if names and len(sample) == len(names):
            for name, qdiscs in zip(names, sample):
                if name is not None and (q := bottleneck(qdiscs)) is not None:
                    rows[name].append({"t": stamp, **q})

    for line in path.read_text().splitlines():
        if (devices := cell_folder.queue_devices(line)) is not None:
            if ports is None:  # recorded before cell.json had ports: the header's names
                names = [name for name, _ in devices]
            else:
                direction = {dev: d for d, dev in ports.items()}
                names = [direction.get(dev) for _, dev in devices]
            rows = {n: [] for n in names if n is not None}
        elif line.startswith("# "):
            keep()
            stamp, sample = float(line[2:]), []
        elif line.startswith("["):
            try:
                sample.append(json.loads(line))
            except ValueError:  # the last line, cut when the sampler stopped
                break
    keep()
    return {n: _series(r) for n, r in rows.items() if r}


def header_ports(text: str) -> dict[Direction, str]:
    """Direction → device as a sample log's header (TEXT: the log's) names them: the ports
    of a cell recorded before cell.json had them; {} without a header."""
    pairs = next((d for line in text.splitlines() if (d := cell_folder.queue_devices(line)) is not None), [])
    return {cast(Direction, name): dev for name, dev in pairs if name in get_args(Direction)}


def bottleneck(qdiscs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The declared qdisc among a port's: the child of fl's htb class, else the root (layout.py)."""
    by_handle = {q.get("handle"): q for q in qdiscs}
    return by_handle.get(layout.CHILD) or by_handle.get(layout.ROOT)


def _series(rows: list[dict[str, Any]]) -> QueueSeries:
    def col(get: Callable[..., Any]) -> NDArray[np.float64]:  # GET(row); a lambda may bind its key as a default
        return np.array([get(r) for r in rows], dtype=float)
    own = {name: col(lambda r, k=key: r.get(k, np.nan)) / 1e3 for name, key in OWN_DELAYS.items()
           if any(key in r for r in rows)}
    own |= {name: col(lambda r, k=key: r.get(k, np.nan)) for name, key in DUALPI2_COUNTERS.items()
            if any(key in r for r in rows)}
    if any("tins" in r for r in rows):  # cake: the busiest tin's average sojourn time
        own["delay_avg"] = col(lambda r: max((tin.get("avg_delay_us", 0) for tin in r.get("tins", [])), default=np.nan)) / 1e3
    return QueueSeries(kind=rows[-1].get("kind", "?"), t=col(lambda r: r["t"]),
                       backlog_bytes=col(lambda r: r.get("backlog", 0)), backlog_pkts=col(lambda r: r.get("qlen", 0)),
                       drops=col(lambda r: r.get("drops", 0)), marks=col(_marks), own=own)


def _marks(r: dict[str, Any]) -> int:
    tins = r.get("tins") or []
    if tins:
        return sum(tin.get("ecn_mark", 0) for tin in tins)
    return sum(r.get(k, 0) for k in MARK_KEYS)


def drain_ms(q: QueueSeries, t0: float, config: CellConfig, direction: Direction) -> NDArray[np.float64]:
    """Each sample's backlog as the time the link takes to send it (T0: Flent's origin)."""
    return q.backlog_bytes * 8 / rate_at(q.t - t0, config, direction) * 1e3


def summary(q: QueueSeries, t0: float, window: tuple[float, float], config: CellConfig,
            direction: Direction) -> QueueSummary | None:
    """Mean, p95 and max of backlog and queueing delay over WINDOW (Flent's axis, T0 its
    origin), drops and marks in it; None without samples there."""
    rel = q.t - t0
    inside = (rel >= window[0]) & (rel <= window[1])
    if not inside.any():
        return None
    delay_ms = drain_ms(q, t0, config, direction)
    first, last = np.flatnonzero(inside)[[0, -1]]
    own: dict[str, Any] = {}  # the qdisc's own delays (ms) and counters (over the window)
    for name, values in q.own.items():
        if name.startswith("delay"):
            own[f"{name}_ms"] = _stats(values[inside])
        else:
            own[name] = int(values[last] - values[first])
    return QueueSummary(
        kind=q.kind, samples=int(inside.sum()), interval_s=float(np.median(np.diff(q.t))) if len(q.t) > 1 else None,
        backlog_bytes=_stats(q.backlog_bytes[inside]), backlog_pkts=_stats(q.backlog_pkts[inside]),
        delay_ms=_stats(delay_ms[inside]),
        drops=int(q.drops[last] - q.drops[first]), marks=int(q.marks[last] - q.marks[first]), **own)


def _stats(values: NDArray[np.float64]) -> Spread | None:
    values = values[~np.isnan(values)]
    if not len(values):
        return None
    return Spread(mean=float(values.mean()), p95=float(np.percentile(values, 95)), max=float(values.max()))
