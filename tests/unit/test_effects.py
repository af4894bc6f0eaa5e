"""The check that every declared path feature took effect (flharness/run/effects/), on
the golden cell (tests/fixtures/golden/: two ECN-requesting flows through a 20-packet
FIFO, the middlebox turning flow 1's ECT(0) into ECT(1); recorded on the namespace
testbed) as it is, and with the evidence of a silent no-op put in: a rule whose counter
stayed at 0, packets that arrived as they left, a SYN that kept its ECN flags; with
captures and logs made here for netem loss and the rate schedule."""
from __future__ import annotations

import lzma
import re
import shutil
from pathlib import Path

import dpkt
import numpy as np
import pytest
import yaml

from flharness.analysis.capture import Packets
from flharness.analysis.cell_files import CellFiles
from flharness.cells import expand
from flharness.run.effects import effects, netem_loss
from flharness.scenario import load_scenario

GOLDEN = Path(__file__).parents[1] / "fixtures" / "golden"
SCENARIO = Path(__file__).parents[1] / "fixtures" / "golden.yml"
SERVER = "10.71.2.1"


def files_of(cell, cell_dir, server, flent=None) -> CellFiles:
    return CellFiles(cell.name, cell.config, cell_dir, server, flent=flent)


def golden_cell(tmp_path: Path, **changes: str):
    """The golden fixture's cell as fl builds it from its scenario, with CHANGES (scenario
    keys) applied: the captures and logs are the recorded ones."""
    data = yaml.safe_load(SCENARIO.read_text()) | {k: yaml.safe_load(v) for k, v in changes.items()}
    path = tmp_path / "golden.yml"
    path.write_text(yaml.safe_dump(data))
    (cell,) = expand(load_scenario(path), path)
    return cell


@pytest.fixture
def cell_dir(tmp_path: Path) -> Path:
    d = tmp_path / "cell"
    shutil.copytree(GOLDEN, d)
    return d


def by_feature(found) -> dict:
    return {e.feature: e for e in found}


def test_the_golden_cells_rewrite_is_seen_in_the_captures_and_its_counter(tmp_path, cell_dir):
    found = by_feature(effects(files_of(golden_cell(tmp_path), cell_dir, SERVER)))
    assert found["flow 1: ect1"].ok, found["flow 1: ect1"]
    assert found["flow 1: ect1 (rule)"].ok and "matched 680 packet(s)" in found["flow 1: ect1 (rule)"].evidence
    assert found["sysctls cli"].ok and "net.ipv4.tcp_ecn = 1" in found["sysctls cli"].evidence
    assert all(e.ok for e in found.values())


def test_a_rule_that_matched_nothing_is_flagged(tmp_path, cell_dir):
    log = cell_dir / "teardown.log"
    log.write_text(log.read_text().replace('counter packets 680 bytes 1020000 comment "flow 1: ect1"',
                                           'counter packets 0 bytes 0 comment "flow 1: ect1"'))
    rule = by_feature(effects(files_of(golden_cell(tmp_path), cell_dir, SERVER)))["flow 1: ect1 (rule)"]
    assert not rule.ok and "matched no packet" in rule.evidence and "the client sent 680" in rule.evidence


def rewrite_pcap(path: Path, change) -> None:
    """Apply CHANGE(ip) to every IPv4 TCP packet of an xz-compressed capture."""
    with lzma.open(path) as f:
        reader = dpkt.pcap.Reader(f)
        packets = [(ts, dpkt.ethernet.Ethernet(buf)) for ts, buf in reader]
    with lzma.open(path, "wb") as f:
        writer = dpkt.pcap.Writer(f)
        for ts, eth in packets:
            if isinstance(eth.data, dpkt.ip.IP) and isinstance(eth.data.data, dpkt.tcp.TCP):
                change(eth.data)
            writer.writepkt(bytes(eth), ts)


def test_packets_that_arrived_as_they_left_are_flagged(tmp_path, cell_dir):
    """The server's capture as it would be had the middlebox not rewritten flow 1."""
    def undo(ip):
        if ip.tos >> 2 == 19 and ip.tos & 3 == 1:
            ip.tos = (ip.tos & 0xFC) | 2
    rewrite_pcap(cell_dir / "srv.pcap.xz", undo)
    flow = by_feature(effects(files_of(golden_cell(tmp_path), cell_dir, SERVER)))["flow 1: ect1"]
    assert not flow.ok and "ECT(1) expected, ECT(0) arrived" in flow.evidence, flow


