"""The analysis and the effect checks on a corpus of recorded cells (tests/fixtures/corpus,
README there), no root needed: each cell's metrics are what was analysed when it was
recorded (expected-metrics.json: a change of any figure shows here), every goodput agrees
with the receiver's capture counted here with dpkt, none exceeds the link's payload
capacity, and every declared path feature's check passes."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from resultlib import arrivals, connections, read_pcap

from flharness.analysis import flent_data
from flharness.analysis.cell_files import CellFiles
from flharness.analysis.metrics import Settings, analyse_folder
from flharness.frames import FRAME_BYTES
from flharness.results import files
from flharness.results.cell_metrics import CellMetrics
from flharness.results.cell_record import CellRecord
from flharness.run.effects import effects

CORPUS = Path(__file__).parents[1] / "fixtures" / "corpus"
CELLS = sorted(p.parent.name for p in CORPUS.glob("*/cell.json"))
PAYLOAD_SHARE = 1448 / FRAME_BYTES
#: (receiver's capture, whether the flows' data comes from the server) per direction
SIDES = {"up": ("srv", False), "down": ("cli", True)}


@pytest.fixture(params=CELLS)
def cell(request) -> tuple[Path, CellRecord]:
    d = CORPUS / request.param
    return d, files.read(CellRecord, d / "cell.json")


def test_the_corpus_covers_what_the_analysis_reads():
    """Download and upload flows, a rate schedule, ECN rewrites, dualpi2's L queue, a
    tunnel, a competing UDP flow, a VM's cell."""
    records = [files.read(CellRecord, CORPUS / c / "cell.json") for c in CELLS]
    flows = [f for r in records for f in r.config.flows]
    assert {f.direction for f in flows} == {"up", "down"}
    assert any(r.config.rate_schedule for r in records) and any(r.config.udp for r in records)
    assert any(r.config.tunnel for r in records) and any(f.ecn for f in flows)
    assert any("dualpi2" in r.config.bottleneck.up.qdisc for r in records)
    assert {r.backend.kind for r in records} == {"host", "vm"}


def test_the_metrics_are_those_recorded(cell):
    d, record = cell
    got = analyse_folder(d, record, Settings()).metrics.model_dump(mode="json")
    want = json.loads((d / "expected-metrics.json").read_text())
    assert got == want, f"{d.name}: the analysis changed; if on purpose: .venv/bin/python {CORPUS}/harvest.py --again"


def test_goodput_is_what_the_receivers_capture_holds_and_is_possible(cell):
    """Per direction, the flows' goodput is the TCP payload whose first copy reached the
    receiver in the test (±0.5 %), and at most the payload capacity (+1 %)."""
    d, record = cell
    m = analyse_folder(d, record, Settings()).metrics
    data = flent_data.load(d / f"{record.cell}.flent.gz")
    start = flent_data.t0(data) + flent_data.lead_in(data)
    end = start + record.config.length
    assert record.endpoints is not None and m.flows
    for direction in {f.direction for f in m.flows}:
        rows = [f for f in m.flows if f.direction == direction]
        assert all(f.start_s == 0 for f in rows) and all(f.goodput_source.startswith("receiver") for f in rows)
        capture, from_server = SIDES[direction]
        counted = unique_payload_mbit(d / f"{capture}.pcap.xz", record.endpoints.server, from_server, start, end)
        total = sum(f.mean_mbit or 0 for f in rows)
        assert counted > 0, (d.name, direction)
        assert abs(total - counted) <= 0.005 * counted, (d.name, direction, total, counted)
        assert total <= 1.01 * m.capacity[direction].mean_mbit, (d.name, direction, total, m.capacity)
        assert m.capacity[direction].peak_mbit <= record.config.bottleneck.of(direction).rate_bps * PAYLOAD_SHARE / 1e6 \
            or record.config.rate_schedule


def test_every_declared_feature_took_effect(cell):
    """The effect checks, run again on the recorded files, pass; and they ran for what
    the cell declares (a tunnel, ECN rewrites, a scalable CC's ECT(1), the schedule)."""
    d, record = cell
    data = flent_data.load(d / f"{record.cell}.flent.gz")
    assert record.endpoints is not None
    found = effects(CellFiles(record.cell, record.config, d, record.endpoints.server, flent=data))
    assert all(e.ok for e in found), [e for e in found if not e.ok]
    features = " ".join(e.feature for e in found)
    config = record.config
    assert ("tunnel" in features) == bool(config.tunnel) and ("rate schedule" in features) == bool(config.rate_schedule)
    assert ("prague" in features) == any(f.cc == "prague" for f in config.flows)
    assert any(f.ecn for f in config.flows) <= ("flow " in features)


