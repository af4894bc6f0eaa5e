"""metrics.json: what the analysis found in one cell (analysis/metrics.py). It is a
cache: a file of another version, or whose inputs changed (`key`), is recomputed."""
from __future__ import annotations

from typing import Literal

from .cell_record import Direction
from .files import Contract, Sparse, Versioned

#: Bumped whenever what a metrics file contains changes (the cache is then recomputed).
METRICS_VERSION = 11


class Percentiles(Contract):
    median: float
    p95: float
    p99: float
    n: int


class Spread(Contract):
    mean: float
    p95: float
    max: float


class OneWayDelay(Contract):
    """Data segments matched between the two captures (analysis/delivery.py), ms."""

    median: float | None
    p95: float | None
    p99: float | None
    n: int  # segments that arrived
    sent: int  # segments sent that had time to arrive
    loss: float  # share of those that never did
    #: Pantheon's loss: the share of the payload sent in the window that had not arrived
    #: by its end (what was still queued when the test ended counts as lost)
    loss_by_end: float | None = None


class PcapCounts(Contract):
    sent: int  # data segments in the sender's capture
    received: int  # in the receiver's
    retrans: int
    loss: float | None
    ecn_received: dict[str, int]  # codepoint → segments
    dscp: int


class FlowMetrics(Contract):
    index: int  # 1-based, fl's flow number
    series: str  # Flent's series
    direction: Direction
    cc: str
    rtt_ms: float
    start_s: float
    label: str
    mean_mbit: float | None  # goodput: the receiver's ACKs when the captures show them
    goodput_source: str
    netperf_mbit: float | None  # the sender's count: never a result
    first_data_s: float | None
    steady_mbit: float | None  # D_SS
    tcp_rtt_ms: Percentiles | None
    socket_samples: int  # the sending socket's samples with a delivery rate
    socket_source: str | None = None  # where they come from: 'Flent (cli)', 'srv.ss.log', …
    steady_excluded: int = 0  # samples in D_SS's window above the link's rate, left out
    pcap: PcapCounts | None = None  # None: the flow's connection is not in the captures
    owd_ms: OneWayDelay | None = None
    owd_unavailable: str | None = None  # why owd_ms is None


class Ping(Contract):
    base_median: float | None  # before the flows start
    loaded: Percentiles | None  # while every flow runs


class QueueSummary(Sparse):
    """One direction's bottleneck qdisc while every flow runs (analysis/queue.py); the
    qdisc's own delays and counters only where it reports them."""

    kind: str
    samples: int
    interval_s: float | None
    backlog_bytes: Spread | None
    backlog_pkts: Spread | None
    delay_ms: Spread | None  # the backlog's drain time at the rate in force
    drops: int
    marks: int
    delay_c_ms: Spread | None = None  # dualpi2's own sojourn times, cake's busiest tin's
    delay_l_ms: Spread | None = None
    delay_avg_ms: Spread | None = None
    pkts_in_c: int | None = None  # dualpi2's counters
    pkts_in_l: int | None = None
    step_marks: int | None = None


class QdiscTotals(Contract):
    """One direction's declared qdisc over the whole cell, from tc's counters after the
    test (the teardown log; analysis/qdisc_stats.py)."""

    kind: str
    handle: str
    sent_bytes: int | None = None
    sent_pkts: int | None = None
    drops: int | None = None
    overlimits: int | None = None
    requeues: int | None = None
    backlog_bytes: int | None = None  # left when the test ended
    backlog_pkts: int | None = None
    # dualpi2's own statistics: packets through each queue, its marks, the classic
    # queue's probability, the last sojourn times, the WRR credit (< 0: C's turn)
    pkts_in_c: int | None = None
    pkts_in_l: int | None = None
    maxq: int | None = None
    ecn_marks: int | None = None
    step_marks: int | None = None
    credit: int | None = None
    prob: float | None = None
    delay_c_us: int | None = None
    delay_l_us: int | None = None
    max_memory_used: int | None = None


class UdpFlow(Contract):
    """The competing UDP flow (scenario key udp), from iperf: its client's count of the
    datagrams it sent, and its server's report of those that arrived (analysis/udp_flow.py)."""

    declared_mbit: float  # the scenario's rate (iperf -b: UDP payload)
    datagram_bytes: int  # UDP payload per datagram
    sent: int  # datagrams
    sent_mbit: float | None  # payload rate the client sent
    received: int  # datagrams that arrived
    lost: int  # datagrams that did not (by iperf's sequence numbers)
    loss_pct: float
    received_mbit: float  # payload rate that arrived, over the server's interval
    jitter_ms: float  # iperf's smoothed interarrival jitter (RFC 3550)
    duration_s: float  # the server's interval


class CellMetrics(Versioned):
    WHAT = "metrics file"
    ADVICE = "it is recomputed"

    version: Literal[METRICS_VERSION] = METRICS_VERSION
    key: str = ""  # fingerprint of the inputs and settings (analysis/cache.py)
    cell: str
    invalid: list[str] = []  # why the cell's numbers cannot be used: left out of the tables
    flags: list[str] = []  # results a reader should read with care
    steady_window_s: float | None = None
    flows: list[FlowMetrics] = []
    ping_ms: Ping | None = None
    t0: float | None = None  # epoch s of Flent's time axis origin
    queue: dict[Direction, QueueSummary | None] = {}
    qdisc_totals: dict[Direction, QdiscTotals] = {}  # the whole cell, from tc's counters
    peak_mbit: dict[Direction, float] = {}  # best aggregate goodput in one interval
    jain: float | None = None
    ratio: float | None = None
    utilisation: dict[Direction, float] = {}  # of the payload capacity
    udp: UdpFlow | None = None  # the competing UDP flow, where the scenario has one
