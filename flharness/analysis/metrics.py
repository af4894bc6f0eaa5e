"""Per-cell metrics from a cell's folder: Flent's data (through Flent's ResultSet), the
socket statistics Flent sampled, and the pcaps.

Time windows (Flent's time axis, t = 0 when its ping starts; flows run from the lead-in
plus their start delay until lead-in + length):
  * steady state: a window of W seconds ending 1 s before the flow's last socket sample
    (the predecessor's D_SS definition; W defaults to min(60 s, 2/3 of the test)). The
    samples are the sending socket's: Flent's for upload flows (it samples the client),
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

from ..frames import FRAME_BYTES
from ..results.cell_metrics import Capacity, CellMetrics, FlowMetrics, PcapCounts, Percentiles, Ping, QdiscTotals, QueueSummary
from ..results.cell_record import CellConfig, CellRecord, Direction
from ..results.cell_series import CellSeries, FlowSeries
from ..results.flags import Flag, FlagCode, calibration_flag
from ..units import Rate
from . import delivery, flentlib, pcap, qdisc_stats, queue, ss_samples
from .flent_data import delivered_mbit, first_data_s
from .flows import FlowInfo, declared_flows, match_connections
from .link import capacity, highest_rate, payload_capacity_bps, rate_at
from .teardown_log import host_sections
from .udp_flow import udp_flow

NEAR_ZERO = 0.01  # a flow below this share of the link rate is flagged as starved
OVER_CAPACITY = 1.01  # goodput above this × payload capacity is a measurement error
RATE_SAMPLE_SPAN = 1.0  # s: a delivery-rate sample is judged against the highest rate this long before it
SIDES: dict[Direction, tuple[str, str]] = {"up": ("cli", "srv"), "down": ("srv", "cli")}  # (sender, receiver)
PEAK_INTERVAL = 1.0  # seconds: the aggregate goodput's peak is the best such interval
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


def analyse(cell_dir: Path, record: CellRecord, settings: Settings, series: CellSeries | None = None) -> CellMetrics:
    """Everything fl reports about one cell that ran (status ok or failed); SERIES, if
    given, receives each flow's per-packet one-way delays and goodput per interval."""
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
    out.flows = [_flow(rs, f, lead, length) for f in flows]
    all_run = lead + max((f.start_s for f in flows), default=0)
    out.ping_ms = _ping(rs, lead, all_run, lead + length)
    out.t0 = rs.t0
    out.queue = _queues(cell_dir, record.config, rs.t0, (all_run, lead + length), {f.direction for f in flows})
    teardown = cell_dir / "teardown.log"
    mid = host_sections(teardown.read_text(errors="replace")).get("mid", "") if teardown.is_file() else ""
    out.qdisc_totals = {d: QdiscTotals.model_validate(q)
                        for d, q in qdisc_stats.bottleneck_totals(mid, cell_dir / queue.QUEUE_LOG).items()}
    edges = rs.t0 + np.arange(all_run, lead + length + 1e-9, PEAK_INTERVAL)
    series = series if series is not None else CellSeries()
    out.peak_mbit, keys = _add_capture_figures(out.flows, flows, cell_dir, rs, record, (lead, length), edges, series)
    impossible = _add_socket_stats(out.flows, rs, cell_dir, record.config, keys, lead, length, window)
    _add_aggregates(out, record.config, lead, length)
    out.invalid += _problems(out, rs, record.config)
    out.flags = _flags(out, record, impossible)
    if record.config.udp:
        udp = udp_flow(cell_dir / "udp.log", Rate.parse(record.config.udp).bps)
        if isinstance(udp, str):
            out.flags.append(Flag(kind="incomplete", code="udp_unreported", text=f"udp flow: {udp}"))
        else:
            out.udp = udp
    return out


def cell_metrics(cell_dir: Path, record: CellRecord | dict[str, Any], settings: Settings) -> dict[str, Any]:
    """analyse() as JSON data (metrics.json's content without its key), for readers
    outside fl that hold cell.json's data (the tests)."""
    return analyse(cell_dir, CellRecord.model_validate(record), settings).model_dump(mode="json")


def _flow(rs: Any, f: FlowInfo, lead: float, length: float) -> FlowMetrics:
    """A flow's figures from Flent's data: netperf's goodput (until the captures give the
    receiver's) and when its data began."""
    raw = rs.raw_values.get(f.series, [])
    in_test = delivered_mbit(raw, rs.t0, lead + f.start_s, lead + length)
    netperf = rs.series_meta(f.series, "MEAN_VALUE")
    return FlowMetrics(index=f.index, series=f.series, direction=f.direction, cc=f.cc, rtt_ms=f.rtt_ms,
                       start_s=f.start_s, label=f.label, mean_mbit=netperf if in_test is None else in_test,
                       goodput_source="netperf (sender side)", netperf_mbit=netperf,
                       first_data_s=first_data_s(raw, rs.t0), steady_mbit=None, tcp_rtt_ms=None,
                       socket_samples=0)


