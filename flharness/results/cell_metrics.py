"""metrics.json: what the analysis found in one cell (analysis/metrics.py). It is a
cache: a file of another version, or whose inputs changed (`key`), is recomputed."""
from __future__ import annotations

from typing import Final, Literal

from .cell_record import Direction
from .files import Contract, Sparse, Versioned
from .flags import Flag

#: Bumped whenever what a metrics file contains changes (the cache is then recomputed).
METRICS_VERSION: Final = 21  # and the version field's Literal below (mypy holds them equal)


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
    n: int
    """Segments that arrived."""
    sent: int
    """Segments sent that had time to arrive."""
    loss: float
    """Share of those that never did."""
    loss_by_end: float | None = None
    """Pantheon's loss: the share of the payload sent in the window that had not arrived
    by its end (what was still queued when the test ended counts as lost)."""


class PcapCounts(Contract):
    sent: int
    """Data segments in the sender's capture."""
    received: int
    """In the receiver's."""
    retrans: int | None
    """Retransmitted data segments; None for a scheme's datagrams (its retransmissions are
    inside its payload: QUIC's encrypted)."""
    loss: float | None
    ecn_received: dict[str, int]
    """Codepoint → segments."""
    dscp: int


class FlowMetrics(Contract):
    index: int
    """1-based, fl's flow number."""
    series: str
    """Flent's series."""
    direction: Direction
    cc: str
    rtt_ms: float
    start_s: float
    label: str
    mean_mbit: float | None
    """Goodput: the payload that first reached the receiver (its capture) from the flow's
    start to the end of the test; netperf's figure where the captures lack the flow."""
    goodput_source: str
    netperf_mbit: float | None
    """The sender's count: never a result."""
    first_data_s: float | None
    steady_mbit: float | None
    """D_SS."""
    tcp_rtt_ms: Percentiles | None
    socket_samples: int
    """The sending socket's samples with a delivery rate."""
    socket_source: str | None = None
    """Where they come from: Flent (cli), a host's socket sampler's log (srv.ss.log), …"""
    steady_excluded: int = 0
    """Samples in D_SS's window above the link's rate, left out."""
    rtt_spike: RttSpike | None = None
    """In a cell with a rate schedule: the TCP RTT's largest spike after a step."""
    pcap: PcapCounts | None = None
    """None: the flow's connection is not in the captures."""
    owd_ms: OneWayDelay | None = None
    owd_unavailable: str | None = None
    """Why owd_ms is None."""
    cpu_s: dict[str, float] = {}
    """A scheme's flow: the CPU seconds each of its programs (sender, receiver) used by the
    end of the test (its process group's user and system time)."""
    scheme: str | None = None
    """A scheme's flow (a user-space program's): what tables call it, its implementation and
    version with it ("QUIC Cubic (ngtcp2 0.12.1)"); None for a kernel congestion control's."""

    @property
    def shown_cc(self) -> str:
        """What tables call the flow's congestion control: a scheme by its title and
        implementation, a kernel one by its name."""
        return self.scheme or self.cc
    payload_share: float | None = None
    """A scheme's flow: its payload's share of its frames on the wire (its datagrams' UDP
    payload over their frames); None: a TCP flow's, full-size segments' 1448/1514. Its
    goodput counts in the link's utilisation, and its D_SS against the rate, at this share."""


class RttSpike(Contract):
    """The flow's TCP RTT (its socket's samples) after a step of the rate schedule: how
    far above its level before the step it went and how long it stayed there (the L4S
    Tests' intra-flow latency spikes, finding 7; analysis/rtt_spike.py)."""

    step_s: float
    """The step's time on Flent's axis (the largest spike of the cell's steps)."""
    before_ms: float
    """Median TCP RTT over the 5 s before the step."""
    peak_ms: float
    """Highest TCP RTT from the step to the next step or the flow's last sample."""
    above_ms: float
    """peak_ms − before_ms."""
    lasted_s: float
    """From the step to the last sample more than SPIKE_MS above before_ms (0: none)."""
    unsettled: bool
    """The RTT was still that far above when the window ended: it lasted at least lasted_s."""


class Ping(Contract):
    base_median: float | None
    """Before the flows start."""
    loaded: Percentiles | None
    """While every flow runs."""


