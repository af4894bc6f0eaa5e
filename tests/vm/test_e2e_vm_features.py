"""Path-emulation features for real, in the VM (distribution kernel, virtual time).

The session's VM run (conftest.vm_run) includes tests/scenarios/vm-features.yml
(per-flow RTT, a rate step, a slotted path, 5 % loss, ECN bleaching, netem reordering,
duplication and corruption, rtt_split, a client qdisc whose CE marks the middlebox
bleaches for one flow) and pantheon-seed
(the shipped pantheon-1mbit scenario, seed 003's parameters, one 30 s run per scheme: TCP BBR
and CUBIC, QUIC Cubic and LEDBAT). Every check reads what the run left behind:
socket statistics, Flent's time series, the pcaps (through tcpdump) and the logs.
Selected with `pytest -m vm`.
"""
from __future__ import annotations

import collections
import itertools
import json
import re
import shutil
import statistics

import pytest
from flrun import needs_vm, run_fl
from resultlib import (
    CE,
    CLI,
    PAYLOAD_SHARE,
    SRV,
    arrival_bins,
    cells,
    connections,
    ecn_split,
    find,
    lead_in,
    mbit,
    packets,
    payload_received_mbit,
    read_pcap,
    schedule_steps,
    series,
    step_applied,
)

from flharness.analysis import queue
from flharness.analysis.flent_data import t0 as flent_t0
from flharness.frames import FRAME_BYTES
from flharness.hosts import SCHEME_PORT
from flharness.results import cell_folder

pytestmark = [pytest.mark.vm, needs_vm()]
CUBIC_BETA = 0.7  # Cubic's multiplicative decrease (RFC 9438)


@pytest.fixture(scope="module")
def run(vm_run):
    """The session's VM run (conftest.vm_run; test_e2e_vm checks that it completed)."""
    return vm_run["root"]


def test_every_cell_ran_in_the_vm(run):
    for scenario, count in (("vm-features", 9), ("pantheon-seed", 4)):  # conftest.VM_CELLS counts them
        assert len(cells(run, scenario)) == count, (scenario, sorted(cells(run, scenario)))
        for d in cells(run, scenario).values():
            rec = json.loads((d / "cell.json").read_text())
            assert rec["status"] == "ok", (rec["cell"], rec["reason"])
            assert rec["backend"]["kind"] == "vm" and rec["backend"]["clock"] == "virtual"


def test_per_flow_rtt_from_socket_stats(run):
    """Flow 1 (cubic) has an 80 ms path, flow 2 (reno) 20 ms: each socket's minimum RTT,
    the flows queued apart (fq_codel), so each sees its path empty at its start."""
    _, _, d = find(run, "vm-features", rtt="80ms-20ms")
    minrtt: dict[str, float] = {}
    for block in (d / "cli.ss.log").read_text().split("\n\t"):
        m = re.match(r"\s*(\w+) .*minrtt:([\d.]+)", block, re.S)
        if m and ":12865" not in block.split("\n")[0] and m.group(1) in ("cubic", "reno"):
            minrtt[m.group(1)] = min(minrtt.get(m.group(1), 1e9), float(m.group(2)))
    assert abs(minrtt["cubic"] - 80) <= 2 and abs(minrtt["reno"] - 20) <= 2, minrtt


def test_rate_step_shows_at_its_time(run):
    """10 → 2 Mbit/s declared at t = 10 s of the test: what reaches the server per half
    second (whole frames, as HTB counts them) is near 10 Mbit/s before and at most 2 (+3 %
    and one frame of HTB's burst) from 10.5 s on; the middlebox applied the step at 10 s,
    +0.2 s: its log's time is taken once tc has run, and in an emulated guest starting tc
    costs virtual time (seen 27-73 ms late; on namespaces 3-11 ms, test_e2e_behaviours).
    (Not netperf's samples: they count what the sender wrote, 8.7 Mbit/s in the last second
    of a 2 Mbit/s link was seen.)"""
    _, data, d = find(run, "vm-features", rate_schedule="2mbit@10s")
    pkts, t0 = read_pcap(d / "srv.pcap.xz"), flent_t0(data)
    bins = arrival_bins(pkts, CLI, t0, 7.0, 15.0)  # 16 half seconds: 7-10 s, then 10-15 s
    before, after = bins[:6], bins[7:]
    assert min(before) > 0.9 * 10, before
    assert max(after) <= 2 * 1.03 + 1514 * 8 / 0.5 / 1e6, after
    steps = schedule_steps(d)
    assert [(planned, up) for _, planned, up, _ in steps] == [(10.0, "2mbit")], steps
    assert 10 <= step_applied(d, 10.0) <= 10.2, steps


