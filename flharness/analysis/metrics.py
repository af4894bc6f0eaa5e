"""Per-cell metrics from a cell's files (CellFiles, each read once): Flent's data (through
Flent's ResultSet), the socket statistics Flent and fl sampled, and the pcaps. Every
figure is a function of those values; analyse() brings them together.

Time windows (Flent's time axis, t = 0 when its ping starts; flows run from the lead-in
plus their start delay until lead-in + length):
  * steady state: a window of W seconds ending 1 s before the flow's last socket sample
    (the predecessor's D_SS definition; W defaults to min(60 s, 2/3 of the test)); a
    sample on either bound is in it, whatever its few ms of lateness. The samples are the
    sending socket's: Flent's for upload flows (it samples the client),
    the server's own ss samples for download flows (ss_samples.py). A delivery-rate
    sample above the link's rate (a burst through HTB in slow start, 156 Mbit/s on a
    4 Mbit/s link) is not the link's rate: it is left out, and counted;
  * under load: while every flow runs; * base: the lead-in, before any flow starts;
  * mean goodput: data delivered between the flow's declared start and the end of the
    test, over that time, from the receiver's capture: what its ACKs passed in the
    window and first arrived in it (delivery.py). netperf's end-of-test mean is kept as
    netperf_mbit: it is the sender's count of bytes written into its socket, which
    exceeds what the path can carry.
  * one-way delay and loss: each data segment matched between the two captures.
  * the bottleneck queue (queue.py): backlog and its drain time at the link rate,
    sampled at the middlebox while every flow runs.
Utilisation per direction is what its flows delivered over one window, from the first
flow's declared start to the end of the test, relative to what the link's payload
capacity (TCP payload per Ethernet frame as HTB counts it, rate × 1448/1514 at a
1500-byte MTU with TCP timestamps; link.py) carries over that window, each step of a
rate schedule at its time.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..flent_tests import PING
from ..frames import FRAME_BYTES, PAYLOAD_SHARE
from ..hosts import CLIENT, ENDPOINTS, SCHEME_PORT, SERVER
from ..results import cell_folder
from ..results.cell_metrics import (
    Capacity,
    CellMetrics,
    ClockOffset,
    FlowMetrics,
    IpsecEnd,
    OneWayDelay,
    PcapCounts,
    Percentiles,
    Ping,
    ProbeFlow,
    QdiscTotals,
    QueueSummary,
    RttSpike,
    UdpFlow,
    VideoFlow,
)
from ..results.cell_record import CellConfig, CellRecord, Direction
from ..results.cell_series import CellSeries, FlowSeries
from ..results.flags import Flag, FlagCode, calibration_flag
from ..units import Rate
from . import clock, datagrams, delivery, pcap, qdisc_stats, queue
from .cell_files import CellFiles
from .flent_data import delivered_mbit, first_data_s
from .flows import FlowInfo, declared_flows, match_connections
from .ipsec_stats import ipsec_end
from .link import capacity, highest_rate, payload_capacity_bps, rate_at
from .probe import probe_flow
from .rtt_spike import rtt_spike
from .ss_samples import SocketSamples
from .tcp_counters import tcp_counters
from .udp_flow import udp_flow
from .video import video_flow

NEAR_ZERO = 0.01  # a flow below this share of the link rate is flagged as starved
OVER_CAPACITY = 1.01  # goodput above this × payload capacity is a measurement error
RATE_SAMPLE_SPAN = 1.0  # s: a delivery-rate sample is judged against the highest rate this long before it
# s: socket samplers tick on a fixed grid (Flent every 0.2 s, fl-ss-sample every 1 s), each
# sample late by a few ms; a steady window's bounds fall on that grid, so a sample on a bound
# is in the window (closed), whatever its lateness
GRID_JITTER_S = 0.05
#: The metrics an impossible D_SS, or an impossible goodput, puts in doubt (the others of
#: the cell are still judged: report/measures.py names).
STEADY_METRICS = ("dss_mbit", "jain", "ratio")
GOODPUT_METRICS = ("goodput_mbit", "goodput_total_mbit", "utilisation")
SIDES: dict[Direction, tuple[str, str]] = {"up": ("cli", "srv"), "down": ("srv", "cli")}  # (sender, receiver)
DIRECTIONS: tuple[Direction, Direction] = ("up", "down")
PEAK_INTERVAL = 1.0  # seconds: the aggregate goodput's peak is the best such interval
CLOCK_SETTLE_S = 1.0  # the pings this long after the flows end (their queue drained) are the clock's second reading
SHOULD_FILL = 0.90  # bulk flows that never reach this share of the capacity: flagged
STANDING_QUEUE_PKTS = 10  # a mean backlog this deep while the link is unfilled: the shaper was short
GOODPUT_INTERVAL = 0.1  # s: the goodput series' interval (series.npz, the box plots), at least
GOODPUT_FRAMES = 20  # full-size frames at the link's rate
BULK_TEST_RE = re.compile(r"^tcp_(\d+|n)?(up|down)$|^tcp_bidirectional$")


@dataclass(frozen=True)
class Settings:
    steady_window: float | None = None  # seconds; None = min(60, 2/3 of the test)

    def window(self, length: float) -> float:
        return self.steady_window or min(60.0, round(length * 2 / 3))


@dataclass(frozen=True)
class Recorded:
    """What was recorded of a cell, which every figure reads: its record, its files,
    Flent's data and the test's time axis (Flent's: t = 0 when its ping starts)."""

    record: CellRecord
    files: CellFiles
    rs: Any  # Flent's ResultSet
    lead: float  # Flent's lead-in, s
    length: float  # the test's, s
    flows: list[FlowInfo]
    clock: ClockOffset | str | None = None  # hosts with clocks of their own: the server's offset, or why not measured

    @property
    def config(self) -> CellConfig:
        return self.record.config

    @property
    def all_run(self) -> float:
        """When the last flow starts (Flent's axis)."""
        return self.lead + max((f.start_s for f in self.flows), default=0)

    @property
    def end(self) -> float:
        return self.lead + self.length


@dataclass
class Captured:
    """One flow's figures from the two captures."""

    pcap: PcapCounts
    mean_mbit: float | None = None  # goodput at the receiver, where its capture has the flow's data
    source: str | None = None
    owd: OneWayDelay | None = None
    series: FlowSeries | None = None
    delivered: NDArray[np.int64] | None = None  # bytes per peak interval (for the aggregate's peak)
    payload_share: float | None = None  # a scheme's datagrams: their payload's share of their frames


@dataclass
class Sampled:
    """One flow's figures from its sending socket's samples."""

    source: str | None = None
    samples: int = 0
    tcp_rtt: Percentiles | None = None
    steady_mbit: float | None = None
    steady_excluded: int = 0
    flag: Flag | None = None  # about its D_SS: above the payload capacity, or none in its window
    rtt_spike: RttSpike | None = None  # after a step of the rate schedule


@dataclass(frozen=True)
class Analysis:
    """A cell's metrics (metrics.json) and each flow's per-packet delays and goodput per
    interval (series.npz)."""

    metrics: CellMetrics
    series: CellSeries


def analyse(files: CellFiles, record: CellRecord, settings: Settings) -> Analysis:
    """Everything fl reports about one cell that ran (status ok or failed). Each figure
    comes from a function of its own; they meet here, once."""
    invalid = [f"cell {record.status}: {record.reason}"] if record.status != "ok" else []
    rs = files.resultset
    if rs is None:
        return Analysis(CellMetrics(cell=record.cell, invalid=[*invalid, "no Flent data file"]), CellSeries())
    if record.endpoints is None:
        return Analysis(CellMetrics(cell=record.cell, invalid=[*invalid, "cell.json does not record the testbed's endpoints"]),
                        CellSeries())
    length = float(rs.meta("LENGTH"))
    lead = (float(rs.meta("TOTAL_LENGTH")) - length) / 2
    if record.config.kernel_test is PING:  # its ping ran the whole run: the test is the cell's own
        lead, length = float(record.config.lead_s), float(record.config.length)
    flows_info = declared_flows(record.config, rs.series_names)
    test = Recorded(record, files, rs, lead, length, flows_info, server_clock(files, record, rs.t0, lead, length, flows_info))
    window = settings.window(length)
    edges = rs.t0 + np.arange(test.all_run, test.end + 1e-9, PEAK_INTERVAL)
    captured, keys = captures(test, edges)
    captured |= scheme_captures(test, edges)
    sampled = {f.index: socket_figures(test, f, keys.get(f.index), window) if f.series else
               series_figures(test, f, captured.get(f.index), window) for f in test.flows}
    flows = [flow_row(test, f, captured.get(f.index), sampled[f.index]) for f in test.flows]
    peaks = peak_mbit(captured, test, edges)
    capacities = {d: capacity(test.config, d, test.lead + min(f.start_s for f in flows if f.direction == d), test.end)
                  for d in DIRECTIONS if any(f.direction == d for f in flows)}
    udp_up: set[Direction] = {"up"} if test.config.video or test.config.probe else set()  # they go client → server
    queues = _queues(files, test.config, rs.t0, (test.all_run, test.end), {f.direction for f in test.flows} | udp_up)
    utilisation = _utilisation(flows, capacities, test.lead, length)
    jain, ratio = _fairness(flows)
    flags = _flags(record, flows, utilisation, peaks, capacities, queues,
                   [s.flag for s in sampled.values() if s.flag]) + _cpu_flags(flows, length)
    udp, udp_flag = _udp(files)
    video, video_flag = _video(files)
    probe, probe_flag = _probe(files, record)
    metrics = CellMetrics(ipsec=_ipsec(files), tcp_counters=_tcp_counters(files),
        cell=record.cell, invalid=invalid + _problems(flows, rs, record.config), flags=flags + udp_flag + video_flag + probe_flag,
        steady_window_s=window, flows=flows, ping_ms=_ping(rs, test.lead, test.all_run, test.end), t0=rs.t0,
        queue=queues, qdisc_totals=_qdisc_totals(files), peak_mbit=peaks, jain=jain, ratio=ratio,
        capacity=capacities, utilisation=utilisation, udp=udp, video=video, probe=probe,
        clock=test.clock if isinstance(test.clock, ClockOffset) else None)
    return Analysis(metrics, _series(test, captured))


def analyse_folder(cell_dir: Path, record: CellRecord, settings: Settings) -> Analysis:
    """analyse() of the cell whose files are in CELL_DIR."""
    return analyse(CellFiles.of(cell_dir, record), record, settings)


def cell_metrics(cell_dir: Path, record: CellRecord | dict[str, Any], settings: Settings) -> dict[str, Any]:
    """analyse() as JSON data (metrics.json's content without its key), for readers
    outside fl that hold cell.json's data (the tests)."""
    return analyse_folder(cell_dir, CellRecord.model_validate(record), settings).metrics.model_dump(mode="json")


def flow_row(test: Recorded, f: FlowInfo, captured: Captured | None, sampled: Sampled) -> FlowMetrics:
    """A flow's row: its goodput from the receiver's capture where that has the flow's
    data, else from Flent's samples of netperf (what the sender wrote)."""
    raw = test.rs.raw_values.get(f.series, []) if f.series else []
    netperf = test.rs.series_meta(f.series, "MEAN_VALUE") if f.series else None
    in_test = delivered_mbit(raw, test.rs.t0, test.lead + f.start_s, test.end)
    mean, source = (netperf if in_test is None else in_test), "netperf (sender side)"
    if captured is not None and captured.mean_mbit is not None:
        mean, source = captured.mean_mbit, captured.source or source
    why = None if captured is not None and captured.owd is not None else (
        _no_owd_reason(test) or "the flow's packets are not visible in both captures")
    return FlowMetrics(index=f.index, series=f.series, direction=f.direction, cc=f.cc, rtt_ms=f.rtt_ms,
                       start_s=f.start_s, label=f.label, mean_mbit=mean, goodput_source=source, netperf_mbit=netperf,
                       first_data_s=first_data_s(raw, test.rs.t0), steady_mbit=sampled.steady_mbit,
                       tcp_rtt_ms=sampled.tcp_rtt, socket_samples=sampled.samples, socket_source=sampled.source,
                       steady_excluded=sampled.steady_excluded, rtt_spike=sampled.rtt_spike, pcap=captured.pcap if captured else None,
                       owd_ms=captured.owd if captured else None, owd_unavailable=why,
                       payload_share=captured.payload_share if captured else None, scheme=f.scheme,
                       cpu_s=_scheme_cpu(test.files, f.index) if f.scheme else {})


def _udp(files: CellFiles) -> tuple[UdpFlow | None, list[Flag]]:
    if not files.config.udp:
        return None, []
    udp = udp_flow(files.text(cell_folder.UDP_LOG), Rate.parse(files.config.udp).bps)
    if isinstance(udp, str):
        return None, [Flag(kind="incomplete", code="udp_unreported", text=f"udp flow: {udp}")]
    return udp, []


def _video(files: CellFiles) -> tuple[VideoFlow | None, list[Flag]]:
    if not files.config.video:
        return None, []
    video = video_flow(files.datagrams("cli"), files.datagrams("srv"), files.config.video)
    if isinstance(video, str):
        return None, [Flag(kind="incomplete", code="video_unreported", text=f"video flow: {video}")]
    return video, []


def _probe(files: CellFiles, record: CellRecord) -> tuple[ProbeFlow | None, list[Flag]]:
    if not record.config.probe:
        return None, []
    probe = probe_flow(files.probe, record.config.probe, record.backend.shared_clock)
    if isinstance(probe, str):
        return None, [Flag(kind="incomplete", code="probe_unreported", text=f"latency probe: {probe}")]
    return probe, []


def _tcp_counters(files: CellFiles) -> dict[str, dict[str, int]]:
    return {host: grown for host in ENDPOINTS if (grown := tcp_counters(files.sections.get(host, ""))) is not None}


def _ipsec(files: CellFiles) -> dict[str, IpsecEnd]:
    """Each end of an IPsec cell's tunnel: its SAs' anti-replay drops (teardown log)."""
    if files.config.tunnel != "ipsec":
        return {}
    return {host: end for host in ("cli", "srv") if (end := ipsec_end(files.sections.get(host, ""))) is not None}


def _qdisc_totals(files: CellFiles) -> dict[Direction, QdiscTotals]:
    totals = qdisc_stats.bottleneck_totals(files.sections.get("mid", ""), files.bottleneck_ports)
    return {d: QdiscTotals.model_validate(q) for d, q in totals.items()}


def _socket_series(rs: Any, f: FlowInfo, key: pcap.Key | None, ss: dict[str, SocketSamples]) -> tuple[
        str | None, list[tuple[float, float]], list[tuple[float, float]]]:
    """The sending socket's samples of a flow on Flent's axis: (where they come from,
    [(t, delivery rate Mbit/s)], [(t, RTT ms)]). Flent's own where it has delivery rates
    (it samples the client's sockets: upload flows), else the sending host's ss samples
    of the flow's connection (KEY, from the captures; SS: host → its samples)."""
    rates = [(t, v) for t, v in rs.raw_series(f.series, raw_key="tcp_delivery_rate") if v]
    if rates:
        return "Flent (cli)", rates, [(t, v) for t, v in rs.raw_series(f.series, raw_key="tcp_rtt") if v]
    sender = SIDES[f.direction][0]
    samples = ss.get(sender, {}).get(key) if key is not None else None
    if not samples:
        return None, [], []
    return (cell_folder.ss_log(sender), [(t - rs.t0, v) for t, v, _ in samples if v],
            [(t - rs.t0, v) for t, _, v in samples if v])


def socket_figures(test: Recorded, f: FlowInfo, key: pcap.Key | None, window: float) -> Sampled:
    """From a flow's sending socket's samples: D_SS over WINDOW without the samples above
    the link's rate, and the TCP RTT while it runs; a D_SS still above the link's payload
    capacity over its samples is a measurement error."""
    source, rates, rtts = _socket_series(test.rs, f, key, test.files.ss)
    out = Sampled(source=source, samples=len(rates),
                  tcp_rtt=_stats([v for t, v in rtts if test.lead + f.start_s <= t <= test.end]),
                  rtt_spike=rtt_spike(rtts, test.config) if test.config.steps else None)
    if not rates:
        return out
    end = rates[-1][0] - 1.0
    start = steady_start(end - window, end, test.config)
    inside = [(t, v) for t, v in rates if start - GRID_JITTER_S <= t <= end + GRID_JITTER_S]
    if not inside:
        after = " (after the rate schedule's last step)" if start > end - window else ""
        out.flag = Flag(kind="incomplete", code="steady_window_empty",
                        text=f"flow {f.index} ({f.label}): no D_SS: no socket sample in its steady window, "
                             f"{start:.1f}-{end:.1f} s{after}")
        return out
    t, v = np.array([t for t, _ in inside], dtype=float), np.array([v for _, v in inside], dtype=float)
    possible = v * 1e6 <= highest_rate(t - RATE_SAMPLE_SPAN, t, test.config, f.direction)
    out.steady_excluded = int(np.count_nonzero(~possible))
    if not possible.any():
        out.flag = Flag(kind="incomplete", code="steady_window_empty",
                        text=f"flow {f.index} ({f.label}): no D_SS: all {len(v)} socket samples in its steady "
                             f"window, {start:.1f}-{end:.1f} s, are above the link's rate")
        return out
    out.steady_mbit = float(v[possible].mean())
    cap = float(payload_capacity_bps(rate_at(t[possible], test.config, f.direction)).mean()) / 1e6
    if out.steady_mbit > OVER_CAPACITY * cap:
        out.flag = Flag(kind="measurement_error", code="steady_over_capacity", metrics=list(STEADY_METRICS),
                              text=f"flow {f.index} ({f.label}): D_SS {out.steady_mbit:.3g} Mbit/s is "
                                   f"{out.steady_mbit / cap:.1%} of the payload capacity, impossible")
    return out


def steady_start(start: float, end: float, config: CellConfig) -> float:
    """Where a steady window [START, END] begins: at START, or, where a step of the rate
    schedule falls inside it, a sample's span after the last such step (steady state is
    at one rate: a window across a step would average two, and the samples just after a
    step down still carry the rate before it)."""
    inside = [s.at_s for s in config.steps if start < s.at_s < end]
    return min(max(start, max(inside) + RATE_SAMPLE_SPAN), end) if inside else start


def _ping(rs: Any, lead: float, loaded_from: float, loaded_to: float) -> Ping | None:
    name = "Ping (ms) ICMP"
    if name not in rs:
        return None
    pts = [(t, v) for t, v in zip(rs.x_values, rs.series(name)) if v is not None]
    base = [v for t, v in pts if t < lead - 0.5]
    loaded = [v for t, v in pts if loaded_from <= t < loaded_to]
    return Ping(base_median=float(np.median(base)) if base else None, loaded=_stats(loaded))


def _queues(files: CellFiles, config: CellConfig, t0: float, window: tuple[float, float],
            directions: set[Direction]) -> dict[Direction, QueueSummary | None]:
    """Per direction with flows (the video's and the probe's included), its bottleneck queue while every flow runs."""
    series = files.queues
    return {d: queue.summary(series[d], t0, window, config, d) for d in sorted(directions & series.keys())}


def _stats(values: list[float]) -> Percentiles | None:
    if not values:
        return None
    p50, p95, p99 = np.percentile(values, [50, 95, 99])
    return Percentiles(median=float(p50), p95=float(p95), p99=float(p99), n=len(values))


def captures(test: Recorded, edges: NDArray[np.float64]) -> tuple[dict[int, Captured], dict[int, pcap.Key]]:
    """From the two captures, per flow found in them: its packets sent and received,
    goodput at the receiver, one-way delay and loss, its per-packet delays and goodput
    per interval, and the bytes it delivered between EDGES (epoch s, for the peak); and
    each flow's connection (flow index → its key in the sender's capture)."""
    assert test.record.endpoints is not None
    out: dict[int, Captured] = {}
    keys: dict[int, pcap.Key] = {}
    owd_why = _no_owd_reason(test)
    for direction, (sender, receiver) in SIDES.items():
        if not any(f.direction == direction for f in test.flows):
            continue
        sent_side, got_side = test.files.connections(sender), test.files.connections(receiver)
        if sent_side is None or got_side is None:
            continue
        (s_pk, s_conns), (r_pk, r_conns) = sent_side, got_side
        match = match_connections(test.flows, direction, s_conns, test.record.endpoints, test.files.ss_path(sender))
        keys |= match
        for f in test.flows:
            if (key := match.get(f.index)) is None:
                continue
            sent, got = s_conns[key], r_conns.get(key)
            out[f.index] = flow = Captured(pcap=_counts(sent, got))
            if got is None:
                continue
            window = (test.rs.t0 + test.lead + f.start_s, test.rs.t0 + test.end)
            if (mean := delivery.received_mbit(r_pk, got, *window)) is not None:
                flow.mean_mbit, flow.source = mean, f"receiver ({receiver} capture)"
                flow.delivered = delivery.delivered_bytes(r_pk, got, edges)
            owd, departed, delays = (None, np.empty(0), np.empty(0)) if owd_why else delivery.one_way_samples(
                s_pk, sent, r_pk, got, *window)
            flow.owd = owd
            interval = goodput_interval(test.config.bottleneck.of(direction).rate_bps)
            flow.series = _flow_series(r_pk, got, window, interval, test.rs.t0, departed, delays)
    return out, keys


def scheme_captures(test: Recorded, edges: NDArray[np.float64]) -> dict[int, Captured]:
    """Each UDP scheme flow's figures from the two captures (datagrams.py): its datagrams
    sent and received, goodput at the receiver, one-way delay and loss, per-datagram
    delays and goodput per interval, and the bytes it delivered between EDGES."""
    out: dict[int, Captured] = {}
    schemes = {n: s for n, _, s in test.config.scheme_flows if s.transport == "udp"}
    if not schemes or test.record.endpoints is None:
        return out
    sender, receiver = test.files.datagrams("cli"), test.files.datagrams("srv")
    if isinstance(sender, str) or isinstance(receiver, str):
        return out
    server = test.files.server_addr
    owd_why = _no_owd_reason(test)
    for f in (f for f in test.flows if f.index in schemes):
        sent = datagrams.data(sender, server, SCHEME_PORT + f.index)
        got = datagrams.data(receiver, server, SCHEME_PORT + f.index)
        if not len(sent):
            continue
        out[f.index] = flow = Captured(pcap=datagrams.counts(sender, sent, receiver, got),
                                       payload_share=datagrams.payload_share(receiver, got))
        window = (test.rs.t0 + test.lead + f.start_s, test.rs.t0 + test.end)
        flow.mean_mbit, flow.source = datagrams.received_mbit(receiver, got, *window), "receiver (srv capture, UDP payload)"
        flow.delivered = datagrams.delivered_bytes(receiver, got, edges)
        owd, departed, delays = (None, np.empty(0), np.empty(0)) if owd_why else datagrams.one_way_samples(
            sender, sent, receiver, got, *window)
        flow.owd = owd
        interval = goodput_interval(test.config.bottleneck.of(f.direction).rate_bps)
        grid = np.arange(window[0], window[1] - interval / 2, interval)
        grid = np.append(grid, window[1]) if len(grid) else np.array(window)
        mbit = datagrams.delivered_bytes(receiver, got, grid) * 8 / np.diff(grid) / 1e6
        flow.series = FlowSeries(departed - test.rs.t0, delays, grid[:-1] - test.rs.t0, mbit)
    return out


def series_figures(test: Recorded, f: FlowInfo, captured: Captured | None, window: float) -> Sampled:
    """A scheme's flow has no socket of fl's to sample: D_SS is the mean of its goodput at
    the receiver (its capture, per interval) over the same window, ending 1 s before the
    test does."""
    out = Sampled(source="receiver capture (goodput per interval)")
    if captured is None or captured.series is None or not len(captured.series.goodput_t):
        return out
    t, v = captured.series.goodput_t, captured.series.goodput_mbit
    end = test.end - 1.0
    start = steady_start(end - window, end, test.config)
    inside = (t >= start) & (t + np.diff(np.append(t, test.end)) <= end + 1e-9)
    out.samples = int(np.count_nonzero(inside))
    if not out.samples:
        return out
    out.steady_mbit = float(v[inside].mean())
    cap = float(rate_at(t[inside], test.config, f.direction).mean()) * (captured.payload_share or PAYLOAD_SHARE) / 1e6
    if out.steady_mbit > OVER_CAPACITY * cap:
        out.flag = Flag(kind="measurement_error", code="steady_over_capacity", metrics=list(STEADY_METRICS),
                        text=f"flow {f.index} ({f.label}): D_SS {out.steady_mbit:.3g} Mbit/s is "
                             f"{out.steady_mbit / cap:.1%} of its datagrams' payload capacity, impossible")
    return out


def peak_mbit(captured: dict[int, Captured], test: Recorded, edges: NDArray[np.float64]) -> dict[Direction, float]:
    """Per direction, the aggregate goodput's best interval between EDGES."""
    by_direction: dict[Direction, list[NDArray[np.int64]]] = {}
    for f in test.flows:
        if (c := captured.get(f.index)) is not None and c.delivered is not None:
            by_direction.setdefault(f.direction, []).append(c.delivered)
    return {d: peak for d in DIRECTIONS if d in by_direction
            and (peak := delivery.peak_mbit(by_direction[d], edges)) is not None}


def _series(test: Recorded, captured: dict[int, Captured]) -> CellSeries:
    """Each captured flow's per-packet delays and goodput per interval."""
    series = CellSeries()
    for index, c in captured.items():
        if c.series is not None:
            direction = next(f.direction for f in test.flows if f.index == index)
            series.interval_s = goodput_interval(test.config.bottleneck.of(direction).rate_bps)
            series.flows[index] = c.series
    return series


def goodput_interval(rate_bps: float) -> float:
    """The goodput series' interval: GOODPUT_INTERVAL, or the time of GOODPUT_FRAMES
    full-size frames at the link's rate where that is longer (a sample of a few packets
    would show their quantisation, not the flow)."""
    return max(GOODPUT_INTERVAL, GOODPUT_FRAMES * FRAME_BYTES * 8 / rate_bps)


def _flow_series(r_pk: Any, got: pcap.Conn, window: tuple[float, float], interval: float, t0: float,
                 departed: NDArray[np.float64], delays: NDArray[np.float64]) -> FlowSeries:
    """A flow's per-packet delays and its goodput per INTERVAL over WINDOW (epoch s), on Flent's axis."""
    edges = np.arange(window[0], window[1] - interval / 2, interval)
    edges = np.append(edges, window[1]) if len(edges) else np.array(window)
    got_bytes = delivery.delivered_bytes(r_pk, got, edges)
    mbit = got_bytes * 8 / np.diff(edges) / 1e6 if got_bytes is not None else np.empty(0)
    return FlowSeries(departed - t0, delays, edges[:len(mbit)] - t0, mbit)


def _no_owd_reason(test: Recorded) -> str | None:
    """Why one-way delay cannot be measured in this cell, or None."""
    if isinstance(test.clock, str):
        return f"the testbed's hosts have clocks of their own, and {test.clock}"
    return None


def server_clock(files: CellFiles, record: CellRecord, t0: float, lead: float, length: float,
                 flows: list[FlowInfo]) -> ClockOffset | str | None:
    """Where the hosts keep clocks of their own, the server's offset from the client's by
    Flent's pings before the flows start and after they end (clock.py), set on FILES so that
    the server's capture is read on the client's clock; or why it could not be measured.
    None where they share one."""
    if record.backend.shared_clock:
        return None
    cli, srv = files.echoes(CLIENT), files.echoes(SERVER)
    if isinstance(cli, str) or isinstance(srv, str):
        return str(cli if isinstance(cli, str) else srv)
    first = t0 + lead + min((f.start_s for f in flows), default=0)
    end = t0 + lead + length
    got = clock.estimate(clock.exchanges(cli, srv, files.server_addr), (t0, first), (end + CLOCK_SETTLE_S, end + lead + 1))
    if isinstance(got, str):
        return got
    files.server_clock = got
    return got.record()


def _counts(sent: pcap.Conn, received: pcap.Conn | None) -> PcapCounts:
    got = received.data if received else 0
    return PcapCounts(sent=sent.data, received=got, retrans=sent.retrans,
                      loss=(sent.data - got) / sent.data if sent.data else None,
                      ecn_received=dict(received.ecn) if received else {}, dscp=sent.dscp)


def _fairness(flows: list[FlowMetrics]) -> tuple[float | None, float | None]:
    """Jain's index and the ratio of the flows' D_SS (None with one flow or one unmeasured)."""
    steady = [f.steady_mbit for f in flows]
    if len(steady) < 2 or any(s is None for s in steady):
        return None, None
    values = [s for s in steady if s is not None]
    if sum(values) <= 0:
        return None, None
    jain = sum(values) ** 2 / (len(values) * sum(s * s for s in values))
    return jain, (max(values) / min(values) if min(values) > 0 else None)


def _utilisation(flows: list[FlowMetrics], capacities: dict[Direction, Capacity], lead: float,
                 length: float) -> dict[Direction, float]:
    """Per direction: the data its flows delivered (each flow's goodput over its own time
    in the test) over the window from the first flow's start to the end of the test,
    against the payload the link could carry in that window (CAPACITIES; LEAD: Flent's
    lead-in, LENGTH: the test's)."""
    out: dict[Direction, float] = {}
    for direction, cap in capacities.items():
        group = [f for f in flows if f.direction == direction]
        start = lead + min(f.start_s for f in group)
        if any(f.mean_mbit is None for f in group) or start >= lead + length or cap.mean_mbit <= 0:
            continue
        bits = sum((f.mean_mbit or 0.0) * 1e6 * max(length - f.start_s, 0.0) * _tcp_equivalent(f) for f in group)
        out[direction] = bits / (cap.mean_mbit * 1e6 * (lead + length - start))
    return out


#: A scheme's program that used this share of a CPU over the test is CPU-bound: its rate
#: may be the host's, not the path's.
CPU_BOUND = 0.9


def _scheme_cpu(files: CellFiles, flow: int) -> dict[str, float]:
    """Per side of a scheme flow, the CPU seconds its wrapper recorded last (scheme_scripts.CPU_FUNCTION)."""
    out = {}
    for side in ("sender", "receiver"):
        cpu = [e for e in files.scheme_events(flow, side) if e.get("event") == "cpu"]
        if cpu and isinstance(cpu[-1].get("seconds"), (int, float)):
            out[side] = float(cpu[-1]["seconds"])
    return out


def _cpu_flags(flows: list[FlowMetrics], length: float) -> list[Flag]:
    return [calibration_flag("scheme_cpu_bound", f"flow {f.index} ({f.label}): its {side} used {s / length:.0%} "
                             f"of a CPU over the {length:g} s test: its rate may be the host's, not the path's")
            for f in flows for side, s in f.cpu_s.items() if length and s / length >= CPU_BOUND]


def _tcp_equivalent(f: FlowMetrics) -> float:
    """What a flow's payload stands for in the link's payload capacity (full-size TCP
    segments'): 1 for TCP; for a scheme's datagrams, their frames' share over TCP's."""
    return PAYLOAD_SHARE / f.payload_share if f.payload_share else 1.0


def _problems(flows: list[FlowMetrics], rs: Any, config: CellConfig) -> list[str]:
    """What makes a cell's numbers untrustworthy: it is left out of the tables."""
    problems = []
    if rs.meta("FAILED_RUNNERS"):
        problems.append(f"Flent runners failed: {rs.meta('FAILED_RUNNERS')}")
    if not flows:
        problems.append("no TCP flow series in the Flent data")
    for f in flows:
        if f.mean_mbit is None:
            problems.append(f"flow {f.index}: no goodput measured")
        elif not f.socket_samples and not _starved(f, config):  # a starved flow may have none
            problems.append(f"flow {f.index}: no socket statistics (tcp_delivery_rate)")
    return problems


def _starved(f: FlowMetrics, config: CellConfig) -> bool:
    rate = config.bottleneck.of(f.direction).rate_bps
    return f.mean_mbit is not None and f.mean_mbit * 1e6 < NEAR_ZERO * rate


def _limited_by_more_than_the_rate(config: CellConfig) -> bool:
    """A rate schedule, pacing client qdisc, competing UDP or video, tunnel overhead or netem impairment."""
    return any(v is not None for v in (config.rate_schedule, config.client_qdisc, config.udp, config.video, config.tunnel,
                                       config.netem))


def _unfilled(peaks: dict[Direction, float], capacities: dict[Direction, Capacity], config: CellConfig,
              queues: dict[Direction, QueueSummary | None]) -> list[Flag]:
    """Directions whose bulk TCP flows never filled the link: their best second stayed
    below SHOULD_FILL × the payload capacity. Judged only where nothing but the declared
    rate limits them; RRUL's flows share the link with its pings. A standing queue
    meanwhile tells who was short: the shaper, not the flows (QUEUES: the bottleneck's)."""
    if not peaks or not BULK_TEST_RE.match(config.test) or _limited_by_more_than_the_rate(config):
        return []
    out = []
    for direction, peak in sorted(peaks.items()):
        capacity = capacities[direction].peak_mbit if direction in capacities else 0.0
        if peak < SHOULD_FILL * capacity:
            code: FlagCode = "link_unfilled"
            why = "bulk TCP flows should fill the link"
            q = queues.get(direction)
            if q and q.backlog_pkts and q.backlog_pkts.mean >= STANDING_QUEUE_PKTS:
                code, why = "shaper_short", (f"its queue held {q.backlog_pkts.mean:.0f} packets on average meanwhile, "
                                             "so the shaper sent below its rate (the middlebox short of CPU), not the flows")
            out.append(calibration_flag(code, f"{direction} goodput peaked at {peak:.3g} Mbit/s ({peak / capacity:.0%} "
                                              f"of the payload capacity) in its best {PEAK_INTERVAL:g} s: {why}"))
    return out


def _flags(record: CellRecord, flows: list[FlowMetrics], utilisation: dict[Direction, float],
           peaks: dict[Direction, float], capacities: dict[Direction, Capacity],
           queues: dict[Direction, QueueSummary | None], steady: list[Flag]) -> list[Flag]:
    """What a reader must know: goodput above the payload capacity, a measurement
    error; the flows' D_SS flags (STEADY: impossible, or none in its window); a path that did
    not behave as declared (cell.json's checks.calibration, and bulk flows that never
    filled the link); results such as a flow starved by the path (near-zero goodput) or
    whose data began late (its connection could not start in time; checks.late_start_s)."""
    flags = [Flag(kind="measurement_error", code="goodput_over_capacity", metrics=list(GOODPUT_METRICS),
                  text=f"{direction} goodput is {u:.1%} of the payload capacity, impossible")
             for direction, u in utilisation.items() if u > OVER_CAPACITY]
    flags += steady
    checks = record.checks
    flags += checks.calibration.reasons if checks.calibration else []
    flags += _unfilled(peaks, capacities, record.config, queues)
    for f in flows:
        if _starved(f, record.config):
            flags.append(Flag(kind="finding", code="starved",
                              text=f"flow {f.index} ({f.label}): starved, {f.mean_mbit:.3g} Mbit/s in the test"))
        if f.series in checks.late_start_s:
            flags.append(Flag(kind="finding", code="late_start",
                              text=f"flow {f.index} ({f.label}): data began {checks.late_start_s[f.series]:g} s late"))
    return flags