class QueueSummary(Sparse):
    """One direction's bottleneck qdisc while every flow runs (analysis/queue.py); the
    qdisc's own delays and counters only where it reports them."""

    kind: str
    samples: int
    interval_s: float | None
    backlog_bytes: Spread | None
    backlog_pkts: Spread | None
    delay_ms: Spread | None
    """The backlog's drain time at the rate in force."""
    drops: int
    marks: int
    delay_c_ms: Spread | None = None
    """Dualpi2's own sojourn times, cake's busiest tin's."""
    delay_l_ms: Spread | None = None
    delay_avg_ms: Spread | None = None
    pkts_in_c: int | None = None
    """Dualpi2's counters."""
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
    backlog_bytes: int | None = None
    """Left when the test ended."""
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
    early_drops: int | None = None
    """The AQM's own drops (PIE's, RED's early): its answer to a packet it would not mark."""
    forced_drops: int | None = None
    """Drops of a full queue (PIE's overlimit, RED's pdrop, fq_codel's drop_overlimit)."""


class UdpFlow(Contract):
    """The competing UDP flow (scenario key udp), from iperf: its client's count of the
    datagrams it sent, and its server's report of those that arrived (analysis/udp_flow.py)."""

    declared_mbit: float
    """The scenario's rate (iperf -b: UDP payload)."""
    datagram_bytes: int
    """UDP payload per datagram."""
    sent: int
    """Datagrams."""
    sent_mbit: float | None
    """Payload rate the client sent."""
    received: int
    """Datagrams that arrived."""
    lost: int
    """Datagrams that did not (by iperf's sequence numbers)."""
    loss_pct: float
    received_mbit: float
    """Payload rate that arrived, over the server's interval."""
    jitter_ms: float
    """Iperf's smoothed interarrival jitter (RFC 3550)."""
    duration_s: float
    """The server's interval."""


class VideoFlow(Contract):
    """The video flow (scenario key video), from the captures (analysis/video.py): frames
    told apart in the client's, followed into the server's."""

    declared_mbit: float
    """The scenario's mean rate of UDP payload."""
    declared_fps: int
    frames_sent: int
    frames_received: int
    """Frames whose every datagram arrived."""
    frame_loss_pct: float
    datagrams_sent: int
    datagrams_received: int
    sent_fps: float
    """Frames per second the client sent (its capture, first frame to last)."""
    received_fps: float | None
    """Complete frames per second in the server's capture (first to last complete frame)."""
    sent_mbit: float
    """UDP payload per second the client sent, over the frames' span (n frame intervals)."""
    received_mbit: float
    """Of it, what arrived, over the same span."""
    frame_bytes: Spread
    """UDP payload per frame, as sent."""
    codepoint_pct: float
    """Datagrams sent with the declared ECN codepoint (client's capture)."""
    ce_pct: float
    """Datagrams that arrived marked CE (server's capture)."""
    frame_delay_ms: Percentiles | None
    """Each complete frame's first datagram sent (client's capture) to its last received
    (server's): what a receiver waits for the frame."""
    frame_delay_max_ms: float | None = None


class DelayTail(Contract):
    """A delay's distribution with its tail, ms."""

    median: float
    p95: float
    p99: float
    p999: float
    max: float
    n: int


class ProbeFlow(Contract):
    """The latency probe (scenario key probe), from irtt's own record of each round trip
    (analysis/probe.py)."""

    codepoint: str
    interval_ms: float
    sent: int
    """Probe packets sent."""
    lost_pct: float
    """Round trips that did not complete (either way)."""
    rtt_ms: DelayTail | None
    owd_up_ms: DelayTail | None
    """Client to server, from irtt's timestamps; None where the two ends do not share a clock."""
    queueing_ms: DelayTail | None
    """The delay the flows induce: one-way (upstream) delay above its minimum in the cell,
    or the round trip's above its minimum where the ends do not share a clock."""
    queueing_from: Literal["one-way", "round trip"] | None = None


class Capacity(Contract):
    """The TCP payload the link could carry one way (analysis/link.py: rate × 1448/1514),
    over the window of that direction's flows: the first one's start to the test's end."""

    mean_mbit: float
    """Averaged over the window, each step of a rate schedule at its time."""
    peak_mbit: float
    """At the highest rate in force in the window."""


