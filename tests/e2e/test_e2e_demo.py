"""The demo scenario, for real: Ansible-built namespaces, htb bottleneck, Flent, tcpdump.

Acceptance of the core: every cell has all its files; aggregate goodput in the Flent data
is 90-100 % of the declared rate; both captures decode and hold the test flows; the
teardown log shows the bottleneck qdisc with bytes sent; the flows ran the declared
congestion controls (from the ss samples taken during the run).
"""
from __future__ import annotations

import json
import re
import subprocess

import pytest
from flrun import DEMO, needs_root_tools, run_fl
from resultlib import loaded

from flharness.analysis.flent_data import load as load_flent

pytestmark = [pytest.mark.e2e, pytest.mark.alone, needs_root_tools()]  # the demo run: test_e2e_report compares its cells
FILES = ("cell.json", "setup.log", "teardown.log", "flent.log", "cli.pcap.xz", "srv.pcap.xz")
CONTROL_PORT = 12865


def server(cell_dir) -> str:
    """The server's address on the testbed that ran the cell (two testbeds: two subnets)."""
    return json.loads((cell_dir / "cell.json").read_text())["endpoints"]["server"]


@pytest.fixture(scope="module")
def demo(demo_run):
    out, results = demo_run.out, demo_run.results
    root = results / "e2e" / "demo"
    cells = sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith(".") and d.name != "charts")
    return out, cells


def test_all_cells_ran_with_all_files(demo):
    out, cells = demo
    assert len(cells) == 12 and "12 ok, 0 failed" in out
    for d in cells:
        rec = json.loads((d / "cell.json").read_text())
        assert rec["status"] == "ok", (d.name, rec["reason"])
        assert rec["coordinates"]["rate"]["label"] in ("10mbit", "50mbit")
        for f in FILES + (f"{d.name}.flent.gz",):
            assert (d / f).is_file() and (d / f).stat().st_size > 0, (d.name, f)


def test_goodput_is_90_to_100_percent_of_the_rate(demo):
    """netperf's own throughput fills the link. netperf counts the bytes its sender wrote to
    the socket, so it may exceed the rate by what the path still held (the sender's buffer,
    the FIFO): by 5 % at most here (the CI saw 10.03 Mbit/s of a 10 Mbit/s BBR cell). What
    fl reports, from the receiver, is held to the payload capacity: test_e2e_report. A cell
    below 90 % must say why: the machine's load (a run saw 46 % of 50 Mbit/s while the
    hypervisor took half a core, and fl flagged the steal)."""
    for d in demo[1]:
        data = load_flent(d / f"{d.name}.flent.gz")
        meta = data["metadata"]["SERIES_META"]
        goodput = sum(meta[f"TCP upload::{i}"]["MEAN_VALUE"] for i in (1, 2))  # Mbit/s, netperf's own
        rec = json.loads((d / "cell.json").read_text())
        rate = rec["coordinates"]["rate"]["value"]["up_bps"] / 1e6
        flags = rec["checks"]["calibration"]["reasons"]
        assert goodput / rate <= 1.05 and (goodput / rate >= 0.90 or loaded(flags)), (d.name, goodput, rate, flags)
        params = data["metadata"]["TEST_PARAMETERS"]
        assert params["fl_cell"] == d.name and params["fl_rate"] == f"{rate:g}mbit"


def test_captures_decode_and_hold_the_test_flows(demo):
    for d in demo[1]:
        srv = server(d)
        for host in ("cli", "srv"):
            raw = subprocess.run(["xz", "-dc", str(d / f"{host}.pcap.xz")], capture_output=True, check=True).stdout
            p = subprocess.run(["tcpdump", "-nr", "-", f"tcp and dst {srv} and not port "
                                f"{CONTROL_PORT} and greater 1000"], input=raw, capture_output=True, check=True)
            lines = p.stdout.decode().splitlines()
            ports = {re.search(r"IP \S+\.(\d+) >", ln).group(1) for ln in lines}
            assert len(lines) > 1000 and len(ports) == 2, (d.name, host, len(lines), ports)


