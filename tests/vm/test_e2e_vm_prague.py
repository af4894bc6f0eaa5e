"""fl's own TCP Prague (images/modules/tcp_prague.c) in the l4s image, checked against what
fl did not compute: both captures (codepoints, SYN/ACK flags, one-way delays, payload),
dualpi2's and fq_codel's own counters in the teardown log, the client's socket samples
(ss prints Prague's alpha and CE count through DCTCP's info struct), `nft list hooks`
and the guest kernel's log.

The cells (tests/scenarios/vm-prague.yml, 20 Mbit/s, 20 ms, 8 s) run in the session's
l4s_lab (tests/vm/conftest.py), beside vm-l4s.yml, whose cubic-vs-cubic cell is the
classic flows through the same dualpi2; a third VM of that fixture loads, runs and
unloads the module by hand. Selected with `pytest -m vm`.
"""
from __future__ import annotations

import itertools
import json
import re
import statistics
from pathlib import Path

import pytest
from flrun import needs_vm
from guest import KERNEL_TROUBLE
from resultlib import CE, CLI, ECT0, ECT1, NOT_ECT, PAYLOAD_SHARE, SYN, connections, find, read_pcap, ss_sockets

pytestmark = [pytest.mark.vm, needs_vm()]
RATE_BPS = 20e6
#: (AE, CWR, ECE) of a SYN/ACK that accepts AccECN, one per codepoint of the SYN (RFC 9768).
ACCECN_SYNACK = {(0, 1, 0), (0, 1, 1), (1, 0, 0), (1, 1, 0)}


@pytest.fixture(scope="module")
def lab(l4s_lab):
    assert l4s_lab["run"].returncode == 0, l4s_lab["run"].stdout + l4s_lab["run"].stderr
    return l4s_lab


def cell(lab, **coords: str) -> tuple[dict, dict, Path]:
    rec, data, d = find(lab["root"], "vm-prague", **coords)
    assert rec["status"] == "ok", rec["reason"]
    return rec, data, d


def negotiation(p) -> tuple[int, int, int]:
    """A SYN's or SYN/ACK's (AE, CWR, ECE)."""
    return p.header[12] & 1, int(bool(p.flags & 0x80)), int(bool(p.flags & 0x40))


def data_packets(cell_dir: Path, host: str, dscp: int | None = None) -> list:
    """The client's TCP data packets (payload) in HOST's capture, netperf's control aside."""
    return [p for p in read_pcap(cell_dir / f"{host}.pcap.xz")
            if p.proto == 6 and p.payload > 0 and p.src == CLI and 12865 not in (p.sport, p.dport)
            and (dscp is None or p.dscp == dscp)]


def teardown_qdisc(cell_dir: Path, kind: str, dev: str = "mid.r") -> dict[str, int]:
    """The bottleneck qdisc's counters on DEV (the upload port) after the test, as tc printed them."""
    text = (cell_dir / "teardown.log").read_text()
    block = text.split(f"$ tc -s -d qdisc show dev {dev};", 1)[1].split("\n$ ", 1)[0]
    stats = block[block.index(f"qdisc {kind}"):]
    found = {k: int(v) for k, v in re.findall(r"\b(pkts_in_c|pkts_in_l|ecn_mark|step_mark|maxq) (\d+)", stats)}
    found["dropped"] = int(re.search(r"\(dropped (\d+)", stats).group(1))
    return found


def ss_lines(cell_dir: Path, cc: str) -> list[str]:
    """The info lines of the client's data socket running CC, one per socket sample."""
    out = []
    for block in (cell_dir / "cli.ss.log").read_text().split("\nESTAB")[1:]:
        head, _, rest = block.partition("\n")
        if ":12865" not in head and re.search(rf"^\s*{cc}\b", rest, re.M):
            out.append(rest)
    return out