def _socket_series(rs: Any, row: FlowMetrics, key: pcap.Key | None, ss: dict[str, dict]) -> tuple[
        str | None, list[tuple[float, float]], list[tuple[float, float]]]:
    """The sending socket's samples of a flow on Flent's axis: (where they come from,
    [(t, delivery rate Mbit/s)], [(t, RTT ms)]). Flent's own where it has delivery rates
    (it samples the client's sockets: upload flows), else the sending host's ss samples
    of the flow's connection (KEY, from the captures; SS: host → its samples)."""
    rates = [(t, v) for t, v in rs.raw_series(row.series, raw_key="tcp_delivery_rate") if v]
    if rates:
        return "Flent (cli)", rates, [(t, v) for t, v in rs.raw_series(row.series, raw_key="tcp_rtt") if v]
    sender = SIDES[row.direction][0]
    samples = ss.get(sender, {}).get(key) if key is not None else None
    if not samples:
        return None, [], []
    return (f"{sender}.ss.log", [(t - rs.t0, v) for t, v, _ in samples if v],
            [(t - rs.t0, v) for t, _, v in samples if v])


def _add_socket_stats(rows: list[FlowMetrics], rs: Any, cell_dir: Path, config: CellConfig,
                      keys: dict[int, pcap.Key], lead: float, length: float, window: float) -> list[Flag]:
    """Per flow from its sending socket's samples: D_SS over WINDOW without the samples
    above the link's rate, and the TCP RTT while it runs. Returns a flag for each D_SS
    still above the link's payload capacity over its samples (a measurement error)."""
    ss: dict[str, dict] = {}
    for host in ("cli", "srv"):
        if (log := cell_dir / f"{host}.ss.log").is_file():
            ss[host] = ss_samples.samples(log)
    flags: list[Flag] = []
    for row in rows:
        row.socket_source, rates, rtts = _socket_series(rs, row, keys.get(row.index), ss)
        row.socket_samples = len(rates)
        row.tcp_rtt_ms = _stats([v for t, v in rtts if lead + row.start_s <= t <= lead + length])
        if not rates:
            continue
        end = rates[-1][0] - 1.0
        inside = [(t, v) for t, v in rates if end - window < t < end]
        t, v = np.array([t for t, _ in inside], dtype=float), np.array([v for _, v in inside], dtype=float)
        possible = v * 1e6 <= highest_rate(t - RATE_SAMPLE_SPAN, t, config, row.direction)
        row.steady_excluded = int(np.count_nonzero(~possible))
        if not possible.any():
            continue
        row.steady_mbit = float(v[possible].mean())
        capacity = float(payload_capacity_bps(rate_at(t[possible], config, row.direction)).mean()) / 1e6
        if row.steady_mbit > OVER_CAPACITY * capacity:
            flags.append(Flag(kind="measurement_error", code="steady_over_capacity",
                              text=f"flow {row.index} ({row.label}): D_SS {row.steady_mbit:.3g} Mbit/s is "
                                   f"{row.steady_mbit / capacity:.1%} of the payload capacity, impossible"))
    return flags


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
                         record: CellRecord, test: tuple[float, float], edges: np.ndarray, series: CellSeries,
                         ) -> tuple[dict[Direction, float], dict[int, pcap.Key]]:
    """From the two captures: each flow's goodput at the receiver, one-way delay and loss,
    retransmissions on the sender's side, ECN codepoints on the receiver's, and into
    SERIES its per-packet delays and goodput per interval. TEST: Flent's lead-in and the
    test's length. Returns the peak aggregate goodput per direction over the intervals
    between EDGES (epoch s), and each flow's connection (flow index → its key in the
    sender's capture)."""
    lead, length = test
    assert record.endpoints is not None
    loaded: dict[str, tuple] = {}
    delivered: dict[Direction, list[np.ndarray]] = {}
    keys: dict[int, pcap.Key] = {}
    owd_why = _no_owd_reason(record)
    for direction, (sender, receiver) in SIDES.items():
        pcaps = {h: cell_dir / f"{h}.pcap.xz" for h in (sender, receiver)}
        if not any(f.direction == direction for f in flows) or not all(p.is_file() for p in pcaps.values()):
            continue
        for h, p in pcaps.items():
            if h not in loaded:
                loaded[h] = pcap.load(p)
        (s_pk, s_conns), (r_pk, r_conns) = loaded[sender], loaded[receiver]
        match = match_connections(flows, direction, s_conns, record.endpoints, cell_dir / f"{sender}.ss.log")
        keys |= match
        for row in rows:
            if (key := match.get(row.index)) is None:
                continue
            sent, got = s_conns[key], r_conns.get(key)
            row.pcap = _counts(sent, got)
            if got is None:
                continue
            window = (rs.t0 + lead + row.start_s, rs.t0 + lead + length)
            if (mean := delivery.received_mbit(r_pk, got, *window)) is not None:
                row.mean_mbit, row.goodput_source = mean, f"receiver ({receiver} capture)"
                delivered.setdefault(direction, []).append(delivery.delivered_bytes(r_pk, got, edges))
            owd, departed, delays = (None, np.empty(0), np.empty(0)) if owd_why else delivery.one_way_samples(
                s_pk, sent, r_pk, got, *window)
            row.owd_ms = owd
            series.interval_s = goodput_interval(record.config.bottleneck.of(direction).rate_bps)
            series.flows[row.index] = _flow_series(r_pk, got, window, series.interval_s, rs.t0, departed, delays)
    for row in rows:
        if row.owd_ms is None:
            row.owd_unavailable = owd_why or "the flow's packets are not visible in both captures"
    peaks = {d: peak for d, per_flow in delivered.items() if (peak := delivery.peak_mbit(per_flow, edges)) is not None}
    return peaks, keys