def test_slotting_changes_the_delay_distribution(run):
    """Idle ping (the lead-in, before any flow) is flat on a clean 20 ms path (vm-aqm's
    fq_codel cell) and spread by the netem slots of the bursty one."""
    spread = {}
    for label, (scenario, coords) in {"clean": ("vm-aqm", {"qdisc": "fq_codel", "rtt": "20ms", "cc": "cubic-vs-cubic"}),
                                      "bursty": ("vm-features", {"netem": "bursty"})}.items():
        _, data, _ = find(run, scenario, **coords)
        idle = sorted(v for _, v in series(data, "Ping (ms) ICMP", 0.5, lead_in(data) - 0.5))
        spread[label] = idle[int(0.9 * (len(idle) - 1))] - idle[int(0.1 * (len(idle) - 1))]
    assert spread["clean"] < 0.5 and spread["bursty"] > 1.0, spread


def test_a_chained_netem_releases_bursts_of_at_most_16_packets_per_slot(run):
    """The bursty cell's second netem (`then delay 200us slot 800us 5ms packets 16 limit
    10000`) sits under the path delay's on both IFBs and sent packets (tc -s in the
    teardown log); at the server, behind a 1 Gbit/s bottleneck, the data arrives in bursts
    at least 0.4 ms apart (a slot opens every 0.8-5 ms): 99 % of them hold at most 16
    packets, and most exactly 16 (the slots fill up). (In CI: 2776 bursts, 2685 of 16, 6
    of two slots that left too close to be told apart.)"""
    _, data, d = find(run, "vm-features", netem="bursty")
    mid = (d / "teardown.log").read_text().split("======== mid ========")[1].split("======== srv")[0]
    for ifb in ("ifb4mid.l", "ifb4mid.r"):
        block = mid.split(f"show dev {ifb};", 1)[1].split("\n$ ", 1)[0]
        chained = re.search(r"qdisc netem 30: parent 1:1 .*?slot 800us 5ms packets 16.*?\n Sent \d+ bytes (\d+) pkt", block, re.S)
        assert chained and int(chained.group(1)) > 1000, (ifb, block)
        assert re.search(r"qdisc netem 1: root .*?delay 10ms", block, re.S), (ifb, block)
    start = flent_t0(data) + lead_in(data)
    arrivals = sorted(p.ts for p in read_pcap(d / "srv.pcap.xz")
                      if p.src == CLI and p.proto == 6 and p.payload > 0 and start + 1 <= p.ts <= start + 9)
    bursts, size = [], 1
    for a, b in itertools.pairwise(arrivals):
        if b - a > 0.0004:
            bursts.append(size)
            size = 0
        size += 1
    sizes = collections.Counter(bursts)
    assert len(bursts) > 500 and sizes.most_common(1)[0][0] == 16, sizes  # the slots fill up
    assert sum(n for size, n in sizes.items() if size <= 16) >= 0.99 * len(bursts), sizes


def test_loss_in_the_pcaps(run):
    """netem loss 5 % toward the server (the GENI lab's one lossy way): data segments seen
    at srv vs sent by cli; the ACKs on the way back all arrive. fl's own verdict judged
    the loss against the binomial bounds."""
    rec, _, d = find(run, "vm-features", netem="up_loss_5%_down_none")
    # four flows, so thousands of packets: the estimate's standard error is ~0.2 %
    data = f"tcp and src host {CLI} and not port 12865 and greater 1000"
    sent, received = packets(d / "cli.pcap.xz", data), packets(d / "srv.pcap.xz", data)
    assert sent > 1000
    assert 0.04 <= 1 - received / sent <= 0.06, (sent, received)
    acks = f"tcp and src host {SRV} and not port 12865"
    assert packets(d / "srv.pcap.xz", acks) == packets(d / "cli.pcap.xz", acks) > 1000
    (effect,) = [e for e in rec["checks"]["calibration"]["effects"] if e["feature"].startswith("netem loss")]
    assert effect["feature"] == "netem loss up" and effect["ok"], effect


