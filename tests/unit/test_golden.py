"""fl's analysis on a real cell without a testbed: the golden fixture (tests/fixtures/golden/,
one 3 s cell of tests/fixtures/golden.yml recorded on the namespace testbed; its README
says how). flharness.analysis.cache.compute runs on a copy, and every figure it reports
is compared with one this test derives itself from the fixture's files: the captures
decoded with dpkt (connections by DSCP, data segments, retransmissions, ECN codepoints,
the receiver's ACK advance, one-way delay matched by sequence number and IP id, loss),
the middlebox's queue samples read as plain JSON, tc's counters in the teardown log,
Flent's raw socket and ping samples, and the link's physics (payload capacity = rate ×
1448/1514; a 20-packet FIFO's drain time)."""
from __future__ import annotations

import gzip
import json
import os
import re
import shutil
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from resultlib import LEAD_IN, SYN, Pkt, arrivals, payload_received_mbit, read_pcap

from flharness.analysis import cache
from flharness.analysis.metrics import Settings
from flharness.results import cell_folder

GOLDEN = Path(__file__).parents[1] / "fixtures" / "golden"
CLI, SRV = "10.71.1.1", "10.71.2.1"
ECN_NAMES = {0: "not_ect", 1: "ect1", 2: "ect0", 3: "ce"}
PAYLOAD_SHARE = 1448 / 1514  # TCP payload per full frame


@pytest.fixture(scope="module")
def cell(tmp_path_factory) -> Path:
    """A copy of the golden cell (compute() writes metrics.json next to its inputs)."""
    d = tmp_path_factory.mktemp("golden") / "cell"
    shutil.copytree(GOLDEN, d)
    return d


@pytest.fixture(scope="module")
def rec(cell) -> dict:
    return json.loads((cell / "cell.json").read_text())


@pytest.fixture(scope="module")
def flent(cell, rec) -> dict:
    with gzip.open(cell / f"{rec['cell']}.flent.gz", "rt") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def metrics(cell) -> dict:
    cache.compute(cell, Settings())
    return json.loads((cell / cell_folder.METRICS).read_text())


def t0(flent: dict) -> float:
    """Flent's time origin (epoch s): T0 in its metadata, an ISO time in UTC."""
    return datetime.fromisoformat(flent["metadata"]["T0"].replace("Z", "+00:00")).timestamp()


def flows_window(flent: dict, rec: dict) -> tuple[float, float]:
    """The flows' time in the test (epoch s): from Flent's lead-in to the end (both start at 0)."""
    return t0(flent) + LEAD_IN, t0(flent) + LEAD_IN + rec["config"]["length"]


def flow(pkts: tuple[Pkt, ...], tos: int) -> list[Pkt]:
    """The data connection whose SYN from the client carries TOS's DSCP: its packets, both ways."""
    (port,) = {p.sport for p in pkts if p.proto == 6 and p.src == CLI and p.flags & SYN and p.dscp == tos >> 2}
    return [p for p in pkts if p.proto == 6 and (p.sport if p.src == CLI else p.dport) == port]


def delivered(conn: list[Pkt], start: float, end: float) -> int:
    """Payload bytes whose first copy reached the server in [START, END]: the union of
    the data segments that arrived by END less the union of those that arrived before
    START (byte ranges relative to the first segment)."""
    segs = data_segments(conn)
    first = segs[0].seq

    def union(until: float) -> int:
        spans = sorted(((p.seq - first) % 2**32, (p.seq - first) % 2**32 + p.payload) for p in segs if p.ts <= until)
        total, reach = 0, 0
        for lo, hi in spans:
            total += max(0, hi - max(lo, reach))
            reach = max(reach, hi)
        return total

    return union(end) - union(start - 1e-9)


def data_segments(conn: list[Pkt]) -> list[Pkt]:
    return [p for p in conn if p.src == CLI and p.payload > 0]


@pytest.fixture(scope="module")
def caps(cell) -> dict[str, tuple[Pkt, ...]]:
    return {h: read_pcap(cell / f"{h}.pcap.xz") for h in ("cli", "srv")}


