"""Scenario tables derived from the declared axes: a fairness table (one row per
combination of the other swept axes, flows as column pairs) and a per-CC table in the
Pantheon style. Repetitions are folded into mean ± 95 % confidence interval and n."""
from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..results.cell_metrics import CellMetrics, FlowMetrics, ProbeFlow, UdpFlow, VideoFlow
from .collect import CellResult, ScenarioResult
from .stats import t_half_width

#: Axes a fairness row is keyed by, besides the flows themselves.
ROW_SKIP = {"cc", "rtt", "test", "length", "repetition"}


@dataclass(frozen=True)
class Stat:
    mean: float
    ci: float | None  # half-width of the 95 % interval; None with one value
    n: int

    def fmt(self, digits: int = 2) -> str:
        s = f"{self.mean:.{digits}f}"
        return s if self.ci is None else f"{s} ± {self.ci:.{digits}f}"


def stat(values: Sequence[float | None]) -> Stat | None:
    known = [v for v in values if v is not None and not math.isnan(v)]
    if not known:
        return None
    return Stat(statistics.fmean(known), t_half_width(known), len(known))


def _groups(cells: list[CellResult], key: Callable[[CellResult], Any]) -> dict[Any, list[CellResult]]:
    out: dict[Any, list[CellResult]] = defaultdict(list)
    for c in cells:
        if c.valid:
            out[key(c)].append(c)
    return out


def _without_repetition(c: CellResult) -> tuple[tuple[str, str | None], ...]:
    """A cell's coordinates but its repetition: the key its repetitions share."""
    return tuple((a, c.label(a)) for a in sorted(c.record.coordinates) if a != "repetition")


def _metrics(c: CellResult) -> CellMetrics:
    """A valid cell's metrics (tables hold valid cells only)."""
    assert c.metrics is not None
    return c.metrics


def _fairness(m: CellMetrics, index: str) -> float | None:
    """The scenario's fairness figure (analysis: fairness): Jain's index or the ratio."""
    return m.jain if index == "jain" else m.ratio


def _capacity(m: CellMetrics) -> float | None:
    """The payload capacity of every direction the flows used (metrics.json), Mbit/s."""
    return sum(c.mean_mbit for c in m.capacity.values()) if m.capacity else None


def _utilisation(m: CellMetrics) -> float | None:
    """The flows' data over the capacity (%): the directions' utilisations weighted by their capacity."""
    caps = {d: c.mean_mbit for d, c in m.capacity.items() if d in m.utilisation}
    total = sum(caps.values())
    return 100 * sum(m.utilisation[d] * v for d, v in caps.items()) / total if total else None


def _link_columns(group: list[CellResult]) -> dict[str, Stat | None]:
    return {"capacity": stat([v for g in group if (v := _capacity(_metrics(g))) is not None]),
            "utilisation": stat([v for g in group if (v := _utilisation(_metrics(g))) is not None])}


def fairness_table(s: ScenarioResult) -> dict[str, Any] | None:
    """Rows: one per cell (repetitions folded), for cells with two or more flows."""
    cells = [c for c in s.cells if c.valid and len(_metrics(c).flows) >= 2]
    if not cells:
        return None
    axes = [a for a in s.swept if a not in ROW_SKIP and a != "cc"] or ["rate", "qdisc"]
    nflows = max(len(_metrics(c).flows) for c in cells)
    fairness = s.scenario.analysis.fairness
    rows = []
    for group in _groups(cells, _without_repetition).values():
        first = group[0]
        flows = _metrics(first).flows
        row = {"cell": first.name, "dir": first.dir.name, "axes": [first.label(a) or "" for a in axes],
               "flows": [{"label": f.label, "steady": stat([_metrics(g).flows[i].steady_mbit for g in group])}
                         for i, f in enumerate(flows)],
               "fairness": stat([_fairness(_metrics(g), fairness) for g in group]), **_link_columns(group),
               "n": len(group), "flagged": any(g.flags for g in group)}
        rows.append(row)
    return {"axes": axes, "nflows": nflows, "fairness": fairness, "rows": rows,
            "window": _metrics(cells[0]).steady_window_s}