class IpsecEnd(Contract):
    """One end of an IPsec tunnel after the test (analysis/ipsec_stats.py)."""

    replay_window: int
    """Its SAs' anti-replay window, packets (0: no replay protection)."""
    sas: int
    """SAs listed with their statistics (2: one each way)."""
    behind_window: int
    """Packets its SAs dropped as older than the window (`ip -s xfrm state`: stats replay-window)."""
    duplicates: int
    """Packets its SAs dropped as replayed (stats replay)."""
    integrity_failed: int
    kernel_seq_errors: int | None = None
    """The growth of the namespace's XfrmInStateSeqError (/proc/net/xfrm_stat) from the
    tunnel's setup to the end of the test: the kernel's own count of the two above, over
    every SA (None in a teardown log without both readings)."""

    @property
    def replay_drops(self) -> int:
        return self.behind_window + self.duplicates


class ClockOffset(Contract):
    """The server's clock against the client's, measured from the two captures (hosts with
    clocks of their own: analysis/clock.py); the server's timestamps are put on the
    client's clock before any delay, goodput window or one-way delay is read from them."""

    method: str
    offset_ms: float
    """The server's clock minus the client's, before the flows started."""
    drift_ms: float | None
    """How far the offset moved between before and after the flows (None: measured once)."""
    delay_ms: float
    """The round trip of the exchange(s) it was measured from."""
    bound_ms: float
    """The most the offset can be off if the exchange took longer one way than the other
    (half its round trip); exact where both ways took as long."""
    exchanges: int
    """Pings both captures hold, request and reply."""


class CellMetrics(Versioned):
    """metrics.json: what the analysis found in one cell (docs/metrics.md defines each figure)."""

    WHAT = "metrics file"
    ADVICE = "it is recomputed"

    version: Literal[21] = METRICS_VERSION
    key: str = ""
    """Fingerprint of the inputs and settings (analysis/cache.py)."""
    cell: str
    invalid: list[str] = []
    """Why the cell's numbers cannot be used: left out of the tables."""
    flags: list[Flag] = []
    """Results a reader should read with care."""
    steady_window_s: float | None = None
    """D_SS's window, seconds."""
    flows: list[FlowMetrics] = []
    """Per flow, in fl's flow order."""
    ping_ms: Ping | None = None
    """Flent's ICMP ping: before the flows start and while every flow runs."""
    t0: float | None = None
    """Epoch s of Flent's time axis origin."""
    queue: dict[Direction, QueueSummary | None] = {}
    """Per direction with flows: the bottleneck queue while every flow runs (middlebox samples)."""
    qdisc_totals: dict[Direction, QdiscTotals] = {}
    """The whole cell, from tc's counters."""
    peak_mbit: dict[Direction, float] = {}
    """Best aggregate goodput in one interval."""
    jain: float | None = None
    """Jain's index of the flows' D_SS: (Σx)² / (n Σx²)."""
    ratio: float | None = None
    """The largest flow's D_SS over the smallest's."""
    capacity: dict[Direction, Capacity] = {}
    """Per direction with flows: what utilisation, the tables, charts and expectations' capacity_mbit read."""
    utilisation: dict[Direction, float] = {}
    """Per direction: data delivered over what the payload capacity carries in the same window."""
    udp: UdpFlow | None = None
    """The competing UDP flow, where the scenario has one."""
    video: VideoFlow | None = None
    """The video flow, where the scenario has one."""
    probe: ProbeFlow | None = None
    """The latency probe, where the scenario has one."""
    ipsec: dict[str, IpsecEnd] = {}
    """Per tunnel end (cli, srv) of an IPsec cell: its SAs' anti-replay drops."""
    tcp_counters: dict[str, dict[str, int]] = {}
    """Per endpoint (cli, srv): the growth of its TCP counters over the cell, RetransSegs,
    TCPTimeouts … (teardown_format.TCP_COUNTERS; analysis/tcp_counters.py)."""
    clock: ClockOffset | None = None
    """Where the hosts keep clocks of their own (cell.json's backend: an ssh testbed), the
    server's offset from the client's, by which its capture was read; None where they share
    one (namespaces, one VM), or where it could not be measured (no one-way delay then)."""