def test_the_fixture_is_a_real_cell(rec, cell):
    assert rec["status"] == "ok" and rec["backend"]["kind"] == "host", rec["reason"]
    assert [f["cc"] for f in rec["config"]["flows"]] == ["cubic", "reno"]
    for name in ("cli.pcap.xz", "srv.pcap.xz", "cli.ss.log", "mid.qdisc.log", "teardown.log", f"{rec['cell']}.flent.gz"):
        assert (cell / name).stat().st_size > 0, name


def test_goodput_is_what_first_reached_the_receiver_in_the_test(metrics, rec, flent, caps):
    """Per flow: the payload bytes whose first copy reached the server in the test (its
    own capture, the union of the data segments: fl reads the server's ACKs and what
    arrived above them), over the test's length; their sum within the payload capacity,
    and within 2 % of resultlib's count of the same."""
    start, end = flows_window(flent, rec)
    total = 0.0
    for f, m in zip(rec["config"]["flows"], metrics["flows"]):
        conn = flow(caps["srv"], f["tos"])
        mine = delivered(conn, start, end) * 8 / (end - start) / 1e6
        assert m["mean_mbit"] == pytest.approx(mine, rel=1e-9) and m["goodput_source"] == "receiver (srv capture)"
        total += mine
    capacity = rec["config"]["bottleneck"]["up"]["rate_bps"] * PAYLOAD_SHARE / 1e6
    assert total <= capacity * 1.001
    assert metrics["utilisation"]["up"] == pytest.approx(total / capacity, rel=1e-9)
    arrived = payload_received_mbit(GOLDEN / "srv.pcap.xz", start, end)
    assert abs(arrived - total) <= 0.02 * arrived, (arrived, total)


def test_segments_retransmissions_and_codepoints_per_flow(metrics, rec, caps):
    """Flows are told apart by their DSCP; per flow, the data segments the client sent (its
    capture) and the server received (its capture), those that started below the highest
    byte already sent (retransmissions), and the codepoints that arrived: flow 1, rewritten
    by the middlebox, ECT(1); flow 2 ECT(0); retransmissions Not-ECT. The packets the
    server's capture lacks of those the client's holds are the ones tc says the FIFO
    dropped; the data segments lost are among them."""
    lost = 0
    for f, m in zip(rec["config"]["flows"], metrics["flows"]):
        sent, got = (data_segments(flow(caps[h], f["tos"])) for h in ("cli", "srv"))
        high, retrans = None, 0
        for p in sent:
            begin = p.seq if high is None else high + ((p.seq - high + 2**31) % 2**32 - 2**31)
            retrans += high is not None and begin < high
            high = begin + p.payload if high is None else max(high, begin + p.payload)
        codepoints = {ECN_NAMES[e]: sum(1 for p in got if p.ecn == e) for e in ECN_NAMES if any(p.ecn == e for p in got)}
        assert m["pcap"] == {"sent": len(sent), "received": len(got), "retrans": retrans,
                             "loss": pytest.approx((len(sent) - len(got)) / len(sent)), "ecn_received": codepoints,
                             "dscp": f["tos"] >> 2}, m["pcap"]
        lost += len(sent) - len(got)
    assert set(metrics["flows"][0]["pcap"]["ecn_received"]) == {"ect1", "not_ect"}
    assert set(metrics["flows"][1]["pcap"]["ecn_received"]) == {"ect0", "not_ect"}
    fifo = re.search(r"qdisc pfifo 10: parent 1:1 limit 20p\n Sent \d+ bytes \d+ pkt \(dropped (\d+),",
                     (GOLDEN / "teardown.log").read_text().split("show dev mid.r;")[1])
    upload = [sum(1 for p in caps[h] if p.src == CLI and p.dst == SRV) for h in ("cli", "srv")]
    assert fifo and upload[0] - upload[1] == int(fifo.group(1)) >= lost > 0, (upload, lost, fifo.group(0))