def goodput_interval(rate_bps: float) -> float:
    """The goodput series' interval: GOODPUT_INTERVAL, or the time of GOODPUT_FRAMES
    full-size frames at the link's rate where that is longer (a sample of a few packets
    would show their quantisation, not the flow)."""
    return max(GOODPUT_INTERVAL, GOODPUT_FRAMES * FRAME_BYTES * 8 / rate_bps)


def _flow_series(r_pk: Any, got: pcap.Conn, window: tuple[float, float], interval: float, t0: float,
                 departed: np.ndarray, delays: np.ndarray) -> FlowSeries:
    """A flow's per-packet delays and its goodput per INTERVAL over WINDOW (epoch s), on Flent's axis."""
    edges = np.arange(window[0], window[1] - interval / 2, interval)
    edges = np.append(edges, window[1]) if len(edges) else np.array(window)
    got_bytes = delivery.delivered_bytes(r_pk, got, edges)
    mbit = got_bytes * 8 / np.diff(edges) / 1e6 if got_bytes is not None else np.empty(0)
    return FlowSeries(departed - t0, delays, edges[:len(mbit)] - t0, mbit)


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


def _add_aggregates(out: CellMetrics, config: CellConfig, lead: float, length: float) -> None:
    """Jain's index and the ratio of the flows' D_SS; per direction the utilisation: the
    data its flows delivered (each flow's goodput over its own time in the test) over
    the window from the first flow's start to the end of the test, against the payload
    the link could carry in that window (LEAD: Flent's lead-in, LENGTH: the test's)."""
    steady = [f.steady_mbit for f in out.flows]
    if len(steady) > 1 and all(s is not None for s in steady) and sum(steady) > 0:
        out.jain = sum(steady) ** 2 / (len(steady) * sum(s * s for s in steady))
        out.ratio = max(steady) / min(steady) if min(steady) > 0 else None
    out.utilisation, out.capacity = {}, {}
    for direction in ("up", "down"):
        group = [f for f in out.flows if f.direction == direction]
        if not group:
            continue
        start = lead + min(f.start_s for f in group)
        cap = out.capacity[direction] = capacity(config, direction, start, lead + length)
        if any(f.mean_mbit is None for f in group) or start >= lead + length or cap.mean_mbit <= 0:
            continue
        bits = sum(f.mean_mbit * 1e6 * max(length - f.start_s, 0.0) for f in group)
        out.utilisation[direction] = bits / (cap.mean_mbit * 1e6 * (lead + length - start))


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


def _flags(out: CellMetrics, record: CellRecord, impossible: list[Flag] | None = None) -> list[Flag]:
    """What a reader must know: goodput above the payload capacity and the other
    impossible figures found (IMPOSSIBLE: D_SS), each a measurement error; a path that did
    not behave as declared (cell.json's checks.calibration, and bulk flows that never
    filled the link); results such as a flow starved by the path (near-zero goodput) or
    whose data began late (its connection could not start in time; checks.late_start_s)."""
    flags = [Flag(kind="measurement_error", code="goodput_over_capacity",
                  text=f"{direction} goodput is {u:.1%} of the payload capacity, impossible")
             for direction, u in out.utilisation.items() if u > OVER_CAPACITY]
    flags += impossible or []
    checks = record.checks
    flags += checks.calibration.reasons if checks.calibration else []
    flags += _unfilled(out.peak_mbit, out.capacity, record.config, out.queue)
    for f in out.flows:
        if _starved(f, record.config):
            flags.append(Flag(kind="finding", code="starved",
                              text=f"flow {f.index} ({f.label}): starved, {f.mean_mbit:.3g} Mbit/s in the test"))
        if f.series in checks.late_start_s:
            flags.append(Flag(kind="finding", code="late_start",
                              text=f"flow {f.index} ({f.label}): data began {checks.late_start_s[f.series]:g} s late"))
    return flags
