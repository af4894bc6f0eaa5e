"""Path-emulation features for real, in the VM (distribution kernel, virtual time).

The session's VM run (conftest.vm_run) includes tests/scenarios/vm-features.yml
(per-flow RTT, a rate step, a slotted path, 5 % loss, ECN bleaching) and pantheon-short
(the shipped pantheon-1mbit scenario with 10 s runs). Every check reads what the run left behind:
socket statistics, Flent's time series, the pcaps (through tcpdump) and the logs.
Selected with `pytest -m vm`.
"""
from __future__ import annotations

import json
import re
import statistics

import pytest
from conftest import needs_vm, run_fl
from resultlib import LEAD_IN, cells, ecn_split, find, packets, series, step_time

from flharness.analysis import queue

pytestmark = [pytest.mark.vm, needs_vm()]
CLI, SRV = "10.71.1.1", "10.71.2.1"


@pytest.fixture(scope="module")
def run(vm_run):
    """The session's VM run (conftest.vm_run; test_e2e_vm checks that it completed)."""
    return vm_run["root"]


def test_every_cell_ran_in_the_vm(run):
    for scenario in ("vm-features", "pantheon-short"):
        for d in cells(run, scenario).values():
            rec = json.loads((d / "cell.json").read_text())
            assert rec["status"] == "ok", (rec["cell"], rec["reason"])
            assert rec["backend"]["kind"] == "vm" and rec["backend"]["clock"] == "virtual"


def test_per_flow_rtt_from_socket_stats(run):
    """Flow 1 (cubic) has an 80 ms path, flow 2 (reno) 20 ms: each socket's minimum RTT."""
    _, _, d = find(run, "vm-features", rtt="80ms-20ms")
    minrtt: dict[str, float] = {}
    for block in (d / "cli.ss.log").read_text().split("\n\t"):
        m = re.match(r"\s*(\w+) .*minrtt:([\d.]+)", block, re.S)
        if m and ":12865" not in block.split("\n")[0] and m.group(1) in ("cubic", "reno"):
            minrtt[m.group(1)] = min(minrtt.get(m.group(1), 1e9), float(m.group(2)))
    assert abs(minrtt["cubic"] - 80) <= 2 and abs(minrtt["reno"] - 20) <= 2, minrtt


def test_rate_step_shows_at_its_time(run):
    """10 → 2 Mbit/s declared at t = 10 s of the test: the goodput falls at 10 ± 0.5 s."""
    _, data, d = find(run, "vm-features", rate_schedule="2mbit@10s")
    before, after, step = step_time(data, "TCP upload", (7, 9.5), (11.5, 14.5))
    assert before > 8 and after < 2.2, (before, after)
    assert abs(step - 10) <= 0.5, step
    assert "planned t=10.0" in (d / "teardown.log").read_text()


def test_slotting_changes_the_delay_distribution(run):
    """Idle ping (the lead-in, before any flow) is flat on a clean 20 ms path (vm-aqm's
    fq_codel cell) and spread by the netem slots of the bursty one."""
    spread = {}
    for label, (scenario, coords) in {"clean": ("vm-aqm", {"qdisc": "fq_codel", "rtt": "20ms", "cc": "cubic-vs-cubic"}),
                                      "bursty": ("vm-features", {"netem": "bursty"})}.items():
        _, data, _ = find(run, scenario, **coords)
        idle = sorted(v for _, v in series(data, "Ping (ms) ICMP", 0.5, LEAD_IN - 0.5))
        spread[label] = idle[int(0.9 * (len(idle) - 1))] - idle[int(0.1 * (len(idle) - 1))]
    assert spread["clean"] < 0.5 and spread["bursty"] > 1.0, spread


