"""Path-emulation features for real, in the VM (distribution kernel, virtual time).

One `fl run --vm` of tests/scenarios/vm-features.yml (per-flow RTT, a rate step, a
clean and a slotted path, 5 % loss, ECN bleaching) and pantheon-short (the shipped
pantheon-1mbit scenario with 10 s runs). Every check reads what the run left behind:
socket statistics, Flent's time series, the pcaps (through tcpdump) and the logs.
Selected with `pytest -m vm` (about 20 minutes).
"""
from __future__ import annotations

import gzip
import json
import re
import statistics
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, needs_vm, run_fl

pytestmark = [pytest.mark.vm, needs_vm()]
SCENARIOS = [str(REPO / "tests" / "scenarios" / f"{n}.yml") for n in ("vm-features", "pantheon-short")]
LEAD_IN = 5.0  # Flent's -d: ping runs alone before the flows start
CLI, SRV = "10.71.1.1", "10.71.2.1"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    results = tmp_path_factory.mktemp("vm-features")
    p = run_fl("run", *SCENARIOS, "--vm", "--results", str(results), timeout=3600)
    assert p.returncode == 0, p.stdout + p.stderr
    return results / "default"


def cells(root: Path, scenario: str) -> dict[str, Path]:
    return {d.name: d for d in sorted((root / scenario).iterdir()) if d.is_dir() and not d.name.startswith(".")}


def find(root: Path, scenario: str, **coords: str) -> tuple[dict, dict, Path]:
    """The one cell whose coordinate labels are COORDS: (cell.json, Flent data, folder)."""
    hits = []
    for d in cells(root, scenario).values():
        rec = json.loads((d / "cell.json").read_text())
        if all(rec["coordinates"].get(axis, {}).get("label") == label for axis, label in coords.items()):
            hits.append((rec, json.load(gzip.open(d / f"{d.name}.flent.gz", "rt")), d))
    assert len(hits) == 1, (coords, [h[0]["cell"] for h in hits])
    return hits[0]


def series(data: dict, name: str, after: float = 0, before: float = 1e9) -> list[tuple[float, float]]:
    return [(t, v) for t, v in zip(data["x_values"], data["results"][name])
            if v is not None and after <= t < before]


def packets(pcap: Path, expr: str) -> int:
    """Packets in an xz-compressed pcap matching a tcpdump filter."""
    xz = subprocess.Popen(["xz", "-dc", str(pcap)], stdout=subprocess.PIPE)
    out = subprocess.run(["tcpdump", "-nr", "-", expr], stdin=xz.stdout, capture_output=True, text=True)
    xz.wait()
    assert out.returncode == 0, out.stderr
    return len(out.stdout.splitlines())


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
    rec, data, d = find(run, "vm-features", rate_schedule="2mbit@10s")
    before = statistics.mean(v for _, v in series(data, "TCP upload::1", 7, 9.5))
    after = statistics.mean(v for _, v in series(data, "TCP upload::1", 11.5, 14.5))
    assert before > 8 and after < 2.2, (before, after)
    step = next(t for t, v in series(data, "TCP upload::1", 8) if v < (before + after) / 2)
    assert abs(step - 10) <= 0.5, step
    assert "planned t=10.0" in (d / "teardown.log").read_text()


def test_slotting_changes_the_delay_distribution(run):
    """Idle ping (the lead-in) is flat on the clean path and spread by netem slots."""
    spread = {}
    for label in ("clean", "bursty"):
        _, data, _ = find(run, "vm-features", netem=label)
        idle = sorted(v for _, v in series(data, "Ping (ms) ICMP", 0.5, LEAD_IN - 0.5))
        spread[label] = idle[int(0.9 * (len(idle) - 1))] - idle[int(0.1 * (len(idle) - 1))]
    assert spread["clean"] < 0.5 and spread["bursty"] > 1.0, spread


def test_loss_in_the_pcaps(run):
    """netem loss 5 % toward the server: data segments seen at srv vs sent by cli."""
    _, _, d = find(run, "vm-features", netem="up_loss_5%_down_none")
    data = f"tcp and src host {CLI} and not port 12865 and greater 1000"
    sent, received = packets(d / "cli.pcap.xz", data), packets(d / "srv.pcap.xz", data)
    assert sent > 1000
    assert 0.04 <= 1 - received / sent <= 0.06, (sent, received)


def test_ecn_bleaching_per_flow(run):
    """Both flows are ECN-capable at the client; at the server flow 1 (DSCP 19) arrives
    Not-ECT, flow 2 (DSCP 35) ECT/CE; nft's rule counter shows the rewrites."""
    _, _, d = find(run, "vm-features", ecn="bleach-none")
    cli, srv = d / "cli.pcap.xz", d / "srv.pcap.xz"
    flow1, flow2 = "ip[1] & 0xfc == 0x4c and greater 1000", "ip[1] & 0xfc == 0x8c and greater 1000"
    assert packets(cli, f"{flow1} and ip[1] & 3 != 0") > 100  # sent ECN-capable
    assert packets(srv, flow1) > 100 and packets(srv, f"{flow1} and ip[1] & 3 != 0") == 0
    total2 = packets(srv, flow2)
    assert total2 > 100 and packets(srv, f"{flow2} and ip[1] & 3 != 0") == total2
    counter = re.search(r'ip ecn set not-ect counter packets (\d+) .*flow 1: bleach', (d / "teardown.log").read_text())
    assert counter and int(counter.group(1)) > 100


def test_pantheon_schemes_at_1mbit_200ms(run):
    for cc in ("cubic", "bbr", "reno"):
        rec, data, _ = find(run, "pantheon-short", cc=cc)
        base = statistics.median(v for _, v in series(data, "Ping (ms) ICMP", 0.5, LEAD_IN - 0.5))
        assert abs(base - 200) <= 2, (cc, base)
        goodput = data["metadata"]["SERIES_META"]["TCP upload::1"]["MEAN_VALUE"]
        assert goodput >= 0.8, (cc, goodput)
        assert rec["config"]["bottleneck"]["up"]["qdisc"] == "bfifo limit 625000"
