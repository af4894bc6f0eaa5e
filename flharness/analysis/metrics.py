"""Per-cell metrics from a cell's folder: Flent's data (through Flent's ResultSet), the
socket statistics Flent sampled, and the pcaps.

Time windows (Flent's time axis, t = 0 when its ping starts; flows run from the lead-in
plus their start delay until lead-in + length):
  * steady state: a window of W seconds ending 1 s before the flow's last socket sample
    (the predecessor's D_SS definition; W defaults to min(60 s, 2/3 of the test));
  * under load: while every flow runs; * base: the lead-in, before any flow starts;
  * mean goodput: data the receiver acknowledged between the flow's declared start and
    the end of the test, over that time, from the receiver's capture (delivery.py).
    netperf's end-of-test mean is kept as netperf_mbit: it is the sender's count of
    bytes written into its socket, which exceeds what the path can carry.
  * one-way delay and loss: each data segment matched between the two captures.
  * the bottleneck queue (queue.py): backlog and its drain time at the link rate,
    sampled at the middlebox while every flow runs.
Utilisation is relative to the link's payload capacity: TCP payload per Ethernet frame
as HTB counts it, rate × 1448/1514 at a 1500-byte MTU with TCP timestamps.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..results.cell_metrics import CellMetrics, FlowMetrics, PcapCounts, Percentiles, Ping, QdiscTotals, QueueSummary
from ..results.cell_record import CellConfig, CellRecord, Direction
from ..run.flent_data import delivered_mbit, first_data_s
from . import delivery, flentlib, pcap, qdisc_stats, queue
from .flows import FlowInfo, declared_flows, match_connections

NEAR_ZERO = 0.01  # a flow below this share of the link rate is flagged as starved
PAYLOAD_SHARE = 1448 / 1514  # TCP payload per Ethernet frame at a 1500-byte MTU
OVER_CAPACITY = 1.01  # goodput above this × payload capacity is a measurement error
PEAK_INTERVAL = 1.0  # seconds: the aggregate goodput's peak is the best such interval
SHOULD_FILL = 0.90  # bulk flows that never reach this share of the capacity: flagged
BULK_TEST_RE = re.compile(r"^tcp_(\d+|n)?(up|down)$|^tcp_bidirectional$")


def payload_capacity_bps(rate_bps: float) -> float:
    """The most TCP payload a link of RATE_BPS (Ethernet frames) can carry."""
    return rate_bps * PAYLOAD_SHARE


@dataclass(frozen=True)
class Settings:
    steady_window: float | None = None  # seconds; None = min(60, 2/3 of the test)

    def window(self, length: float) -> float:
        return self.steady_window or min(60.0, round(length * 2 / 3))


def analyse(cell_dir: Path, record: CellRecord, settings: Settings) -> CellMetrics:
    """Everything fl reports about one cell that ran (status ok or failed)."""
    out = CellMetrics(cell=record.cell)
    if record.status != "ok":
        out.invalid.append(f"cell {record.status}: {record.reason}")
    data_file = cell_dir / f"{record.cell}.flent.gz"
    if not data_file.is_file():
        out.invalid.append("no Flent data file")
        return out
    if record.endpoints is None:
        out.invalid.append("cell.json does not record the testbed's endpoints")
        return out
    rs = flentlib.load(data_file)
    length = float(rs.meta("LENGTH"))
    lead = (float(rs.meta("TOTAL_LENGTH")) - length) / 2
    flows = declared_flows(record.config, rs.series_names)
    window = settings.window(length)
    out.steady_window_s = window
    out.flows = [_flow(rs, f, lead, length, window) for f in flows]
    all_run = lead + max((f.start_s for f in flows), default=0)
    out.ping_ms = _ping(rs, lead, all_run, lead + length)
    out.t0 = rs.t0
    out.queue = _queues(cell_dir, record.config, rs.t0, (all_run, lead + length), {f.direction for f in flows})
    out.qdisc_totals = {d: QdiscTotals.model_validate(q) for d, q in qdisc_stats.bottleneck_totals(
        cell_dir / "teardown.log", cell_dir / queue.QUEUE_LOG).items()}
    edges = rs.t0 + np.arange(all_run, lead + length + 1e-9, PEAK_INTERVAL)
    out.peak_mbit = _add_capture_figures(out.flows, flows, cell_dir, rs, record, lead, length, edges)
    _add_aggregates(out, record.config)
    out.invalid += _problems(out, rs, record.config)
    out.flags = _flags(out, record)
    return out


def cell_metrics(cell_dir: Path, record: CellRecord | dict[str, Any], settings: Settings) -> dict[str, Any]:
    """analyse() as JSON data (metrics.json's content without its key), for readers
    outside fl that hold cell.json's data (the tests)."""
    return analyse(cell_dir, CellRecord.model_validate(record), settings).model_dump(mode="json")


def _flow(rs: Any, f: FlowInfo, lead: float, length: float, window: float) -> FlowMetrics:
    rates = [(t, v) for t, v in rs.raw_series(f.series, raw_key="tcp_delivery_rate") if v]
    steady = None
    if rates:
        end = rates[-1][0] - 1.0
        in_window = [v for t, v in rates if end - window < t < end]
        steady = float(np.mean(in_window)) if in_window else None
    rtts = [v for t, v in rs.raw_series(f.series, raw_key="tcp_rtt")
            if lead + f.start_s <= t <= lead + length and v]
    raw = rs.raw_values.get(f.series, [])
    in_test = delivered_mbit(raw, rs.t0, lead + f.start_s, lead + length)
    netperf = rs.series_meta(f.series, "MEAN_VALUE")
    return FlowMetrics(index=f.index, series=f.series, direction=f.direction, cc=f.cc, rtt_ms=f.rtt_ms,
                       start_s=f.start_s, label=f.label, mean_mbit=netperf if in_test is None else in_test,
                       goodput_source="netperf (sender side)", netperf_mbit=netperf,
                       first_data_s=first_data_s(raw, rs.t0), steady_mbit=steady, tcp_rtt_ms=_stats(rtts),
                       socket_samples=len(rates))


def _ping(rs: Any, lead: float, loaded_from: float, loaded_to: float) -> Ping | None:
    name = "Ping (ms) ICMP"
    if name not in rs:
        return None
    pts = [(t, v) for t, v in zip(rs.x_values, rs.series(name)) if v is not None]
    base = [v for t, v in pts if t < lead - 0.5]
    loaded = [v for t, v in pts if loaded_from <= t < loaded_to]
    return Ping(base_median=float(np.median(base)) if base else None, loaded=_stats(loaded))


def _queues(cell_dir: Path, config: CellConfig, t0: float, window: tuple[float, float],
            directions: set[Direction]) -> dict[Direction, QueueSummary | None]:
    """Per direction with flows, its bottleneck queue while every flow runs."""
    log = cell_dir / queue.QUEUE_LOG
    series = queue.load(log) if log.is_file() else {}
    return {d: queue.summary(series[d], t0, window, config, d) for d in sorted(directions & series.keys())}


def _stats(values: list[float]) -> Percentiles | None:
    if not values:
        return None
    p50, p95, p99 = np.percentile(values, [50, 95, 99])
    return Percentiles(median=float(p50), p95=float(p95), p99=float(p99), n=len(values))


def _add_capture_figures(rows: list[FlowMetrics], flows: list[FlowInfo], cell_dir: Path, rs: Any,
                         record: CellRecord, lead: float, length: float, edges: np.ndarray) -> dict[Direction, float]:
    """From the two captures: each flow's goodput at the receiver, one-way delay and loss,
    retransmissions on the sender's side, ECN codepoints on the receiver's. Returns the
    peak aggregate goodput per direction over the intervals between EDGES (epoch s)."""
    assert record.endpoints is not None
    sides: dict[Direction, tuple[str, str]] = {"up": ("cli", "srv"), "down": ("srv", "cli")}
    loaded: dict[str, tuple] = {}
    acked: dict[Direction, list[np.ndarray]] = {}
    owd_why = _no_owd_reason(record)
    for direction, (sender, receiver) in sides.items():
        pcaps = {h: cell_dir / f"{h}.pcap.xz" for h in (sender, receiver)}
        if not any(f.direction == direction for f in flows) or not all(p.is_file() for p in pcaps.values()):
            continue
        for h, p in pcaps.items():
            if h not in loaded:
                loaded[h] = pcap.load(p)
        (s_pk, s_conns), (r_pk, r_conns) = loaded[sender], loaded[receiver]
        match = match_connections(flows, direction, s_conns, record.endpoints, cell_dir / f"{sender}.ss.log")
        for row in rows:
            if (key := match.get(row.index)) is None:
                continue
            sent, got = s_conns[key], r_conns.get(key)
            row.pcap = _counts(sent, got)
            if got is None:
                continue
            window = (rs.t0 + lead + row.start_s, rs.t0 + lead + length)
            if (mean := delivery.acked_mbit(r_pk, got, *window)) is not None:
                row.mean_mbit, row.goodput_source = mean, f"receiver ({receiver} capture, ACKs)"
                acked.setdefault(direction, []).append(delivery.acked_bytes(r_pk, got, edges))
            row.owd_ms = None if owd_why else delivery.one_way(s_pk, sent, r_pk, got, *window)
    for row in rows:
        if row.owd_ms is None:
            row.owd_unavailable = owd_why or "the flow's packets are not visible in both captures"
    return {d: peak for d, per_flow in acked.items() if (peak := delivery.peak_mbit(per_flow, edges)) is not None}


def _no_owd_reason(record: CellRecord) -> str | None:
    """Why one-way delay cannot be measured in this cell, or None."""
    if not record.backend.shared_clock:
        return "the testbed's hosts have clocks of their own (not known to be synchronised)"
    return None


def _counts(sent: pcap.Conn, received: pcap.Conn | None) -> PcapCounts:
    got = received.data if received else 0
    return PcapCounts(sent=sent.data, received=got, retrans=sent.retrans,
                      loss=(sent.data - got) / sent.data if sent.data else None,
                      ecn_received=dict(received.ecn) if received else {}, dscp=sent.dscp)


def _add_aggregates(out: CellMetrics, config: CellConfig) -> None:
    steady = [f.steady_mbit for f in out.flows]
    if len(steady) > 1 and all(s is not None for s in steady) and sum(steady) > 0:
        out.jain = sum(steady) ** 2 / (len(steady) * sum(s * s for s in steady))
        out.ratio = max(steady) / min(steady) if min(steady) > 0 else None
    out.utilisation = {}
    for direction in ("up", "down"):
        means = [f.mean_mbit for f in out.flows if f.direction == direction]
        capacity = payload_capacity_bps(config.bottleneck.of(direction).rate_bps)
        if means and all(m is not None for m in means):
            out.utilisation[direction] = sum(means) * 1e6 / capacity


def _problems(out: CellMetrics, rs: Any, config: CellConfig) -> list[str]:
    """What makes a cell's numbers untrustworthy: it is left out of the tables."""
    problems = []
    if rs.meta("FAILED_RUNNERS"):
        problems.append(f"Flent runners failed: {rs.meta('FAILED_RUNNERS')}")
    if not out.flows:
        problems.append("no TCP flow series in the Flent data")
    for f in out.flows:
        if f.mean_mbit is None:
            problems.append(f"flow {f.index}: no goodput measured")
        elif not f.socket_samples and not _starved(f, config):  # a starved flow may have none
            problems.append(f"flow {f.index}: no socket statistics (tcp_delivery_rate)")
    return problems


def _starved(f: FlowMetrics, config: CellConfig) -> bool:
    rate = config.bottleneck.of(f.direction).rate_bps
    return f.mean_mbit is not None and f.mean_mbit * 1e6 < NEAR_ZERO * rate


def _limited_by_more_than_the_rate(config: CellConfig) -> bool:
    """A rate schedule, pacing client qdisc, competing UDP, tunnel overhead or netem impairment."""
    return any(v is not None for v in (config.rate_schedule, config.client_qdisc, config.udp, config.tunnel,
                                       config.netem))


def _unfilled(peaks: dict[Direction, float], config: CellConfig) -> list[str]:
    """Directions whose bulk TCP flows never filled the link: their best second stayed
    below SHOULD_FILL × the payload capacity. Judged only where nothing but the declared
    rate limits them; RRUL's flows share the link with its pings."""
    if not peaks or not BULK_TEST_RE.match(config.test) or _limited_by_more_than_the_rate(config):
        return []
    out = []
    for direction, peak in sorted(peaks.items()):
        capacity = payload_capacity_bps(config.bottleneck.of(direction).rate_bps) / 1e6
        if peak < SHOULD_FILL * capacity:
            out.append(f"{direction} goodput peaked at {peak:.3g} Mbit/s ({peak / capacity:.0%} of the payload "
                       f"capacity) in its best {PEAK_INTERVAL:g} s: bulk TCP flows should fill the link")
    return out


def _flags(out: CellMetrics, record: CellRecord) -> list[str]:
    """Findings worth a reader's attention that are results, not harness failures: goodput
    above the payload capacity (a measurement error), a path that did not behave as
    declared (cell.json's checks.calibration, and bulk flows that never filled the link),
    a flow starved by the path (near-zero goodput) or whose data began late (its
    connection could not start in time; checks.late_start_s)."""
    flags = [f"{direction} goodput is {u:.1%} of the payload capacity: impossible, a measurement error"
             for direction, u in out.utilisation.items() if u > OVER_CAPACITY]
    checks = record.checks
    flags += [f"calibration: {reason}" for reason in (checks.calibration.reasons if checks.calibration else [])]
    flags += [f"calibration: {reason}" for reason in _unfilled(out.peak_mbit, record.config)]
    for f in out.flows:
        if _starved(f, record.config):
            flags.append(f"flow {f.index} ({f.label}): starved, {f.mean_mbit:.3g} Mbit/s in the test")
        if f.series in checks.late_start_s:
            flags.append(f"flow {f.index} ({f.label}): data began {checks.late_start_s[f.series]:g} s late")
    return flags
