"""A scheme in the l4s image (tests/scenarios/vm-schemes.yml, in the session's l4s_lab run):
QUIC Cubic (ngtcp2 0.12.1) alone through DualPI2 and through fq_codel, 10 Mbit/s, 20 ms.
Read against what fl did not compute: tc's own counters in the teardown log (parsed here),
both captures through tcpdump, and each AQM's own target delay (RFC 9332's PI2 in C 15 ms,
RFC 8290's CoDel 5 ms), which a sender that ignored the CE marks would overrun (the queue
would grow to the drops of a full buffer). Selected with `pytest -m vm`.
"""
from __future__ import annotations

import json
import re

import pytest
from flrun import needs_vm
from resultlib import SRV, find, packets

from flharness.hosts import SCHEME_PORT

pytestmark = [pytest.mark.vm, needs_vm()]
DATA = f"udp and dst host {SRV} and port {SCHEME_PORT + 1}"  # flow 1's datagrams to the server
BASE_OWD_MS = 10  # half the cell's 20 ms RTT


def upload_qdisc(cell_dir, kind: str) -> dict[str, int]:
    """The counters tc printed for the bottleneck qdisc KIND on the upload port after the test."""
    text = (cell_dir / "teardown.log").read_text()
    block = text.split("$ tc -s -d qdisc show dev mid.r;", 1)[1].split("\n$ ", 1)[0]
    stats = block[block.index(f"qdisc {kind}"):].split("\nqdisc ", 1)[0]
    return {k: int(v) for k, v in re.findall(r"\b(pkts_in_c|pkts_in_l|ecn_mark|step_mark|drop_overlimit) (\d+)", stats)}


def quic(lab, qdisc: str):
    rec, _, d = find(lab["root"], "vm-schemes", qdisc=qdisc)
    assert rec["status"] == "ok", rec["reason"]
    (flow,) = json.loads((d / "metrics.json").read_text())["flows"]
    capacity = 10.0 * flow["payload_share"]  # Mbit/s of UDP payload the link carries at its datagrams' size
    assert 0.85 * capacity <= flow["mean_mbit"] <= 1.01 * capacity, (flow["mean_mbit"], capacity)
    received = packets(d / "srv.pcap.xz", DATA)
    ce = packets(d / "srv.pcap.xz", f"{DATA} and ip[1] & 3 == 3")
    ect0 = packets(d / "srv.pcap.xz", f"{DATA} and ip[1] & 3 == 2")
    assert flow["pcap"]["received"] == received and ect0 + ce >= 0.99 * received, (flow["pcap"], ect0, ce)
    return d, flow, received, ce


@pytest.fixture(scope="module")
def lab(l4s_lab):
    return l4s_lab


def test_quic_is_in_dualpi2s_c_queue_held_at_its_target(lab):
    """ngtcp2's ECT(0) datagrams are classic to DualPI2: every one in C, none in L; its CE
    marks are the CE datagrams the server received; the C queue holds QUIC at PI2's 15 ms
    target (its median one-way delay the path's 10 ms plus 15, within 5), with no loss."""
    d, flow, received, ce = quic(lab, "dualpi2")
    stats = upload_qdisc(d, "dualpi2")
    assert stats["pkts_in_l"] == 0 and stats["pkts_in_c"] >= received, (stats, received)
    assert stats["ecn_mark"] == ce > 0, (stats, ce)
    assert abs(flow["owd_ms"]["median"] - BASE_OWD_MS - 15) <= 5 and flow["owd_ms"]["loss"] == 0, flow["owd_ms"]


def test_quic_answers_fq_codels_marks(lab):
    """fq_codel marks QUIC's ECT(0) datagrams CE (its ecn_mark counter is the server's CE
    count), and ngtcp2 slows down for them: its queue stays at CoDel's 5 ms target (median
    one-way delay 10 + 5 ms, within 3), nothing dropped, not even by a full queue."""
    d, flow, _, ce = quic(lab, "fq_codel")
    stats = upload_qdisc(d, "fq_codel")
    assert stats["ecn_mark"] == ce > 0 and stats["drop_overlimit"] == 0, (stats, ce)
    assert abs(flow["owd_ms"]["median"] - BASE_OWD_MS - 5) <= 3 and flow["owd_ms"]["loss"] == 0, flow["owd_ms"]
    assert flow["cpu_s"]["sender"] > 0 and flow["cpu_s"]["receiver"] > 0, flow["cpu_s"]