def test_a_syn_that_kept_its_ecn_flags_is_flagged(tmp_path, cell_dir):
    """Flow 2 declared strip-negotiation, but nothing rewrote it (the bug seen on Linux 7.3):
    its SYN reached the server with ECE and CWR, the server negotiated ECN, no counter."""
    found = by_feature(effects(files_of(golden_cell(tmp_path, ecn="[ect1, strip-negotiation]"), cell_dir, SERVER)))
    flow, rule, outcome = (found[f"flow 2: {what}"] for what in ("strip-negotiation", "strip-negotiation (rule)",
                                                                 "no ECN negotiated"))
    assert not flow.ok and "1 in a SYN's AE/CWR/ECE" in flow.evidence, flow
    assert not rule.ok and "not in the teardown log" in rule.evidence
    assert not outcome.ok and "1 with AE/CWR/ECE" in outcome.evidence, outcome


def test_the_verdict_names_each_failed_effect(tmp_path, cell_dir):
    """calibration() turns every failed effect into a reason of the cell's verdict."""
    from flharness.analysis.flent_data import load
    from flharness.run.calibration import calibration
    cell = golden_cell(tmp_path, ecn="[ect1, strip-negotiation]")
    data = load(cell_dir / f"{cell.name}.flent.gz")
    verdict = calibration(files_of(cell, cell_dir, SERVER, flent=data))
    assert not verdict.ok
    assert any(r.code == "effect_missing" and r.text.startswith("flow 2: strip-negotiation:")
               for r in verdict.reasons), verdict.reasons


def packets(n: int, ipid_from: int = 0, src: int = 1, dst: int = 2) -> Packets:
    """N distinct TCP packets from SRC to DST."""
    z = np.zeros(n, np.int64)
    return Packets(ts=np.arange(n, dtype=float), src=np.full(n, src, np.uint32), dst=np.full(n, dst, np.uint32),
                   sport=np.full(n, 40000, np.uint32), dport=np.full(n, 5001, np.uint32), seq=np.arange(n) * 1448,
                   ack=z, flags=np.full(n, 0x10, np.uint8), ae=np.zeros(n, np.uint8), payload=np.full(n, 1448),
                   tos=np.zeros(n, np.uint8), ipid=np.arange(ipid_from, ipid_from + n) % 65536)


@pytest.mark.parametrize(("declared", "lost", "ok"), [
    ("loss 5%", 100, True), ("loss random 5%", 60, True), ("loss 1%", 100, False),
    ("loss 5%", 0, False), ("loss 5% 25%", 0, True)])
def test_netem_loss_against_the_binomial_bounds(tmp_path, declared, lost, ok):
    """2000 packets sent toward the server, LOST of them missing from its capture."""
    cell = golden_cell(tmp_path, netem=f"{{up: {declared}}}")
    files = files_of(cell, tmp_path, "0.0.0.2")
    sent = packets(2000)
    keep = np.setdiff1d(np.arange(2000), np.linspace(0, 1999, lost).astype(int)) if lost else np.arange(2000)
    files._captures = {"cli": sent, "srv": sent.take(keep)}
    (effect,) = netem_loss.check(files)
    assert effect.ok is ok, effect
    assert effect.feature == "netem loss up"
    if "25%" in declared:
        assert "not judged (correlated loss" in effect.evidence


def teardown(tmp_path: Path, mid: str) -> Path:
    (tmp_path / "teardown.log").write_text(f"======== cli ========\n$ uname -r\n6.1\n\n======== mid ========\n{mid}\n"
                                           "======== srv ========\n$ uname -r\n6.1\n")
    (tmp_path / "mid.qdisc.log").write_text("# devices up=mid.r down=mid.l\n")
    return tmp_path


SCHEDULE = "[{at: 10s, rate: 2mbit}, {at: 12s, rate: 3mbit}]"
CLASS = ("$ tc -s -d qdisc show dev mid.r; tc -s -d class show dev mid.r\n"
         "class htb 1:1 root leaf 10: prio 0 quantum 1000 rate {rate} ceil {rate} burst 1600b\n\n")