def test_ecn_bleaching_per_flow(run):
    """Both flows are ECN-capable at the client; at the server flow 1 (DSCP 19) arrives
    Not-ECT, flow 2 (DSCP 35) ECT/CE; nft's rule counter shows the rewrites."""
    _, _, d = find(run, "vm-features", ecn="bleach-none")
    assert packets(d / "cli.pcap.xz", "ip[1] & 0xfc == 0x4c and ip[1] & 3 != 0 and greater 1000") > 100
    (all1, ect1), (all2, ect2) = ecn_split(d, 0x4c), ecn_split(d, 0x8c)
    assert all1 > 100 and ect1 == 0, (all1, ect1)
    assert all2 > 100 and ect2 >= 0.95 * all2, (all2, ect2)  # retransmissions go Not-ECT (RFC 3168)
    counter = re.search(r'ip ecn set not-ect counter packets (\d+) .*flow 1: bleach', (d / "teardown.log").read_text())
    assert counter and int(counter.group(1)) > 100


def test_pantheon_schemes_at_1mbit_200ms(run):
    """Seed 003's parameters, one 30 s run per scheme (BBR, CUBIC; fq on the sender's
    interface, as the report's default_qdisc). Each moves data over the 200 ms path;
    CUBIC fills the 625 kB drop-tail buffer (5 s at 1 Mbit/s), so its ping under load
    grows by seconds. fl's goodput is what the server's capture received (±2 %), never
    netperf's sender-side count (1.29 for CUBIC in seed 003), and it is 0.90-0.96 Mbit/s
    (the payload capacity is 0.956). BBR's queue is steady, so its median TCP RTT exceeds
    its median one-way delay by about the return path's 100 ms: ±30, since the one is
    the kernel's smoothed RTT (some 50 samples), the other every packet's own delay (seen
    112; not the p95s: in 30 s BBR's start-up, its queue up to 600 ms, sets both). Loss
    as Pantheon counts it adds what was still queued when the test ended: for CUBIC
    between a full buffer (625 kB, 413 frames, of the ~3000 it sent) and what its last
    decrease left of it (β = 0.7 of the window, the 17 frames in flight on the path plus
    the buffer: 284 frames); seen 0.108 and 0.134 of those sent; for BBR little (seen
    0.2-0.8 %)."""
    for cc in ("cubic", "bbr"):
        rec, data, d = find(run, "pantheon-seed", cc=cc)
        flow = json.loads((d / "metrics.json").read_text())["flows"][0]
        capacity = rec["config"]["bottleneck"]["up"]["rate_bps"] * PAYLOAD_SHARE / 1e6  # 0.956 Mbit/s of payload
        start = flent_t0(data) + lead_in(data)
        arrived = payload_received_mbit(d / "srv.pcap.xz", start, start + rec["config"]["length"])
        assert rec["config"]["length"] == 30 and rec["config"]["client_qdisc"] == "fq"
        assert abs(flow["mean_mbit"] - arrived) <= 0.02 * arrived, (cc, flow["mean_mbit"], arrived)
        assert flow["mean_mbit"] <= 1.01 * capacity, (cc, flow)
        assert 0.90 <= flow["mean_mbit"] <= 0.96, (cc, flow)
        assert flow["goodput_source"].startswith("receiver"), (cc, flow)
        base = statistics.median(v for _, v in series(data, "Ping (ms) ICMP", 0.5, lead_in(data) - 0.5))
        assert abs(base - 200) <= 2, (cc, base)
        assert rec["config"]["bottleneck"]["up"]["qdisc"] == "bfifo limit 625000"
        queued = flow["owd_ms"]["loss_by_end"] - flow["owd_ms"]["loss"]  # Pantheon's loss minus fl's
        if cc == "bbr":
            assert abs(flow["tcp_rtt_ms"]["median"] - flow["owd_ms"]["median"] - 100) <= 30, flow
            assert 0 <= queued < 0.02, flow
        else:
            assert max(v for _, v in series(data, "Ping (ms) ICMP", lead_in(data))) > 1200
            buffer = 625000 / FRAME_BYTES
            path = rec["config"]["bottleneck"]["up"]["rate_bps"] * 0.2 / 8 / FRAME_BYTES  # frames in 200 ms
            sent = flow["owd_ms"]["sent"]
            full, decreased = buffer / sent, (CUBIC_BETA * (path + buffer) - path) / sent
            assert 0.95 * decreased <= queued <= 1.05 * full, (queued, decreased, full, flow)


