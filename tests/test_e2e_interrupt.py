"""Interrupts for real: SIGINT mid-cell, SIGKILL + `fl clean`. Nothing of fl may remain."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FL, REPO, needs_root_tools, netns_list, run_fl

pytestmark = [pytest.mark.e2e, needs_root_tools()]
SCENARIO = str(REPO / "tests" / "scenarios" / "three-short.yml")


def interruptible() -> None:
    """In the child: SIGINT back to its default, so Python turns it into Ctrl-C even when
    the test suite was started in the background (a shell then ignores SIGINT for it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_run(results: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(FL), "run", SCENARIO, "--results", str(results)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=interruptible)


def wait_for_line(proc: subprocess.Popen, needle: str, timeout: float = 300) -> list[str]:
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            break
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError(f"never saw {needle!r}:\n{''.join(seen)}")


#: Servers of the namespace testbeds fl builds from inventory.ini (the first, the second
#: of a parallel run).
TESTBED_SERVERS = ("10.71.2.1", "10.71.18.1")


def fl_processes(results: Path) -> list[str]:
    """Processes that belong to a run: anything whose command line names its results folder,
    or a testbed server/capture tool (netserver, irtt, tcpdump, flent) on fl's addresses."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(results) in cmd or any(ip in cmd for ip in TESTBED_SERVERS):
            found.append(f"{d.name}: {cmd}")
    return found


def cells(results: Path) -> dict[str, dict]:
    root = results / "default" / "three-short"
    return {d.name: json.loads((d / "cell.json").read_text())
            for d in root.iterdir() if d.is_dir() and not d.name.startswith(".")}


def test_sigint_mid_cell_leaves_nothing_and_the_next_run_resumes(tmp_path):
    results = tmp_path / "results"
    before = netns_list()
    proc = start_run(results)
    wait_for_line(proc, "[2/3] three-short/cubic-vs-reno")
    time.sleep(12)  # well inside cell 2's Flent run
    proc.send_signal(signal.SIGINT)
    out = proc.communicate(timeout=180)[0]
    assert proc.returncode == 130, out
    assert netns_list() == before
    assert fl_processes(results) == []
    assert not list(Path("/run/fl/testbeds").glob("*.json"))
    state = cells(results)
    first = state["cubic-vs-cubic-pfifo_200-20mbit-0ms"]
    assert first["status"] == "ok" and "cli.pcap.xz" in first["files"]
    assert state["cubic-vs-reno-pfifo_200-20mbit-0ms"]["status"] == "interrupted"
    assert "reno-vs-reno-pfifo_200-20mbit-0ms" not in state
    p = run_fl("run", SCENARIO, "--results", str(results))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "2 ok, 0 failed, 0 skipped, 1 already done" in p.stdout
    assert {c["status"] for c in cells(results).values()} == {"ok"}
    assert cells(results)["cubic-vs-cubic-pfifo_200-20mbit-0ms"]["started"] == first["started"]


def test_fl_clean_removes_what_a_killed_run_left(tmp_path):
    results = tmp_path / "results"
    before = netns_list()
    proc = start_run(results)
    wait_for_line(proc, "[1/3] three-short/cubic-vs-cubic")
    time.sleep(10)
    proc.kill()  # SIGKILL: fl cannot clean up
    proc.wait()
    assert netns_list() != before, "expected the killed run to leave its namespaces"
    p = run_fl("clean")
    assert p.returncode == 0 and "removing testbed fl-" in p.stdout, p.stdout + p.stderr
    time.sleep(1)
    assert netns_list() == before
    assert fl_processes(results) == []
    assert "nothing to clean" in run_fl("clean").stdout