def test_teardown_log_shows_the_bottleneck_qdisc_with_traffic(demo):
    for d in demo[1]:
        log = (d / "teardown.log").read_text()
        mid = log.split("======== mid ========")[1].split("======== srv ========")[0]
        kind = "pfifo" if "pfifo" in d.name else "bfifo"
        block = mid.split("$ tc -s -d qdisc show dev mid.r")[1].split("$ ")[0]
        m = re.search(rf"qdisc {kind} 10: parent 1:1 limit \S+\n Sent (\d+) bytes", block)
        assert m and int(m.group(1)) > 1_000_000, (d.name, block)
        assert "table inet fl" in mid and "counter packets" in mid


def test_flows_ran_the_declared_congestion_controls(demo):
    """From the `ss -tin` samples fl took on the client during each test."""
    for d in demo[1]:
        declared = json.loads((d / "cell.json").read_text())["coordinates"]["cc"]["value"]
        seen: dict[str, tuple[str, int]] = {}
        port, srv = None, server(d)
        for line in (d / "cli.ss.log").read_text().splitlines():
            if not line[:1].isspace():  # a socket line, in any TCP state
                m = re.match(rf"^\S+\s+\d+\s+\d+\s+\S+:(\d+)\s+{re.escape(srv)}:(\d+)", line)
                port = m.group(1) if m and int(m.group(2)) != CONTROL_PORT else None
            elif port and (m := re.search(r"\b(cubic|reno|bbr)\b.*bytes_acked:(\d+)", line)):
                seen[port] = (m.group(1), max(int(m.group(2)), seen.get(port, ("", 0))[1]))
        ran = sorted(cc for cc, acked in seen.values() if acked > 1_000_000)
        assert ran == sorted(declared), (d.name, ran, declared)


def test_resume_skips_completed_cells(demo, tmp_path):
    results = demo[1][0].parent.parent.parent
    p = run_fl("run", DEMO, "--run", "e2e", "--results", str(results))
    assert p.returncode == 0 and "12 already done" in p.stdout, p.stdout
    assert "nothing to run" in p.stdout, p.stdout  # decided before any testbed is built
    assert "scenario.yml is updated" not in p.stdout, p.stdout


def test_a_changed_claim_is_saved_for_plot_without_running_the_cells(demo, tmp_path):
    """Claims are not part of a cell's configuration: a scenario changed only in them finds
    every cell done, and its saved scenario.yml (what `fl plot` judges from) takes them."""
    results = demo[1][0].parent.parent.parent
    saved = results / "e2e" / "demo" / "scenario.yml"
    before = saved.read_text()
    changed = tmp_path / "demo.yml"
    changed.write_text(f"extends: {DEMO}\n"
                       + 'expect:\n  - {rate: 10mbit, metric: goodput_total_mbit, ">": 0}\n')
    p = run_fl("run", str(changed), "--run", "e2e", "--results", str(results))
    assert p.returncode == 0 and "nothing to run" in p.stdout and "scenario.yml is updated" in p.stdout, p.stdout
    assert "metric: goodput_total_mbit" in saved.read_text()
    p = run_fl("run", DEMO, "--run", "e2e", "--results", str(results))  # as the other tests read it
    assert p.returncode == 0 and "scenario.yml is updated" in p.stdout and saved.read_text() == before, p.stdout


def test_the_run_writes_a_debug_log_of_its_decisions_and_steps(demo):
    """debug.log in the run folder: each cell's plan, the testbed session's Ansible, each
    cell handed to the testbed and finished, with times (fl's logging at debug level)."""
    _, cells = demo
    text = (cells[0].parent.parent / "debug.log").read_text()
    for d in cells:
        assert re.search(rf" DEBUG +flharness\.run\.runner: plan demo/{re.escape(d.name)} \(config [0-9a-f]{{16}}\): run$", text, re.M), d.name
        assert f"cell demo/{d.name} to testbed" in text and f"cell {d.name}: ok; phases " in text
    assert "flharness.testbed.session: testbed session: " in text and "ansible-playbook" in text