def test_quic_and_ledbat_beside_them(run):
    """QUIC Cubic (ngtcp2) and LEDBAT (libutp) on seed 003's path, their datagrams matched
    between the captures: each carries at least 85 % of what the link carries of its
    datagrams' payload (1 Mbit/s x their payload share, 0.97), never more; fl's datagram
    counts are tcpdump's of each capture (UDP to the scheme's port on the server). LEDBAT
    holds its queueing delay at its 100 ms target (RFC 6817): its median one-way delay is
    the path's 100 ms plus 100, within 25 (seen 201). QUIC Cubic's datagrams are ECT(0)
    (ngtcp2 sets it: DualPI2 queues them in C), its queue within the 625 kB buffer (5 s;
    seen a steady 445 ms), and both its sides' CPU time is read before they are stopped."""
    port = SCHEME_PORT + 1
    for cc in ("quic_cubic", "ledbat"):
        rec, _, d = find(run, "pantheon-seed", cc=cc)
        (flow,) = json.loads((d / "metrics.json").read_text())["flows"]
        capacity = rec["config"]["bottleneck"]["up"]["rate_bps"] * flow["payload_share"] / 1e6
        assert 0.85 * capacity <= flow["mean_mbit"] <= 1.01 * capacity, (cc, flow["mean_mbit"], capacity)
        assert flow["steady_mbit"] <= 1.01 * capacity, (cc, flow["steady_mbit"], capacity)
        data = f"udp and dst host {SRV} and port {port}"
        assert flow["pcap"]["sent"] == packets(d / "cli.pcap.xz", data) > 2000, (cc, flow["pcap"])
        assert flow["pcap"]["received"] == packets(d / "srv.pcap.xz", data), (cc, flow["pcap"])
        assert flow["pcap"]["retrans"] is None  # inside the scheme's payload: no capture tells
        owd = flow["owd_ms"]
        if cc == "ledbat":
            assert abs(owd["median"] - 100 - 100) <= 25, owd
        else:
            ect0 = packets(d / "srv.pcap.xz", f"{data} and ip[1] & 3 == 2")
            assert ect0 >= 0.99 * flow["pcap"]["received"], (ect0, flow["pcap"])
            assert 100 < owd["median"] <= owd["p95"] <= 100 + 625000 * 8 / 1e3 + 15, owd
            assert flow["cpu_s"]["sender"] > 0 and flow["cpu_s"]["receiver"] > 0, flow["cpu_s"]