def test_one_way_delay_and_loss_match_segments_across_the_captures(metrics, rec, flent, caps):
    """Each data segment the client sent in the test, found in the server's capture by
    sequence number and IP id: the delays' percentiles; loss among the segments sent up to
    the last one that arrived. Physics: no delay below zero or above the full 20-packet
    FIFO's drain time at 4 Mbit/s (60.6 ms) plus a millisecond."""
    start, end = flows_window(flent, rec)
    drain_ms = 20 * 1514 * 8 / rec["config"]["bottleneck"]["up"]["rate_bps"] * 1e3
    for f, m in zip(rec["config"]["flows"], metrics["flows"]):
        sent = [p for p in data_segments(flow(caps["cli"], f["tos"])) if start <= p.ts <= end]
        matched = [(p.ts, t - p.ts) for p, t in arrivals(sent, data_segments(flow(caps["srv"], f["tos"])))]
        delays = np.array([d for _, d in matched]) * 1e3
        last = max(t for t, _ in matched)
        settled = {(p.seq, p.ipid) for p in sent if p.ts <= last}
        p50, p95, p99 = np.percentile(delays, [50, 95, 99])
        owd = m["owd_ms"]
        assert (owd["n"], owd["sent"]) == (len(matched), len(settled)), owd
        assert owd["median"] == pytest.approx(p50, abs=1e-3) and owd["p95"] == pytest.approx(p95, abs=1e-3)
        assert owd["p99"] == pytest.approx(p99, abs=1e-3) and owd["loss"] == pytest.approx(1 - len(matched) / len(settled))
        assert delays.min() >= 0 and delays.max() <= drain_ms + 1, (delays.min(), delays.max(), drain_ms)


def _samples(log: Path) -> list[tuple[float, dict]]:
    """The middlebox's samples of the upload port (its first in each sample): (time, the
    FIFO's JSON), read as plain JSON."""
    out, stamp, arrays = [], None, []
    for line in [*log.read_text().splitlines(), "# end"]:
        if line.startswith("# ") and not line.startswith("# devices"):
            if stamp is not None and len(arrays) == 2:
                out.append((stamp, next(q for q in arrays[0] if q.get("handle") == "10:")))
            stamp, arrays = (float(line[2:]) if line != "# end" else None), []
        elif line.startswith("["):
            arrays.append(json.loads(line))
    return out


def test_the_queue_from_the_middleboxs_samples(metrics, rec, flent):
    """Backlog (packets, bytes) over the samples taken while both flows ran, its drain
    time at 4 Mbit/s, and the FIFO's drops between the first and the last of them; the
    backlog never above the FIFO's 20 packets, the drops at most what tc counted after the
    test."""
    start, end = flows_window(flent, rec)
    inside = [q for t, q in _samples(GOLDEN / "mid.qdisc.log") if start <= t <= end]
    pkts = np.array([q["qlen"] for q in inside], dtype=float)
    backlog = np.array([q["backlog"] for q in inside], dtype=float)
    delay = backlog * 8 / rec["config"]["bottleneck"]["up"]["rate_bps"] * 1e3
    got = metrics["queue"]["up"]
    assert got["kind"] == "pfifo" and got["samples"] == len(inside) > 10
    for key, values in (("backlog_pkts", pkts), ("backlog_bytes", backlog), ("delay_ms", delay)):
        assert got[key] == pytest.approx({"mean": values.mean(), "p95": np.percentile(values, 95), "max": values.max()}), key
    assert got["drops"] == inside[-1]["drops"] - inside[0]["drops"]
    assert pkts.max() <= 20 and got["drops"] <= metrics["qdisc_totals"]["up"]["drops"] == 39


def _steady(flent: dict, series: str, window: float, link_mbit: float) -> tuple[float, int]:
    """D_SS by hand from Flent's raw samples, and how many samples in its window were
    above the link's rate (LINK_MBIT) and left out."""
    samples = [(s["t"], s["tcp_delivery_rate"]) for s in flent["raw_values"][series] if s.get("tcp_delivery_rate")]
    end = samples[-1][0] - 1
    values = [v for t, v in samples if end - window - 0.05 <= t <= end + 0.05]  # bounds included
    possible = [v for v in values if v <= link_mbit]
    return sum(possible) / len(possible), len(values) - len(possible)