def owd_above_path(cell_dir: Path, dscp: int | None = None) -> list[float]:
    """Each data packet's one-way delay (ms) from the client's capture to the server's,
    matched by sequence number and IP id, minus the least of them (the path's)."""
    sent = {(p.seq, p.ipid): p.ts for p in data_packets(cell_dir, "cli", dscp)}
    owd = [(p.ts - sent[p.seq, p.ipid]) * 1e3 for p in data_packets(cell_dir, "srv", dscp) if (p.seq, p.ipid) in sent]
    assert len(owd) > 1000, len(owd)
    return [d - min(owd) for d in owd]


def test_cell_json_records_which_prague_ran(lab):
    """The module's file hash (the image's manifest says what it built) and parameters."""
    rec, _, _ = cell(lab, sysctls="accecn", test="tcp_1up")
    module = rec["cc_modules"]["prague"]
    built = next(m for m in lab["image"].manifest.modules if m.name == "tcp_prague")
    assert module["module"] == "tcp_prague" and module["sha256"] == built.sha256
    assert module["file"].endswith("/updates/fl/tcp_prague.ko") and module["version"] == "3"
    params = module["parameters"]
    assert params["implementation"].startswith("fl tcp_prague 3 (draft-briscoe-iccrg-prague-congestion-control-01)")
    assert (params["alpha_shift"], params["rtt_indep"], params["rtt_virt_us"], params["burst_us"]) == ("4", "0", "25000", "250")
    assert (params["pacing"], params["pacing_ca_pct"], params["ai_cwnd_limited"], params["ce_prr"]) == ("1", "100", "1", "0")


def test_prague_alone_in_dualpi2_is_l4s(lab):
    """ECT(1) on its data at the client (AccECN negotiated: the SYN/ACK echoes it), the L
    queue's packets in dualpi2's counters, CE marks at the server and answered (ss: alpha
    above 0, the CE count, a window that falls), the link used (payload at the server over
    the second half against rate × 1448/1514), and the L queue's delay (one-way, from
    the captures) in the low milliseconds."""
    _, _, d = cell(lab, sysctls="accecn", test="tcp_1up")
    cli, srv = data_packets(d, "cli"), data_packets(d, "srv")
    assert sum(p.ecn == ECT1 for p in cli) >= 0.99 * len(cli) > 5000, len(cli)
    conn = next(iter(connections(read_pcap(d / "srv.pcap.xz")).values()))
    synack = next(p for p in conn if p.flags & SYN and p.src != CLI)
    assert negotiation(synack) in ACCECN_SYNACK, negotiation(synack)
    marks = sum(p.ecn == CE for p in srv)
    assert marks > 50, marks
    dualpi2 = teardown_qdisc(d, "dualpi2")
    assert dualpi2["pkts_in_l"] >= 0.99 * len(cli) and dualpi2["ecn_mark"] >= marks, dualpi2
    samples = ss_lines(d, "prague")
    alphas = [int(m.group(1)) for s in samples if (m := re.search(r"dctcp:\(ce_state:\d,alpha:(\d+),ab_ecn:(\d+)", s))]
    cwnds = [int(m.group(1)) for s in samples if (m := re.search(r"\bcwnd:(\d+)", s))]
    assert len(alphas) >= 5 and all(a > 0 for a in alphas[2:]), alphas
    assert int(re.search(r"ab_ecn:(\d+)", samples[-1]).group(1)) > 0
    assert any(b < a for a, b in itertools.pairwise(cwnds)), cwnds  # CE answered: the window falls
    half = [p for p in srv if p.ts >= srv[0].ts + 5]
    goodput = sum(p.payload for p in half) * 8 / (half[-1].ts - half[0].ts)
    assert goodput >= 0.90 * RATE_BPS * PAYLOAD_SHARE, goodput
    queue = owd_above_path(d)
    assert statistics.quantiles(queue, n=100)[98] < 4.0, statistics.quantiles(queue, n=100)[98]