def test_the_pantheon_table_renders_with_one_run(run, tmp_path):
    """`fl plot` of the VM run's pantheon-seed: the per-scheme table, one run each. Plotted
    from a copy of the run holding that scenario alone (its record and cells): the table
    reads nothing else, and plotting the run's other 26 cells cost a minute."""
    copy = tmp_path / run.name
    copy.mkdir()
    shutil.copy(run / "run.json", copy / "run.json")
    shutil.copytree(run / "pantheon-seed", copy / "pantheon-seed")
    p = run_fl("plot", "--run", run.name, "--results", str(tmp_path), timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    readme = (copy / "README.md").read_text()
    section = readme.split("## pantheon-seed")[1].split("\n## ")[0]
    assert "| cc | flow cc | throughput (Mbit/s) | p95 one-way delay (ms) | loss (%) | Pantheon's loss (%) |" in section
    for cc, shown in (("cubic", "cubic"), ("bbr", "bbr"), ("quic_cubic", "QUIC Cubic (ngtcp2 0.12.1)"),
                      ("ledbat", "LEDBAT (libutp/utp-native 2.5.3)")):
        assert re.search(rf"^\| {cc}( ⚑)? \| {re.escape(shown)} \| 0\.\d\d \| \d+\.\d \| \d+\.\d\d \| \d+\.\d\d \|",
                         section, re.M), (cc, section)


def test_the_sampled_queue_against_the_captures_and_the_physics(run):
    """The middlebox's queue samples (one a second in a VM). fq_codel's ECN marks, from
    its first sample to its last, are the CE packets that reached the server (its
    capture); the rate-step cell's 30-packet FIFO never holds more than 30 packets, and
    its backlog is read as delay at the rate in force: at 2 Mbit/s after the step, the
    p95 exceeds what 30 packets could wait at 10 Mbit/s (36 ms), and no sample exceeds
    what they wait at 2 Mbit/s (182 ms)."""
    _, _, d = find(run, "vm-features", ecn="bleach-none")
    q = queue.load(d / cell_folder.QUEUE_LOG)["up"]
    ce = packets(d / "srv.pcap.xz", f"dst host {SRV} and ip[1] & 3 == 3")
    assert q.kind == "fq_codel" and ce > 10 and abs(q.marks[-1] - q.marks[0] - ce) <= max(2, 0.01 * ce), (q.marks, ce)
    _, _, d = find(run, "vm-features", rate_schedule="2mbit@10s")
    m = json.loads((d / "metrics.json").read_text())["queue"]["up"]
    full = 30 * 1514 * 8 * 1e3
    assert m["samples"] >= 8 and m["backlog_pkts"]["max"] <= 30, m
    assert full / 10e6 * 1.2 < m["delay_ms"]["p95"] and m["delay_ms"]["max"] <= full / 2e6 * 1.01, m


def _upload(d) -> tuple[list, list]:
    """The upload data connection's data segments as the client sent them and as the
    server received them (dpkt, in capture order)."""
    out = []
    for host in ("cli", "srv"):
        conns = connections(read_pcap(d / f"{host}.pcap.xz"))
        (pk,) = [pk for k, pk in conns.items() if k[0] == CLI and sum(1 for p in pk if p.payload > 0) > 100]
        out.append([p for p in pk if p.src == CLI and p.payload > 0])
    return out[0], out[1]


def _overtaken(sent: list, received: list) -> float:
    """Share of the received segments that arrived after a segment the client sent later
    (segments known by sequence number and IP id: each transmission is a packet of its own)."""
    order = {(p.seq, p.ipid): i for i, p in enumerate(sent)}
    late, latest = 0, -1
    for p in received:
        i = order.get((p.seq, p.ipid))
        if i is None:
            continue
        late += i < latest
        latest = max(latest, i)
    return late / len(received)


def test_netem_reorders_on_the_way_to_the_server(run):
    """netem `reorder 25% 50%` toward the server: a good share of the segments arrive after
    one the client sent later; on the same kind of path without it (the duplicate/corrupt
    cell) none does."""
    rec, _, d = find(run, "vm-features", netem="up_reorder_25%_50%_down_none")
    assert rec["status"] == "ok", rec["reason"]
    reordered = _overtaken(*_upload(d))
    _, _, clean = find(run, "vm-features", netem="up_duplicate_5%_corrupt_2%_down_none")
    assert reordered >= 0.05 and _overtaken(*_upload(clean)) == 0, (reordered, _overtaken(*_upload(clean)))


def _altered(sent: list, received: list) -> float:
    """Share of the received segments whose TCP header differs from the one the client
    sent (the same packet: same IP id; nothing on a clean path rewrites TCP headers)."""
    by_id = {p.ipid: p.header for p in sent}
    known = [p for p in received if p.ipid in by_id]
    return sum(1 for p in known if p.header != by_id[p.ipid]) / len(known)


def test_netem_duplicates_and_corrupts_on_the_way_to_the_server(run):
    """netem `duplicate 5% corrupt 2%` toward the server. Duplicates: segments the client
    sent once (sequence number and IP id) that arrive twice, about 5 % of them (2.5-7.5 %).
    Corruption: segments whose TCP header arrived with other bytes than the client sent:
    some, but at most the 2 % declared (netem flips a bit anywhere in the packet's linear
    part, the Ethernet and IP headers too, and a flipped IP header is dropped on the way;
    seen 6 and 15 of some 2100 segments, so "some" is one or more); on the reordering
    cell's path (no corruption) not one."""
    rec, _, d = find(run, "vm-features", netem="up_duplicate_5%_corrupt_2%_down_none")
    assert rec["status"] == "ok", rec["reason"]
    sent, received = _upload(d)
    keys = [(p.seq, p.ipid) for p in received]
    assert len({(p.seq, p.ipid) for p in sent}) == len(sent) > 1000  # the client sent each once
    twice = len(keys) - len(set(keys))
    assert 0.025 <= twice / len(set(keys)) <= 0.075, (twice, len(set(keys)))
    altered = _altered(sent, received)
    assert 0 < altered <= 0.02, altered
    _, _, clean = find(run, "vm-features", netem="up_reorder_25%_50%_down_none")
    assert _altered(*_upload(clean)) == 0


def test_rtt_split_up_puts_the_whole_delay_on_the_way_to_the_server(run):
    """rtt_split: up with a 40 ms RTT: Flent's pings before the flows take 40 ms from the
    client's capture to the server's, and their replies no time back (the two captures
    share the VM's clock); the idle ping RTT is the declared 40 ms."""
    rec, data, d = find(run, "vm-features", rtt_split="delay_up")
    assert rec["status"] == "ok", rec["reason"]
    cli, srv = (read_pcap(d / f"{h}.pcap.xz") for h in ("cli", "srv"))
    t0 = flent_t0(data)

    def one_way(src: str, kind: int) -> list[float]:
        at_cli = {(p.sport, p.dport): p.ts for p in cli if p.proto == 1 and p.flags == kind and p.src == src}
        at_srv = {(p.sport, p.dport): p.ts for p in srv if p.proto == 1 and p.flags == kind and p.src == src}
        keys = [k for k in at_cli if k in at_srv and at_cli[k] < t0 + lead_in(data) - 0.5]
        return [abs(at_srv[k] - at_cli[k]) * 1e3 for k in keys]
    up, down = one_way(CLI, 8), one_way(SRV, 0)
    assert len(up) >= 5 and len(down) >= 5, (up, down)  # one a step (0.5 s) of the 5 s lead-in, from Flent's late start
    assert abs(statistics.median(up) - 40) <= 1 and statistics.median(down) <= 1, (statistics.median(up), statistics.median(down))
    base = statistics.median(v for _, v in series(data, "Ping (ms) ICMP", 0.5, lead_in(data) - 0.5))
    assert abs(base - 40) <= 1, base


def test_a_client_qdisc_marks_and_ce_bleach_unmarks_one_flow(run):
    """cake at 8 Mbit/s as the client's qdisc (below the 10 Mbit/s bottleneck): it shapes
    the upload (what reaches the server stays within 8 Mbit/s' payload capacity) and marks
    CE, which the client's capture (after its qdisc) shows for both ECN flows; the
    middlebox turns flow 1's CE into ECT(0) (ce-bleach: nft's counter is exactly flow 1's
    CE packets at the client), so at the server flow 1 has no CE and flow 2 all of its.
    Each flow has a few CE marks at the client at least (seen 13-14 on the less marked)."""
    rec, data, d = find(run, "vm-features", ecn="ce-bleach-none")
    assert rec["status"] == "ok", rec["reason"]
    cli, srv = (read_pcap(d / f"{h}.pcap.xz") for h in ("cli", "srv"))

    def ce(pkts, tos: int) -> int:
        return sum(1 for p in pkts if p.proto == 6 and p.src == CLI and p.dscp == tos >> 2 and p.ecn == CE)
    tos1, tos2 = (f["tos"] for f in rec["config"]["flows"])
    assert ce(cli, tos1) >= 3 and ce(cli, tos2) >= 3, (ce(cli, tos1), ce(cli, tos2))
    assert ce(srv, tos1) == 0 and ce(srv, tos2) == ce(cli, tos2), (ce(srv, tos1), ce(srv, tos2), ce(cli, tos2))
    rule = re.search(r'counter packets (\d+) bytes \d+ comment "flow 1: ce-bleach"', (d / "teardown.log").read_text())
    assert rule and int(rule.group(1)) == ce(cli, tos1), (rule, ce(cli, tos1))
    cli_log = (d / "teardown.log").read_text().split("======== cli ========")[1].split("======== ")[0]
    assert re.search(r"qdisc cake \S+ root .*bandwidth 8Mbit", cli_log), cli_log[:2000]
    t0, length = flent_t0(data), rec["config"]["length"]
    start = t0 + lead_in(data)
    got = mbit(srv, CLI, start + 1, start + length, "payload", proto=6)
    assert got <= 8 * PAYLOAD_SHARE * 1.02, got
