"""One-way delay where the hosts keep clocks of their own (analysis/clock.py): a recorded
cell's server capture shifted by an offset fl is not told, and drifting over the test,
then read as an ssh testbed's cell: fl measures the offset from Flent's pings in the two
captures, and every flow's one-way delay and goodput (both directions) are those of the
cell as recorded on one clock, within the offset measurement's stated error."""
from __future__ import annotations

import json
import lzma
import shutil
from pathlib import Path

import dpkt
import pytest

from flharness.analysis.metrics import Settings, analyse_folder
from flharness.results import files
from flharness.results.cell_record import CellRecord

CELL = Path(__file__).parents[1] / "fixtures" / "corpus" / "bidirectional"  # an upload and a download flow
SHIFT_S, DRIFT_S = 3.7, 0.0004  # the server's clock ahead by 3.7 s, then 0.4 ms more by the end


def shifted(tmp_path: Path, shift: float, drift: float, ssh: bool = True, pings: bool = True) -> Path:
    """A copy of CELL whose server capture is SHIFT s ahead (DRIFT more by its end), as an
    ssh testbed's (or as recorded); without pings, its ICMP left out."""
    d = tmp_path / CELL.name
    shutil.copytree(CELL, d)
    with lzma.open(CELL / "srv.pcap.xz") as f:
        reader = dpkt.pcap.Reader(f)
        packets = list(reader)
    first, last = packets[0][0], packets[-1][0]
    with lzma.open(d / "srv.pcap.xz", "wb") as f:
        writer = dpkt.pcap.Writer(f, nano=True)
        for ts, buf in packets:
            ip = dpkt.ethernet.Ethernet(buf).data
            if not pings and isinstance(ip, dpkt.ip.IP) and ip.p == dpkt.ip.IP_PROTO_ICMP:
                continue
            writer.writepkt(buf, ts + shift + drift * (ts - first) / (last - first))
    record = json.loads((d / "cell.json").read_text())
    if ssh:
        record["backend"]["testbed"] = "ssh"
    (d / "cell.json").write_text(json.dumps(record))
    return d


def metrics(d: Path):
    return analyse_folder(d, files.read(CellRecord, d / "cell.json"), Settings()).metrics


def test_an_unknown_offset_does_not_show_in_the_one_way_delays(tmp_path):
    truth = metrics(CELL)
    got = metrics(shifted(tmp_path, SHIFT_S, DRIFT_S))
    assert truth.clock is None and got.clock is not None
    c = got.clock
    assert c.offset_ms == pytest.approx(SHIFT_S * 1e3, abs=0.2), c  # the path's two ways are as long: exact
    assert c.drift_ms == pytest.approx(DRIFT_S * 1e3, abs=0.2) and c.exchanges > 10, c
    assert c.delay_ms / 2 <= c.bound_ms < 2.5, c  # half the least-queued pings' round trip: the base RTT
    for want, flow in zip(truth.flows, got.flows, strict=True):
        assert want.owd_ms and flow.owd_ms, (want, flow)
        for p in ("median", "p95", "p99"):
            assert getattr(flow.owd_ms, p) == pytest.approx(getattr(want.owd_ms, p), abs=0.3), (flow.direction, p)
        assert flow.owd_ms.n == want.owd_ms.n and flow.mean_mbit == pytest.approx(want.mean_mbit, rel=0.002), flow


def test_a_shared_clock_is_not_corrected(tmp_path):
    """The same shifted capture as if the hosts shared one clock: read as it is (the
    delays are then off by the shift: it is the testbed's word that they share one)."""
    got = metrics(shifted(tmp_path, SHIFT_S, 0, ssh=False))
    assert got.clock is None
    assert got.flows[0].owd_ms and got.flows[0].owd_ms.median > SHIFT_S * 1e3


def test_without_pings_no_one_way_delay_and_why(tmp_path):
    got = metrics(shifted(tmp_path, SHIFT_S, 0, pings=False))
    assert got.clock is None
    for flow in got.flows:
        assert flow.owd_ms is None and flow.owd_unavailable is not None
        assert "clocks of their own" in flow.owd_unavailable and "no ping exchange" in flow.owd_unavailable
