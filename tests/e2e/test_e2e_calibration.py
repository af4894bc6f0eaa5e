"""The calibration verdict and one-way delay, for real (tests/scenarios/calibration.yml).

Undisturbed, neither cell is flagged, the base RTT is the declared one (no added
delay: this machine's kernel has no netem) and offloads read back off (no captured
frame exceeds the MTU); one-way delay against the physics: the idle
path's median is the declared 0 ms (±1 ms), the bulk flow's p95 is that plus a full
200-packet FIFO's drain time at 50 Mbit/s (48.4 ms); the middlebox's queue samples
against the same physics (at the rate the link delivered), the captures and tc's
counters. Then the verdict flags what a reader must know: a cell whose server capture lost packets
(the test stops that tcpdump for 6 s of a 50 Mbit/s flow, so its ring buffer
overflows; tcpdump's own count is the oracle) and a cell run while every core was kept
busy by niced busy loops that still took the cores (sessions of their own), but not one
run beside loops that give way (a cgroup with cpu.idle)."""
from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from flrun import REPO, FlProcess, needs_root_tools
from machine import Steal
from resultlib import beyond_steal, codes, packets
from test_e2e_interrupt import flows_running, partial_capture

from flharness.frames import PAYLOAD_SHARE
from flharness.run.calibration import cpu_intervals, saturated_share

pytestmark = [pytest.mark.e2e, pytest.mark.alone, needs_root_tools()]  # its busy loops take every core
SCENARIO = str(REPO / "tests" / "scenarios" / "calibration.yml")
BULK, IDLE = "cubic-pfifo_200-50mbit-0ms-bulk", "cubic-pfifo_200-50mbit-0ms-paced5mbit"
CELL = f"calibration/{BULK}"
FIFO_DRAIN_MS = 200 * 1514 * 8 / 50e6 * 1e3  # 48.4 ms


def start(results: Path, *only: str) -> FlProcess:
    return FlProcess("run", SCENARIO, "--results", str(results), *(a for cell in only for a in ("--only", cell)))


def finish(fl: FlProcess) -> str:
    rc = fl.finish(timeout=300)
    assert rc == 0 and " 0 skipped" in fl.output, fl.output
    return fl.output


def verdict(results: Path, cell: str = BULK) -> dict:
    d = results / "default" / "calibration" / cell
    rec = json.loads((d / "cell.json").read_text())
    metrics = json.loads((d / "metrics.json").read_text())
    return {"calibration": rec["checks"]["calibration"], "flags": metrics["flags"],
            "owd": metrics["flows"][0]["owd_ms"], "steady_mbit": metrics["flows"][0]["steady_mbit"], "queue": metrics["queue"]["up"], "dir": d}


def fifo_drops(cell: Path) -> int:
    """tc's own count of the packets the upload FIFO dropped, read after the test (the
    port towards srv: the first named in the queue samples' header)."""
    port = (cell / "mid.qdisc.log").read_text().split("\n", 1)[0].split()[2].removeprefix("up=")
    section = (cell / "teardown.log").read_text().split(f"$ tc -s -d qdisc show dev {port};", 1)[1]
    m = re.search(r"qdisc pfifo 10: .*\n Sent \d+ bytes \d+ pkt \(dropped (\d+),", section)
    assert m, section
    return int(m.group(1))


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


@pytest.fixture(scope="module")
def steal() -> Steal:
    """The machine's CPU steal while the undisturbed run ran (stopped by that fixture)."""
    return Steal()


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory, steal) -> Path:
    """Both cells, run once for the tests that read an undisturbed run."""
    results = tmp_path_factory.mktemp("calibration")
    finish(start(results))
    steal.stop()
    return results


def test_undisturbed_cells_are_calibrated_and_their_one_way_delay_is_physical(undisturbed, steal):
    bulk, idle = verdict(undisturbed, BULK), verdict(undisturbed, IDLE)
    for v in (bulk, idle):
        assert not beyond_steal(v["calibration"]["reasons"]) and not beyond_steal(v["flags"]), v
        assert v["calibration"]["base_rtt_ms"] <= 1 and v["calibration"]["offloads_on"] == [], v["calibration"]
        for host in ("cli", "srv"):  # offloads off: no frame in a capture exceeds the MTU
            assert packets(v["dir"] / f"{host}.pcap.xz", "greater 1515") == 0, host
    with steal.judged(bulk["flags"] + idle["flags"], "one-way delay against the FIFO's physics"):
        assert idle["owd"]["median"] <= 1, idle["owd"]
        theory = idle["owd"]["median"] + FIFO_DRAIN_MS
        assert abs(bulk["owd"]["p95"] - theory) <= 0.1 * theory, (bulk["owd"], theory)