def test_classic_flows_in_the_same_dualpi2_sit_at_its_target(lab):
    """vm-l4s.yml's two Cubic flows (classic ECN, same rate, RTT and dualpi2): the C queue,
    its delay at PI2's 15 ms target, far above Prague's L queue."""
    _, _, d = find(lab["root"], "vm-l4s", cc="cubic-vs-cubic", qdisc="dualpi2")
    assert teardown_qdisc(d, "dualpi2")["pkts_in_l"] == 0
    classic = statistics.median(owd_above_path(d))
    _, _, prague = cell(lab, sysctls="accecn", test="tcp_1up")
    assert 5.0 < classic < 25.0 and statistics.quantiles(owd_above_path(prague), n=100)[98] < classic / 3, classic


def test_prague_falls_back_to_reno_without_accecn(lab):
    """The server answers RFC 3168 ECN only (tcp_ecn=1, its socket cubic): Prague sends
    Not-ECT (no ECT(1), no ECT(0)), ss says fallback_mode, dualpi2 classifies it classic
    and drops to slow it (Reno's answer: retransmissions), and the link is still used."""
    rec, _, d = cell(lab, sysctls="rfc3168_server")
    assert rec["checks"]["cc"]["ok"], rec["checks"]["cc"]
    conn = next(iter(connections(read_pcap(d / "srv.pcap.xz")).values()))
    syn, synack = (next(p for p in conn if p.flags & SYN and (p.src == CLI) == sent) for sent in (True, False))
    assert negotiation(syn) == (1, 1, 1) and negotiation(synack) == (0, 0, 1)  # AccECN asked, RFC 3168 answered
    cli = data_packets(d, "cli")
    assert len(cli) > 5000 and all(p.ecn == NOT_ECT for p in cli), {p.ecn for p in cli}
    samples = ss_lines(d, "prague")
    assert samples and all("dctcp:fallback_mode" in s for s in samples)
    dualpi2 = teardown_qdisc(d, "dualpi2")
    assert dualpi2["pkts_in_l"] <= 1 and dualpi2["dropped"] > 0 and dualpi2["ecn_mark"] == 0, dualpi2
    sent = [(p.seq, p.payload) for p in cli]
    assert len(sent) - len(set(sent)) > 0  # retransmissions: loss answered as Reno does
    srv = data_packets(d, "srv")
    half = [p for p in srv if p.ts >= srv[0].ts + 5]
    assert sum(p.payload for p in half) * 8 / (half[-1].ts - half[0].ts) >= 0.8 * RATE_BPS * PAYLOAD_SHARE


def test_prague_dominates_cubic_in_a_single_rfc3168_queue(lab):
    """The L4S Tests' key finding 1: through fq_codel with one queue (RFC 3168 marking),
    Prague (ECT(1)) answers CE by alpha, Cubic (ECT(0)) by halving, so Prague takes most of
    the link. Payload per flow at the server over the second half of the test."""
    _, _, d = cell(lab, qdisc="fq_codel(1q)")
    ccs = {port: "prague" if "prague" in words else "cubic" for port, words in ss_sockets(d / "cli.ss.log").items()}
    flows: dict[str, list] = {"prague": [], "cubic": []}
    for (_, port, _, _), pkts in connections(read_pcap(d / "srv.pcap.xz")).items():
        flows[ccs[port]] += [p for p in pkts if p.payload > 0 and p.src == CLI]
    t0 = min(p.ts for pkts in flows.values() for p in pkts) + 5
    share = {cc: sum(p.payload for p in pkts if p.ts >= t0) for cc, pkts in flows.items()}
    assert share["prague"] > 4 * share["cubic"] > 0, share
    sent = {cc: {p.ecn for p in pkts} for cc, pkts in flows.items()}
    assert sent["prague"] <= {ECT1, CE} and sent["cubic"] <= {ECT0, CE}, sent  # at the server: CE-marked or not
    assert teardown_qdisc(d, "fq_codel")["ecn_mark"] > 50