def unique_payload_mbit(pcap: Path, server: str, from_server: bool, start: float, end: float) -> float:
    """TCP payload of the flows' connections (netperf's control connection aside) whose
    first copy arrived between START and END (epoch s), toward the server or from it."""
    total = 0
    for pkts in connections(read_pcap(pcap)).values():
        held: list[tuple[int, int]] = []
        first = None
        for p in pkts:
            if p.payload <= 0 or (p.src == server) != from_server:
                continue
            first = p.seq if first is None else first
            lo = (p.seq - first) % 2**32
            new = _new_bytes(held, lo, lo + p.payload)
            total += new if start <= p.ts < end else 0
    return total * 8 / (end - start) / 1e6


def _new_bytes(held: list[tuple[int, int]], lo: int, hi: int) -> int:
    """Add [LO, HI) to HELD (sorted disjoint ranges, merged in place); the bytes not held before."""
    new = hi - lo - sum(max(0, min(b, hi) - max(a, lo)) for a, b in held)
    merged = sorted([*held, (lo, hi)])
    held.clear()
    for a, b in merged:
        if held and a <= held[-1][1]:
            held[-1] = (held[-1][0], max(held[-1][1], b))
        else:
            held.append((a, b))
    return new


def queueing_ms(sender: Path, receiver: Path, data_from_server: bool, t0: float) -> list[tuple[float, float]]:
    """(arrival on Flent's axis, one-way delay above the least, ms) of each data packet
    seen in both captures (matched by resultlib.arrivals, counted here)."""
    def data(path: Path) -> list:
        return [p for conn in connections(read_pcap(path)).values() for p in conn
                if p.payload and (p.src == conn[0].dst) == data_from_server]
    owd = [(t - t0, t - p.ts) for p, t in arrivals(data(sender), data(receiver))]
    least = min(d for _, d in owd)
    return sorted((t, 1e3 * (d - least)) for t, d in owd)


def test_a_tcp_rtt_spike_after_a_rate_step_is_in_the_packets(cell):
    """Where a step of the rate schedule raised a flow's TCP RTT (its socket's smoothed
    samples), the packets show the queue that did it (one-way delay from the sender's
    capture to the receiver's, counted here): within the step's span it rose to at least
    80 % of the RTT's rise, stayed more than 50 ms up until within 1 s of where the spike
    ended, and never beyond what the bottleneck's buffer holds at the step's rate."""
    d, record = cell
    m = files.read(CellMetrics, d / "expected-metrics.json")
    if not record.config.steps:
        assert all(f.rtt_spike is None for f in m.flows)
        return
    spiked = [f for f in m.flows if f.rtt_spike is not None and f.rtt_spike.lasted_s > 0]
    assert spiked, "the corpus's rate-schedule cell has a spike to check"
    for f in spiked:
        s = f.rtt_spike
        (sender, receiver), from_server = {"up": (("cli", "srv"), False), "down": (("srv", "cli"), True)}[f.direction]
        step = next(x for x in record.config.steps if x.at_s == s.step_s)
        nxt = min((x.at_s for x in record.config.steps if x.at_s > s.step_s), default=float("inf"))
        queue = [(t, q) for t, q in queueing_ms(d / f"{sender}.pcap.xz", d / f"{receiver}.pcap.xz", from_server, m.t0)
                 if s.step_s <= t < nxt]
        assert max(q for _, q in queue) >= 0.8 * s.above_ms, (max(q for _, q in queue), s)
        high = [t for t, q in queue if q > 50]
        assert high and abs((high[-1] - s.step_s) - s.lasted_s) <= 1.0, (high[-1:], s)
        link = step.of(f.direction)
        buffer_ms = 1e3 * int(link.qdisc.split()[-1]) * FRAME_BYTES * 8 / link.rate_bps  # pfifo limit N
        assert max(q for _, q in queue) <= buffer_ms + 20, (max(q for _, q in queue), buffer_ms)