def test_the_sampled_queue_matches_the_fifo_and_the_captures(undisturbed, steal):
    """The middlebox's queue samples against the FIFO's physics, the pcaps and tc's own
    counters: the bulk flow's backlog never exceeds the 200-packet limit, its drain time's
    p95 is the full FIFO's (48.4 ms, ±10 %), and its p95 at the rate the link delivered is
    the captures' p95 one-way delay above the idle path's (±10 %); the paced flow leaves the queue empty (p95 ≤ 2 packets); the
    drops sampled while the flow ran are at most what tc counted after the test."""
    bulk, idle = verdict(undisturbed, BULK), verdict(undisturbed, IDLE)
    q = bulk["queue"]  # a FIFO never holds more than its limit, steal or not
    assert q["kind"] == "pfifo" and q["samples"] >= 40 and q["backlog_pkts"]["max"] <= 200, q
    with steal.judged(bulk["flags"] + idle["flags"], "the queue's samples against the FIFO's physics"):
        assert abs(q["delay_ms"]["p95"] - FIFO_DRAIN_MS) <= 0.1 * FIFO_DRAIN_MS, q
        # What a packet waited is the backlog at the rate the link delivered (the receiver's
        # capture): on a busy host the shaper runs short of 50 Mbit/s and the wait is longer
        # than the nominal drain time (CI once: sampled 43.6 ms at 50 Mbit/s, captured 49.4 ms).
        delivered = bulk["steady_mbit"] / PAYLOAD_SHARE * 1e6
        waited = q["backlog_bytes"]["p95"] * 8 / delivered * 1e3
        queueing = bulk["owd"]["p95"] - idle["owd"]["median"]
        assert abs(waited - queueing) <= 0.1 * queueing, (q, bulk["owd"], bulk["steady_mbit"])
        assert 0 < q["drops"] <= fifo_drops(bulk["dir"]), q
        assert idle["queue"]["backlog_pkts"]["p95"] <= 2, idle["queue"]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def test_a_capture_that_lost_packets_is_flagged(tmp_path):
    """The server's tcpdump is stopped while the client's capture grows by 2 MB (some 14000
    packets, about 2.6 s of the 10 s flow; tcpdump's ring buffer holds some 5000), then
    let go."""
    fl = start(tmp_path, BULK)
    fl.wait_for_line(f"{CELL} …", timeout=300)
    fl.wait_until(lambda: flows_running(tmp_path, "calibration", BULK), "the flow runs")
    pid = own_tcpdump(tmp_path, "srv")
    cli = partial_capture(tmp_path, "calibration", BULK).with_name("cli.pcap")
    grown = _size(cli) + 2_000_000
    os.kill(pid, signal.SIGSTOP)
    try:
        fl.wait_until(lambda: _size(cli) >= grown, "the client's capture grew by 2 MB", timeout=30)
    finally:
        os.kill(pid, signal.SIGCONT)
    out = finish(fl)
    v = verdict(tmp_path)
    drops = v["calibration"]["capture_drops"]["srv"]
    assert drops > 1000 and v["calibration"]["capture_drops"]["cli"] == 0, v["calibration"]
    assert "capture_drops" in codes(v["flags"]), v["flags"]
    assert "⚑ srv's capture dropped" in out


SPIN = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass\n"
CORES = sorted(os.sched_getaffinity(0))


def beside(tmp_path: Path, loops: list[subprocess.Popen]) -> dict:
    """The bulk cell's verdict, run while LOOPS spin (stopped once Flent has written its
    log, so that the cell's compression, at the lowest priority, is not starved)."""
    partial = partial_capture(tmp_path, "calibration", BULK).parent
    try:
        fl = start(tmp_path, BULK)
        fl.wait_for_line(f"{CELL} …", timeout=300)
        done = tmp_path / "default" / "calibration" / BULK / "cell.json"
        fl.wait_until(lambda: (partial / "flent.log").is_file() or done.is_file(), "Flent ended", timeout=180)
    finally:
        for p in loops:
            p.kill()
            p.wait(timeout=30)
    finish(fl)
    return verdict(tmp_path)


def busy_cores(v: dict, group: str) -> dict[str, float]:
    """Per core of the client's: the share of the test it was busy, idle cgroups' work
    included (their lines left out: the sampler recorded GROUP's, which is checked)."""
    lines = (v["dir"] / "cli.ss.log").read_text().splitlines()
    assert any(line.startswith(f"% idle {group} ") for line in lines), lines[:20]
    log = "\n".join(line for line in lines if not line.startswith("% idle "))
    times = [float(line[2:]) for line in lines if line.startswith("# ")]
    return saturated_share(cpu_intervals(log, times[0], times[-1]))


def test_niced_busy_loops_in_sessions_of_their_own_take_the_cores_and_are_flagged(tmp_path):
    """A busy loop per core at niceness 19 in a session of its own: Linux's autogroups
    schedule each session as a peer of fl's (measured: such a loop takes half a core from
    a loop at niceness 0), so niced time outside idle cgroups is busy time."""
    def niced(core: int) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", SPIN, str(core)], start_new_session=True,
                                preexec_fn=lambda: os.nice(19))
    v = beside(tmp_path, [niced(core) for core in CORES])
    assert "cpu_busy" in codes(v["calibration"]["reasons"]) and "cpu_busy" in codes(v["flags"]), v["calibration"]


def test_busy_loops_in_an_idle_cgroup_leave_the_cell_unflagged(tmp_path):
    """The same loops in a CPU cgroup with cpu.idle (.ci/in-idle-cgroup, with which the VM
    suite can run beside this one): the cores are busy (niced) most of the test, but with work that
    runs only when fl's does not want the core, so the cell is not flagged, and what it
    measured is the physics of the undisturbed run (its p95 one-way delay the FIFO's drain)."""
    helper, group = REPO / ".ci" / "in-idle-cgroup", f"fl-test-idle-{os.getpid()}"
    steal = Steal()
    try:
        v = beside(tmp_path, [subprocess.Popen([helper, group, sys.executable, "-c", SPIN, str(core)])
                              for core in CORES])
    finally:
        for root in ("/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup"):
            with contextlib.suppress(OSError):
                os.rmdir(f"{root}/{group}")
    assert min(busy_cores(v, group).values()) > 0.5, busy_cores(v, group)
    assert not beyond_steal(v["calibration"]["reasons"]) and not beyond_steal(v["flags"]), v["calibration"]
    with steal.stop().judged(v["flags"], "one-way delay beside loops that give way"):
        assert abs(v["owd"]["p95"] - FIFO_DRAIN_MS) < 0.1 * FIFO_DRAIN_MS, v["owd"]