def test_loss_in_the_pcaps(run):
    """netem loss 5 % toward the server: data segments seen at srv vs sent by cli."""
    _, _, d = find(run, "vm-features", netem="up_loss_5%_down_none")
    # four flows, so thousands of packets: the estimate's standard error is ~0.2 %
    data = f"tcp and src host {CLI} and not port 12865 and greater 1000"
    sent, received = packets(d / "cli.pcap.xz", data), packets(d / "srv.pcap.xz", data)
    assert sent > 1000
    assert 0.04 <= 1 - received / sent <= 0.06, (sent, received)


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
    """Each scheme moves data over the 200 ms path; a loss-based one fills the 625 kB
    drop-tail buffer (5 s at 1 Mbit/s), so its ping under load grows by seconds. fl's
    goodput for CUBIC and BBR is what the receiver got (0.90-0.96 Mbit/s: the payload
    capacity is 0.956), never netperf's sender-side count; BBR's queue is steady, so its
    p95 TCP RTT exceeds its p95 one-way delay by the return path's 100 ms. (A loss-based
    flow's queue still grows over a 10 s test: its RTT samples lag an RTT of seconds.)"""
    for cc in ("cubic", "bbr", "reno"):
        rec, data, d = find(run, "pantheon-short", cc=cc)
        flow = json.loads((d / "metrics.json").read_text())["flows"][0]
        if cc != "reno":
            assert 0.90 <= flow["mean_mbit"] <= 0.96 and flow["goodput_source"].startswith("receiver"), (cc, flow)
        if cc == "bbr":
            assert abs(flow["tcp_rtt_ms"]["p95"] - flow["owd_ms"]["p95"] - 100) <= 20, flow
        base = statistics.median(v for _, v in series(data, "Ping (ms) ICMP", 0.5, LEAD_IN - 0.5))
        assert abs(base - 200) <= 2, (cc, base)
        assert rec["config"]["bottleneck"]["up"]["qdisc"] == "bfifo limit 625000"
        if cc == "reno":
            assert max(v for _, v in series(data, "Ping (ms) ICMP", LEAD_IN)) > 1200


def test_the_pantheon_table_renders_with_one_run(run):
    """`fl plot` on the VM run: the per-scheme table of pantheon-short, one run each."""
    p = run_fl("plot", "--run", run.name, "--results", str(run.parent), timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    readme = (run / "README.md").read_text()
    section = readme.split("## pantheon-short")[1].split("\n## ")[0]
    assert "| cc | throughput (Mbit/s) | p95 one-way delay (ms) | loss (%) |" in section, section
    for cc in ("cubic", "bbr", "reno"):
        assert re.search(rf"^\| {cc}( ⚑)? \| 0\.\d\d \| \d+\.\d \| \d+\.\d\d \|", section, re.M), (cc, section)


def test_the_sampled_queue_against_the_captures_and_the_physics(run):
    """The middlebox's queue samples (one a second in a VM). fq_codel's ECN marks, from
    its first sample to its last, are the CE packets that reached the server (its
    capture); the rate-step cell's 30-packet FIFO never holds more than 30 packets, and
    its backlog is read as delay at the rate in force: at 2 Mbit/s after the step, the
    p95 exceeds what 30 packets could wait at 10 Mbit/s (36 ms), and no sample exceeds
    what they wait at 2 Mbit/s (182 ms)."""
    _, _, d = find(run, "vm-features", ecn="bleach-none")
    q = queue.load(d / queue.QUEUE_LOG)["up"]
    ce = packets(d / "srv.pcap.xz", f"dst host {SRV} and ip[1] & 3 == 3")
    assert q.kind == "fq_codel" and ce > 10 and abs(q.marks[-1] - q.marks[0] - ce) <= max(2, 0.01 * ce), (q.marks, ce)
    _, _, d = find(run, "vm-features", rate_schedule="2mbit@10s")
    m = json.loads((d / "metrics.json").read_text())["queue"]["up"]
    full = 30 * 1514 * 8 * 1e3
    assert m["samples"] >= 8 and m["backlog_pkts"]["max"] <= 30, m
    assert full / 10e6 * 1.2 < m["delay_ms"]["p95"] and m["delay_ms"]["max"] <= full / 2e6 * 1.01, m