def test_a_cells_module_params_are_set_for_it_alone(lab):
    """vm-prague's fq_codel(1q) cell runs Prague with pacing_ca_pct=110 (module_params): on
    both endpoints, read back from sysfs after its test (its calibration's verdict), in
    cell.json's record of the module; every other cell of the run, in either VM, before
    or after it, read back the module's own 100."""
    rec, _, d = cell(lab, qdisc="fq_codel(1q)")
    assert rec["config"]["module_params"] == {"tcp_prague": {"pacing_ca_pct": "110"}}
    assert rec["cc_modules"]["prague"]["parameters"]["pacing_ca_pct"] == "110"
    effects = {e["feature"]: e for e in rec["checks"]["calibration"]["effects"]}
    for host in ("cli", "srv"):
        assert effects[f"module parameters {host}"]["ok"], effects
    read = re.findall(r"^/sys/module/tcp_prague/parameters/pacing_ca_pct:(\d+)$", (d / "teardown.log").read_text(), re.M)
    assert read == ["110", "110"], read
    others = [c for c in sorted(lab["root"].glob("*/*/teardown.log")) if c.parent != d]
    assert len(others) >= 10
    for log in others:
        read = re.findall(r"^/sys/module/tcp_prague/parameters/pacing_ca_pct:(\d+)$", log.read_text(), re.M)
        assert read == ["100", "100"], (log, read)


def test_the_module_loads_runs_and_unloads_cleanly(lab):
    """In a guest of its own: `nft list hooks` shows prague's LOCAL_OUT hooks (IPv4, IPv6)
    in the first namespace and in one made before, none after rmmod (prague gone from the
    available CCs too), all back after modprobe, also in a namespace made after; a
    namespace's nftables table and tc qdisc survive both; a Prague flow ran; the kernel
    said nothing of warnings."""
    cycle = lab["prague_cycle"]
    assert cycle["rc"] == 0, cycle["out"] + cycle["err"]
    part = dict(re.findall(r"^== (.+)\n((?:(?!== ).*\n)*)", cycle["out"], re.M))
    assert "prague" in part["available"].split() and "prague" not in part["available after"].split()
    for stage in ("hooks loaded", "hooks reloaded"):
        hooks = part[stage]
        assert hooks.count("prague_ecn_v4 [tcp_prague]") == 2 and hooks.count("prague_ecn_v6 [tcp_prague]") == 1, hooks
    assert "prague" not in part["hooks unloaded"] and "unloaded" in part["rmmod"] and "loaded" in part["modprobe"]
    assert "prague_ecn_v4 [tcp_prague]" in part["new namespace"]
    assert float(re.search(r"([\d.]+) Mbits/sec", part["flow"]).group(1)) > 1
    assert "table inet pmodt" in part["state"] and "qdisc fq_codel" in part["state"]
    assert not KERNEL_TROUBLE.search(part["dmesg"]), part["dmesg"]


def test_the_run_left_no_warning_in_the_guests_kernel_log(lab):
    """Every Prague cell ran in the run's two guests: their kernel logs, kept by fl."""
    logs = sorted(lab["root"].glob("vm-kernel-*.log"))
    assert len(logs) == 2
    for log in logs:
        text = log.read_text(errors="replace")
        assert "7.3" in text.splitlines()[0] and not KERNEL_TROUBLE.search(text), log


def test_cells_record_the_configuration_their_name_says(lab):
    for d in sorted((lab["root"] / "vm-prague").iterdir()):
        if (d / "cell.json").is_file():
            rec = json.loads((d / "cell.json").read_text())
            assert rec["status"] == "ok" and rec["backend"]["image"] == "l4s", (rec["cell"], rec["reason"])
            assert all(f["cc"] in ("prague", "cubic") for f in rec["config"]["flows"])
