"""The metrics a reader compares, states expectations on, or checks against published
values, by one name each: per flow (a list in fl's flow order) or per cell. `fl compare`,
`expect:` and reference files all read a cell's metrics through this table."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..results.cell_metrics import CellMetrics, FlowMetrics, ProbeFlow, VideoFlow
from ..scenario.expectations import METRICS

Value = float | None


@dataclass(frozen=True)
class Measure:
    name: str
    title: str  # for tables and charts
    unit: str
    per_flow: bool
    #: a difference smaller than this is "no change" even where the CI excludes 0:
    #: a share of the baseline's value, and an absolute floor
    margin: float
    floor: float
    flow: Callable[[FlowMetrics], Value] | None = None
    cell: Callable[[CellMetrics], Value] | None = None
    definition: str = ""  # how fl measures it, for pages that set it beside a published value


def _owd(pick: str) -> Callable[[FlowMetrics], Value]:
    return lambda f: getattr(f.owd_ms, pick) if f.owd_ms else None


def _queue_p95(m: CellMetrics) -> Value:
    """The bottleneck queue's delay p95 in flow 1's direction, while every flow ran."""
    q = m.queue.get(m.flows[0].direction) if m.flows else None
    return q.delay_ms.p95 if q and q.delay_ms else None


def _utilisation(m: CellMetrics) -> Value:
    return m.utilisation.get(m.flows[0].direction) if m.flows else None


def _replay_drops(m: CellMetrics) -> Value:
    return float(sum(end.replay_drops for end in m.ipsec.values())) if m.ipsec else None


def _probe(pick: Callable[[ProbeFlow], Value]) -> Callable[[CellMetrics], Value]:
    return lambda m: pick(m.probe) if m.probe else None


def _queueing(key: str) -> Callable[[ProbeFlow], Value]:
    def pick(p: ProbeFlow) -> Value:
        value: Value = getattr(p.queueing_ms, key) if p.queueing_ms else None
        return value
    return pick


def _video(pick: Callable[[VideoFlow], Value]) -> Callable[[CellMetrics], Value]:
    return lambda m: pick(m.video) if m.video else None


def _total(m: CellMetrics) -> Value:
    rates = [f.mean_mbit for f in m.flows]
    return sum(rates) if rates and None not in rates else None  # type: ignore[arg-type]


#: The latency probe's queueing delay.
_QUEUEING = ("delay of the latency probe (irtt) above its minimum in the cell: one-way client → server where both "
             "ends read one clock, else the round trip")
#: How fl matches packets for one-way delay and loss (both captures, per data packet).
_MATCHED = "the flow's data packets, each matched from the client's capture to its arrival in the server's"

MEASURES: dict[str, Measure] = {m.name: m for m in (
    Measure("goodput_mbit", "goodput", "Mbit/s", True, 0.02, 0.05, flow=lambda f: f.mean_mbit,
            definition="TCP payload whose first copy reached the receiver (its capture) from the flow's start "
                       "to the end of the test, over that time"),
    Measure("dss_mbit", "D_SS", "Mbit/s", True, 0.02, 0.05, flow=lambda f: f.steady_mbit,
            definition="the sending socket's delivery rate (ss), mean over the steady window ending 1 s before "
                       "the flow's last sample (after the last rate step inside it); samples above the link's "
                       "rate left out"),
    Measure("owd_p50_ms", "one-way delay p50", "ms", True, 0.05, 0.5, flow=_owd("median"),
            definition=f"median one-way delay of {_MATCHED}"),
    Measure("owd_p95_ms", "one-way delay p95", "ms", True, 0.05, 0.5, flow=_owd("p95"),
            definition=f"95th percentile one-way delay of {_MATCHED}"),
    Measure("owd_p99_ms", "one-way delay p99", "ms", True, 0.05, 0.5, flow=_owd("p99"),
            definition=f"99th percentile one-way delay of {_MATCHED}"),
    Measure("loss_pct", "loss", "%", True, 0.10, 0.01, flow=lambda f: 100 * f.owd_ms.loss if f.owd_ms else None,
            definition=f"share of {_MATCHED} that never arrived (those sent after the last arrival count neither way)"),
    Measure("loss_pantheon_pct", "loss as Pantheon counts it", "%", True, 0.10, 0.01,
            flow=lambda f: 100 * f.owd_ms.loss_by_end if f.owd_ms and f.owd_ms.loss_by_end is not None else None,
            definition="payload sent during the test that had not arrived by its end (still queued counts as lost)"),
    Measure("retrans", "retransmissions", "segments", True, 0.10, 2,
            flow=lambda f: float(f.pcap.retrans) if f.pcap and f.pcap.retrans is not None else None,
            definition="data segments the sender sent again (client's capture)"),
    Measure("goodput_total_mbit", "total goodput", "Mbit/s", False, 0.02, 0.05, cell=_total,
            definition="the flows' goodput summed"),
    Measure("jain", "Jain's index", "", False, 0.0, 0.01, cell=lambda m: m.jain,
            definition="Jain's fairness index of the flows' D_SS: (Σx)² / (n Σx²)"),
    Measure("ratio", "D_SS ratio (max/min)", "", False, 0.05, 0.05, cell=lambda m: m.ratio,
            definition="the largest flow's D_SS over the smallest's"),
    Measure("utilisation", "utilisation", "", False, 0.0, 0.01, cell=_utilisation,
            definition="data delivered in flow 1's direction over the payload capacity of the same window"),
    Measure("queue_delay_p95_ms", "queue delay p95", "ms", False, 0.05, 0.5, cell=_queue_p95,
            definition="95th percentile of the bottleneck queue's drain time at the link rate while every flow ran "
                       "(middlebox samples)"),
    Measure("replay_drops", "anti-replay drops", "packets", False, 0.10, 1, cell=_replay_drops,
            definition="packets the IPsec tunnel's receiving SAs dropped as behind their anti-replay window or "
                       "replayed, both ends (ip -s xfrm state), checked against the kernel's XfrmInStateSeqError"),
    Measure("rtt_peak_ms", "highest TCP RTT after a rate step", "ms", True, 0.10, 5,
            flow=lambda f: f.rtt_spike.peak_ms if f.rtt_spike else None,
            definition="the flow's highest TCP RTT (its socket's samples) from a step of the rate schedule to the "
                       "next step or its last sample (the step of the cell's largest spike)"),
    Measure("rtt_spike_ms", "TCP RTT spike after a rate step", "ms", True, 0.10, 5,
            flow=lambda f: f.rtt_spike.above_ms if f.rtt_spike else None,
            definition="the flow's highest TCP RTT (its socket's samples) after a step of the rate schedule, above "
                       "the median of the 5 s before the step"),
    Measure("rtt_spike_s", "TCP RTT spike's duration", "s", True, 0.10, 0.5,
            flow=lambda f: f.rtt_spike.lasted_s if f.rtt_spike else None,
            definition="from a rate step to the flow's last TCP RTT sample more than 50 ms above its median of "
                       "the 5 s before the step (the longest of the cell's steps; at least this long where the "
                       "RTT was still that high when the test ended)"),
    *(Measure(f"probe_queueing_{name}_ms", f"probe's queueing delay {name}", "ms", False, 0.05, 0.2,
              cell=_probe(_queueing(key)),
              definition=f"{what} {_QUEUEING}") for name, key, what in (("p50", "median", "median"),
                                                                       ("p99", "p99", "99th percentile"))),
    Measure("probe_rtt_p99_ms", "probe's RTT p99", "ms", False, 0.05, 0.2,
            cell=_probe(lambda p: p.rtt_ms.p99 if p.rtt_ms else None),
            definition="99th percentile round-trip time of the latency probe (irtt)"),
    Measure("video_received_mbit", "video received", "Mbit/s", False, 0.02, 0.05, cell=_video(lambda v: v.received_mbit),
            definition="the video flow's UDP payload that reached the server (its capture) over the frames' span"),
    Measure("video_frame_loss_pct", "video frames lost", "%", False, 0.10, 0.1, cell=_video(lambda v: v.frame_loss_pct),
            definition="share of the video's frames (bursts in the client's capture) with a datagram missing at "
                       "the server"),
    Measure("video_frame_delay_p99_ms", "video frame delay p99", "ms", False, 0.05, 0.5,
            cell=_video(lambda v: v.frame_delay_ms.p99 if v.frame_delay_ms else None),
            definition="99th percentile of each whole frame's first datagram leaving the client to its last "
                       "reaching the server"),
)}
assert tuple(MEASURES) == METRICS, "scenario/expectations.py names the metrics, this table reads them"


def measure(name: str) -> Measure:
    try:
        return MEASURES[name]
    except KeyError:
        raise ValueError(f"unknown metric {name!r} (one of {', '.join(MEASURES)})") from None


def values(m: Measure, metrics: CellMetrics) -> list[Value]:
    """The measure in a cell: one value per flow, or one for the cell."""
    if m.flow is not None:
        return [m.flow(f) for f in metrics.flows]
    assert m.cell is not None
    return [m.cell(metrics)]


def series(m: Measure, metrics: CellMetrics) -> dict[str, Value]:
    """The measure's values keyed for a table row: 'flow 1 (cubic)', a scheme's flow by its
    title and implementation ('flow 1 (QUIC Cubic (ngtcp2 0.12.1))'), or '' for a cell measure."""
    if m.flow is None:
        return {"": values(m, metrics)[0]}
    return {f"flow {f.index} ({f.shown_cc})": v for f, v in zip(metrics.flows, values(m, metrics))}