@pytest.mark.parametrize(("log", "rate", "ok", "said"), [
    ("t=10.004: up 2mbit pfifo, down 2mbit pfifo (planned t=10.0)\nt=12.003: up 3mbit pfifo, down 3mbit pfifo (planned t=12.0)",
     "3Mbit", True, "2 of 2 steps logged"),
    ("t=10.004: up 2mbit pfifo, down 2mbit pfifo (planned t=10.0)", "2Mbit", False, "1 of 2 steps missing"),
    ('{"t_s": 10.004, "planned": {"step": 1, "at_s": 10.0, "up": "2mbit pfifo", "down": "2mbit pfifo"}}\n'
     '{"t_s": 12.9, "planned": {"step": 2, "at_s": 12.0, "up": "3mbit pfifo", "down": "3mbit pfifo"}}',
     "3Mbit", False, "late: t=12.9 planned 12.0"),  # fl-schedule's records (before 2026-12-02: text, as above)
    ("t=10.004: up 2mbit pfifo, down 2mbit pfifo (planned t=10.0)\nt=12.9: up 3mbit pfifo, down 3mbit pfifo (planned t=12.0)",
     "3Mbit", False, "late: t=12.9 planned 12.0"),
    ("t=10.004: up 2mbit pfifo, down 2mbit pfifo (planned t=10.0)\nt=12.003: up 3mbit pfifo, down 3mbit pfifo (planned t=12.0)",
     "2Mbit", False, "ended at 2 Mbit/s, not the last step's 3mbit"),
])
def test_the_rate_schedule_is_seen_in_its_log_and_the_final_class(tmp_path, log, rate, ok, said):
    cell = golden_cell(tmp_path, rate_schedule=SCHEDULE)
    d = teardown(tmp_path, f"$ cat schedule.log   # the rate schedule as applied\nt=0 at 1.5: the first reply\n{log}\n\n"
                           + CLASS.format(rate=rate))
    (effect,) = [e for e in effects(files_of(cell, d, SERVER)) if e.feature == "rate schedule"]
    assert effect.ok is ok and said in effect.evidence, effect


BOTH_STEPS = ("t=10.004: up 2mbit pfifo, down 2mbit pfifo (planned t=10.0)\n"
              "t=12.003: up 3mbit pfifo, down 3mbit pfifo (planned t=12.0)")
HTB_WARNING = "Warning: sch_htb: quantum of class 10001 is big. Consider r2q change."


@pytest.mark.parametrize(("printed", "ok"), [
    (HTB_WARNING, True),  # a step to 25 Mbit/s and more: tc warns, and changed the rate
    (f"{HTB_WARNING}\nError: sch_dualpi2: Dualpi2 options are required.\nCommand failed /run/fl/x/mid/cmd/schedule-1.tc:2",
     False),
])
def test_a_schedules_tc_warning_is_no_error(tmp_path, printed, ok):
    cell = golden_cell(tmp_path, rate_schedule=SCHEDULE)
    d = teardown(tmp_path, f"$ cat schedule.log   # the rate schedule as applied\nt=0 at 1.5: the first reply\n{BOTH_STEPS}\n\n"
                           f"$ cat schedule.out   # what the schedule printed\n{printed}\n\n" + CLASS.format(rate="3Mbit"))
    (effect,) = [e for e in effects(files_of(cell, d, SERVER)) if e.feature == "rate schedule"]
    assert effect.ok is ok, effect
    assert ("Command failed" in effect.evidence) is not ok and "quantum" not in effect.evidence, effect


def test_a_sysctl_read_back_otherwise_is_flagged(tmp_path):
    cell = golden_cell(tmp_path)
    d = teardown(tmp_path, "")
    log = d / "teardown.log"
    log.write_text(log.read_text().replace("======== srv ========\n", "======== srv ========\n$ sysctl -e net.ipv4.tcp_ecn\n"
                                           "net.ipv4.tcp_ecn = 2\n\n"))
    found = by_feature(e for e in effects(files_of(cell, d, SERVER)) if e.feature.startswith("sysctls"))
    assert not found["sysctls srv"].ok and "net.ipv4.tcp_ecn = 2 (declared 1)" in found["sysctls srv"].evidence
    assert not found["sysctls cli"].ok and "missing" in found["sysctls cli"].evidence


def test_a_prague_flow_sends_the_codepoint_its_negotiation_calls_for(tmp_path, cell_dir):
    """The golden cell's cubic flow taken for prague (its socket samples say so): its
    server answered RFC 3168 ECN, not AccECN, so Prague must send Not-ECT; the recorded
    ECT(0) is flagged, and the same data Not-ECT passes."""
    log = cell_dir / "cli.ss.log"
    log.write_text(log.read_text().replace(" cubic ", " prague "))
    cell = golden_cell(tmp_path, cc="[prague, reno]")
    effect = by_feature(effects(files_of(cell, cell_dir, SERVER)))["prague: AccECN and ECT(1)"]
    assert not effect.ok and "no AccECN (SYN/ACK AE, CWR, ECE [(0, 0, 1)])" in effect.evidence, effect
    sent, total = map(int, re.search(r"; (\d+) of (\d+) data packets Not-ECT", effect.evidence).groups())
    assert sent < 0.05 * total, effect  # RFC 3168's retransmissions only

    def bleach(ip):
        ip.tos &= 0xFC
        ip.sum = 0  # dpkt computes it again
    rewrite_pcap(cell_dir / "cli.pcap.xz", bleach)
    effect = by_feature(effects(files_of(cell, cell_dir, SERVER)))["prague: AccECN and ECT(1)"]
    assert effect.ok and re.search(r"; (\d+) of \1 data packets Not-ECT", effect.evidence), effect