def per_cc_table(s: ScenarioResult) -> dict[str, Any] | None:
    """Pantheon style: per scheme (and every other swept axis but repetition), one value
    per run, then mean ± 95 % CI over runs: the scheme's throughput (its flows' goodput),
    the 95th percentile one-way delay (mean over its flows in the run), loss (pooled over
    its flows' data packets) and, for reference, its 95th percentile TCP RTT and
    retransmits. A cell of mixed CCs (cubic-vs-dctcp) gives a row per scheme ("flow cc")."""
    cells = [c for c in s.cells if c.valid]
    if not cells:
        return None
    axes = [a for a in s.swept if a not in ("repetition",)] or ["cc"]
    mixed = any(len({f.cc for f in _metrics(c).flows}) > 1 or any(f.scheme for f in _metrics(c).flows) for c in cells)
    clocks = {c.name: clock_kind(c) for c in cells}
    split = len(set(clocks.values())) > 1  # one-way delays on different clocks are never averaged together
    rows = []
    groups = _groups(cells, lambda c: (*(c.label(a) for a in axes), *((clocks[c.name],) if split else ())))
    # a sub-matrix that does not sweep an axis leaves its cells without a label on it
    for key, group in sorted(groups.items(), key=lambda kg: tuple(label or "" for label in kg[0])):
        schemes = dict.fromkeys((f.cc, f.shown_cc) for g in group for f in _metrics(g).flows)
        for scheme, shown in schemes if mixed else [(None, None)]:
            runs = [[f for f in _metrics(g).flows if scheme in (None, f.cc)] for g in group]
            rows.append({"axes": [*key, shown] if mixed else list(key), **_per_run(runs), **_link_columns(group),
                         "n": len(group), "flagged": any(g.flags for g in group)})
    return {"axes": [*axes, *(["clock"] if split else []), *(["flow cc"] if mixed else [])], "rows": rows,
            "clock": clock_note(cells)}


def clock_kind(c: CellResult) -> str:
    """How the cell's one-way delays were read: on the hosts' one clock, with the server's
    clock corrected, or not at all (hosts of their own clocks, the offset unmeasured)."""
    if c.record.backend.shared_clock:
        return "one clock"
    return "corrected" if _metrics(c).clock else "none"


def clock_note(cells: list[CellResult]) -> str:
    """How the table's one-way delays were made comparable, for its text."""
    corrected = [m.clock for c in cells if (m := _metrics(c)).clock]
    if not corrected:
        if all(c.record.backend.shared_clock for c in cells):
            return "the hosts share one clock"
        return "the hosts keep clocks of their own, whose offset could not be measured: no one-way delay"
    offsets = [k.offset_ms for k in corrected]
    drift = max(abs(k.drift_ms) for k in corrected if k.drift_ms is not None) if any(k.drift_ms is not None for k in corrected) else None
    moved = f", moving by at most {drift:.2f} ms over a test" if drift is not None else ", measured once (no drift known)"
    return (f"the hosts keep clocks of their own: the server's capture is read on the client's clock, its offset "
            f"({min(offsets):.2f} to {max(offsets):.2f} ms) measured from Flent's pings in both captures (NTP's on-wire "
            f"calculation){moved}, exact where a ping took as long each way and off by at most "
            f"{max(k.bound_ms for k in corrected):.2f} ms where it did not")


def _per_run(runs: list[list[FlowMetrics]]) -> dict[str, Stat | None]:
    """One value per run (its flows of the scheme), then their statistics over runs."""
    def each(value: Callable[[list[FlowMetrics]], float | None]) -> Stat | None:
        return stat([v for flows in runs if flows and (v := value(flows)) is not None])

    def mean(values: list[float]) -> float | None:
        return statistics.fmean(values) if values else None

    def pooled_loss(flows: list[FlowMetrics]) -> float | None:
        owd = [f.owd_ms for f in flows if f.owd_ms and f.owd_ms.sent]
        return 100 * sum(o.loss * o.sent for o in owd) / sum(o.sent for o in owd) if owd else None

    def pantheon_loss(flows: list[FlowMetrics]) -> float | None:
        owd = [(o.loss_by_end, o.sent) for f in flows if (o := f.owd_ms) and o.sent and o.loss_by_end is not None]
        return 100 * sum(loss * sent for loss, sent in owd) / sum(sent for _, sent in owd) if owd else None

    return {"throughput": each(lambda fs: sum(f.mean_mbit or 0 for f in fs)),
            "owd_p95": each(lambda fs: mean([f.owd_ms.p95 for f in fs if f.owd_ms and f.owd_ms.p95 is not None])),
            "loss": each(pooled_loss), "loss_pantheon": each(pantheon_loss),
            "rtt_p95": each(lambda fs: mean([f.tcp_rtt_ms.p95 for f in fs if f.tcp_rtt_ms])),
            "retrans": each(lambda fs: sum(f.pcap.retrans for f in fs if f.pcap and f.pcap.retrans is not None)
                            if any(f.pcap and f.pcap.retrans is not None for f in fs) else None)}


def udp_table(s: ScenarioResult) -> dict[str, Any] | None:
    """The competing UDP flow per cell (repetitions folded): what iperf sent and what
    arrived, its loss and jitter, beside the TCP flows' aggregate goodput."""
    def row(udp: list[UdpFlow]) -> dict[str, Any]:
        return {"declared": udp[0].declared_mbit, "sent": stat([u.sent_mbit for u in udp]),
                "received": stat([u.received_mbit for u in udp]), "loss": stat([u.loss_pct for u in udp]),
                "jitter": stat([u.jitter_ms for u in udp])}
    return _side_flow_table(s, lambda m: m.udp, row)