def test_steady_state_rates_fairness_and_ping_from_flents_samples(metrics, rec, flent):
    """D_SS per flow (the mean delivery rate over 2 s, two thirds of the 3 s test, ending a
    second before the flow's last socket sample, without the samples above the link's
    4 Mbit/s), Jain's index and the ratio of them; the base RTT (Flent's ping before the
    flows) and ping under load."""
    assert metrics["steady_window_s"] == 2
    link = rec["config"]["bottleneck"]["up"]["rate_bps"] / 1e6
    d, excluded = zip(*(_steady(flent, f["series"], 2, link) for f in metrics["flows"]))
    assert [f["steady_mbit"] for f in metrics["flows"]] == pytest.approx(d, rel=1e-12)
    assert [f["steady_excluded"] for f in metrics["flows"]] == list(excluded)
    assert metrics["jain"] == pytest.approx(sum(d) ** 2 / (2 * sum(x * x for x in d)))
    assert metrics["ratio"] == pytest.approx(max(d) / min(d))
    origin = t0(flent)
    ping = [(x - origin if x > 1e9 else x, v) for x, v in zip(flent["x_values"], flent["results"]["Ping (ms) ICMP"]) if v is not None]
    base = [v for t, v in ping if t < LEAD_IN - 0.5]
    loaded = [v for t, v in ping if LEAD_IN <= t < LEAD_IN + rec["config"]["length"]]
    assert metrics["ping_ms"]["base_median"] == pytest.approx(float(np.median(base)))
    assert metrics["ping_ms"]["loaded"]["median"] == pytest.approx(float(np.median(loaded)))
    assert metrics["ping_ms"]["base_median"] < 1 < metrics["ping_ms"]["loaded"]["median"]  # no delay added; the FIFO under load


def test_steady_state_rates_are_within_the_link(metrics, rec, flent):
    """D_SS is physically possible: flow 1's window holds the first sample of its slow
    start, 156.5 Mbit/s at a 3.7 ms RTT (a burst through HTB) on the 4 Mbit/s link, which
    made its D_SS 17.7 Mbit/s, Jain's index 0.59 and the ratio 10.6 while the server got
    2.33 and 1.48 Mbit/s. That sample is left out and counted (flow 1: 1, flow 2: 0);
    both D_SS are then within the payload capacity, the ratio below 2, and nothing is
    flagged as impossible."""
    capacity = rec["config"]["bottleneck"]["up"]["rate_bps"] * PAYLOAD_SHARE / 1e6
    first = flent["raw_values"][metrics["flows"][0]["series"]][0]
    assert first["tcp_delivery_rate"] > 150 and first["tcp_rtt"] < 4, first
    assert [f["steady_excluded"] for f in metrics["flows"]] == [1, 0]
    assert all(0 < f["steady_mbit"] <= capacity for f in metrics["flows"]), [f["steady_mbit"] for f in metrics["flows"]]
    assert metrics["ratio"] < 2 and metrics["jain"] > 0.9
    assert not [f for f in metrics["flags"] if f["kind"] == "measurement_error"], metrics["flags"]
    assert not [f for f in metrics["flags"] if f["code"] in ("steady_over_capacity", "goodput_over_capacity")]


def test_metrics_are_cached_until_an_input_changes(cell, metrics):
    """compute() stored its result under a fingerprint of the inputs: read back as is, and
    stale once an input's modification time changes."""
    settings = Settings()
    stored = cache.cached(cell, settings)
    assert stored is not None and stored.key == metrics["key"]
    assert cache.cached(cell, Settings(steady_window=1.0)) is None  # other settings
    pcap = cell / "srv.pcap.xz"
    st = pcap.stat()
    os.utime(pcap, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    try:
        assert cache.cached(cell, settings) is None
    finally:
        os.utime(pcap, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert cache.cached(cell, settings) is not None
