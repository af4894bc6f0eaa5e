"""The calibration verdict flags what a reader must know, for real: a cell whose server
capture lost packets (the test stops that tcpdump for 6 s of a 50 Mbit/s flow, so its
ring buffer overflows; tcpdump's own count is the oracle) and a cell run while every
core was kept busy by the test's own busy loops. An undisturbed run of the same cell
is not flagged, and its base RTT is the declared 20 ms."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FL, REPO, needs_root_tools
from test_e2e_interrupt import interruptible, wait_for_line

pytestmark = [pytest.mark.e2e, needs_root_tools()]
SCENARIO = str(REPO / "tests" / "scenarios" / "calibration.yml")
CELL = "calibration/cubic-pfifo_200-50mbit-20ms"


def start(results: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(FL), "run", SCENARIO, "--results", str(results)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=interruptible)


def finish(proc: subprocess.Popen, results: Path) -> dict:
    out = proc.communicate(timeout=300)[0]
    assert proc.returncode == 0, out
    rec = json.loads((results / "default" / CELL / "cell.json").read_text())
    metrics = json.loads((results / "default" / CELL / "metrics.json").read_text())
    return {"out": out, "calibration": rec["checks"]["calibration"], "flags": metrics["flags"]}


def own_tcpdump(results: Path, host: str) -> int:
    """The PID of the tcpdump writing HOST's capture into this test's results folder."""
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cmd[0].endswith(b"tcpdump") and any(str(results).encode() in a and a.endswith(f"{host}.pcap".encode()) for a in cmd):
                return int(d.name)
    raise AssertionError(f"no tcpdump of {host} under {results}")


def test_an_undisturbed_cell_is_calibrated(tmp_path):
    v = finish(start(tmp_path), tmp_path)
    assert v["calibration"]["ok"], v["calibration"]
    assert abs(v["calibration"]["base_rtt_ms"] - 20) <= 1.4 and not v["flags"], v


def test_a_capture_that_lost_packets_is_flagged(tmp_path):
    proc = start(tmp_path)
    wait_for_line(proc, f"{CELL} …", timeout=300)
    time.sleep(8)  # Flent's lead-in is over: the flow runs
    pid = own_tcpdump(tmp_path, "srv")
    os.kill(pid, signal.SIGSTOP)
    time.sleep(6)
    os.kill(pid, signal.SIGCONT)
    v = finish(proc, tmp_path)
    drops = v["calibration"]["capture_drops"]["srv"]
    assert drops > 1000 and v["calibration"]["capture_drops"]["cli"] == 0, v["calibration"]
    assert f"calibration: srv's capture dropped {drops} packets" in v["flags"], v["flags"]
    assert "⚑ srv's capture dropped" in v["out"]


def test_a_cell_run_on_pegged_cores_is_flagged(tmp_path):
    spin = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass\n"
    loops = [subprocess.Popen([sys.executable, "-c", spin, str(core)]) for core in sorted(os.sched_getaffinity(0))]
    try:
        v = finish(start(tmp_path), tmp_path)
    finally:
        for p in loops:
            p.kill()
            p.wait()
    busy = [r for r in v["calibration"]["reasons"] if r.startswith("CPU ")]
    assert busy and any(f.startswith("calibration: CPU ") for f in v["flags"]), v["calibration"]