def video_table(s: ScenarioResult) -> dict[str, Any] | None:
    """The video flow per cell (repetitions folded): frames and payload sent and received,
    frames lost, each frame's delay (median, p99) and CE marks, beside the TCP flows' total."""
    def row(video: list[VideoFlow]) -> dict[str, Any]:
        delays = [v.frame_delay_ms for v in video]
        return {"declared": video[0].declared_mbit, "fps": video[0].declared_fps,
                "sent": stat([v.sent_mbit for v in video]), "received": stat([v.received_mbit for v in video]),
                "received_fps": stat([v.received_fps for v in video]), "loss": stat([v.frame_loss_pct for v in video]),
                "delay_median": stat([d.median if d else None for d in delays]),
                "delay_p99": stat([d.p99 if d else None for d in delays]), "ce": stat([v.ce_pct for v in video])}
    return _side_flow_table(s, lambda m: m.video, row)


def probe_table(s: ScenarioResult) -> dict[str, Any] | None:
    """The latency probe per cell (repetitions folded): the queueing delay the flows
    induce on it (median, p99, p99.9), its round trip and losses, beside the TCP flows' total."""
    def row(probes: list[ProbeFlow]) -> dict[str, Any]:
        queued = [p.queueing_ms for p in probes]
        return {"codepoint": probes[0].codepoint, "interval": probes[0].interval_ms,
                "source": probes[0].queueing_from or "–",
                "median": stat([q.median if q else None for q in queued]), "p99": stat([q.p99 if q else None for q in queued]),
                "p999": stat([q.p999 if q else None for q in queued]),
                "rtt": stat([p.rtt_ms.median if p.rtt_ms else None for p in probes]), "lost": stat([p.lost_pct for p in probes])}
    return _side_flow_table(s, lambda m: m.probe, row)


def signals_table(s: ScenarioResult) -> dict[str, Any] | None:
    """The congestion signals per cell (repetitions folded): the bottleneck qdisc's drops,
    early (the AQM's) and forced (a full queue), its ECN marks and dualpi2's step marks, in
    flow 1's direction, from tc's counters; each endpoint's retransmitted segments and
    retransmission timeouts, from its TCP counters. None where no cell has either."""
    cells = [c for c in s.cells if c.valid and (_metrics(c).qdisc_totals or _metrics(c).tcp_counters)]
    if not cells:
        return None
    axes = [a for a in s.swept if a != "repetition" and len({c.label(a) for c in cells}) > 1] or ["qdisc"]
    rows = []
    for group in _groups(cells, _without_repetition).values():
        ms = [_metrics(g) for g in group]
        direction = group[0].record.config.flows[0].direction if group[0].record.config.flows else "up"
        totals = [m.qdisc_totals.get(direction) for m in ms]
        qdisc = {k: stat([getattr(t, k) if t else None for t in totals])
                 for k in ("drops", "early_drops", "forced_drops", "ecn_marks", "step_marks")}
        hosts = {h: {k: stat([m.tcp_counters.get(h, {}).get(k) for m in ms]) for k in ("RetransSegs", "TCPTimeouts")}
                 for h in ("cli", "srv")}
        rows.append({"axes": [group[0].label(a) or "" for a in axes], "kind": totals[0].kind if totals[0] else "–",
                     "direction": direction, **qdisc, "hosts": hosts, "n": len(group),
                     "flagged": any(g.flags for g in group)})
    return {"axes": axes, "rows": rows}


def _side_flow_table(s: ScenarioResult, flow_of: Callable[[CellMetrics], Any], row: Callable[[list[Any]], dict[str, Any]]
                     ) -> dict[str, Any] | None:
    """A table of the cells that have a flow beside the TCP ones (FLOW_OF reads it from a
    cell's metrics; ROW makes its figures from the repetitions' flows): one row per cell,
    repetitions folded, with the TCP flows' total goodput."""
    cells = [c for c in s.cells if c.valid and flow_of(_metrics(c)) is not None]
    if not cells:
        return None
    varying = [a for a in s.swept if a != "repetition" and len({c.label(a) for c in cells}) > 1]
    axes = varying or ["qdisc"]  # the axes that tell these cells apart
    rows = []
    for group in _groups(cells, _without_repetition).values():
        flows = [f for g in group if (f := flow_of(_metrics(g))) is not None]  # every cell here has one
        rows.append({"axes": [group[0].label(a) or "" for a in axes], **row(flows),
                     "tcp": stat([sum(f.mean_mbit or 0 for f in _metrics(g).flows) for g in group]),
                     "n": len(group), "flagged": any(g.flags for g in group)})
    return {"axes": axes, "rows": rows}
