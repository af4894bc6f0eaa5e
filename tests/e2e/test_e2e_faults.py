"""Faults end cleanly, for real: a results folder too small for the run (refused before
anything is built), a disk that fills during the run (one line naming the file, no cell
recorded ok that was not, the testbed removed, the next run resumes), a server daemon
killed mid-run (restarted before the next cell: one cell at most is lost) and a capture
killed mid-cell (that cell fails with the reason, the next ones run). Each uses two short
cells of tests/scenarios/three-short.yml and its own results folder."""
from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from flrun import REPO, FlProcess, leftovers, needs_root_tools, run_fl
from test_e2e_calibration import own_tcpdump
from test_e2e_interrupt import cells, flows_running

pytestmark = [pytest.mark.e2e, needs_root_tools()]
SCENARIO = str(REPO / "tests" / "scenarios" / "three-short.yml")
FIRST, SECOND = "cubic-vs-cubic-pfifo_200-20mbit-0ms", "cubic-vs-reno-pfifo_200-20mbit-0ms"
ONE, TWO = ("--only", "cubic-vs-cubic"), ("--only", "cubic-vs-cubic", "--only", "cubic-vs-reno")


@contextlib.contextmanager
def small_disk(folder: Path, size: str) -> Iterator[Path]:
    """A tmpfs of SIZE mounted on FOLDER (a file system of the test's own)."""
    folder.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path) -> Path:
    """Write a file into FOLDER until its file system is full."""
    filler = folder / "filler"
    with filler.open("wb") as f:
        chunk = b"\0" * (1 << 20)
        try:
            while True:
                f.write(chunk)
                f.flush()
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
    return filler


def error_lines(fl: FlProcess | subprocess.CompletedProcess) -> list[str]:
    text = fl.output if isinstance(fl, FlProcess) else fl.stdout + fl.stderr
    assert "Traceback" not in text, text
    return [line for line in text.splitlines() if line.startswith("fl: error:")]


def test_a_results_folder_too_small_for_the_run_is_refused_before_anything_is_built(tmp_path):
    with small_disk(tmp_path / "small", "8m") as disk:
        p = run_fl("run", SCENARIO, "--results", str(disk))
        assert p.returncode == 1
        (line,) = error_lines(p)
        assert line.startswith(f"fl: error: {disk / 'default'}: ") and "free, the 3 cell(s) to run need about" in line, line
        assert not p.seen.ids and leftovers(p.seen, disk) == [] and not (disk / "default").exists()


def test_a_disk_that_fills_during_the_run_stops_it_in_one_line_and_the_next_run_resumes(tmp_path):
    with small_disk(tmp_path / "disk", "120m") as disk:
        fl = FlProcess("run", SCENARIO, "--results", str(disk), *ONE)
        fl.wait_for_line(f"three-short/{FIRST} …", timeout=300)
        fl.wait_until(lambda: flows_running(disk, "three-short", FIRST), "the first cell's flows run")
        filler = fill(disk)
        assert fl.finish(timeout=300) == 1, fl.output
        (line,) = error_lines(fl)
        assert "No space left on device: the run stopped; free some space and run it again" in line, line
        assert f"fl: error: {disk}/" in line, line  # the file (or the cell's folder) it could not write
        assert leftovers(fl.seen, disk) == []
        assert cells(disk).get(FIRST, {}).get("status") != "ok"  # never recorded ok
        filler.unlink()
        p = run_fl("run", SCENARIO, "--results", str(disk), *ONE)
        assert p.returncode == 0, p.stdout + p.stderr
        assert {name: c["status"] for name, c in cells(disk).items()} == {FIRST: "ok"}
        assert leftovers(p.seen, disk) == []


def _pid_of(fl: FlProcess, name: str) -> int:
    (tid,) = fl.seen.ids
    return int((Path("/run/fl") / tid / "srv" / f"{name}.pid").read_text().split()[0])


def test_a_capture_and_a_server_daemon_killed_mid_cell_cost_that_cell_only(tmp_path):
    """While the first cell's flows run, the server's tcpdump and netserver are killed
    (netserver's forked test processes carry on): that cell fails, saying its capture ended
    early; the second cell's setup finds netserver gone and starts it again (its setup.log
    says so), and the second cell runs."""
    results = tmp_path / "results"
    fl = FlProcess("run", SCENARIO, "--results", str(results), *TWO)
    fl.wait_for_line(f"three-short/{FIRST} …", timeout=300)
    fl.wait_until(lambda: flows_running(results, "three-short", FIRST), "the first cell's flows run")
    os.kill(own_tcpdump(results, "srv"), signal.SIGKILL)
    os.kill(_pid_of(fl, "netserver"), signal.SIGKILL)
    assert fl.finish(timeout=300) == 1, fl.output  # a cell failed
    state = cells(results)
    first = state[FIRST]
    assert first["status"] == "failed" and "the capture on srv ended before the test did" in first["reason"], first
    assert re.search(rf"\] failed +{FIRST} .*the capture on srv ended", fl.output), fl.output
    assert state[SECOND]["status"] == "ok", state[SECOND]
    setup = (results / "default" / "three-short" / SECOND / "setup.log").read_text()
    assert "fl-servers: netserver had died; started again" in setup, setup
    assert leftovers(fl.seen, results) == []
    json.loads((results / "default" / "run.json").read_text())  # the run's record is whole


def test_a_namespace_whose_script_forks_while_killed_is_emptied_before_it_goes():
    """netns.remove, as a killed run's teardown calls it: a script in one of fl's
    namespaces that starts a long-lived child every 2 ms (as the client's Flent script
    starts Flent) still has children the first list of PIDs did not hold; none survives the
    namespace (CI once kept a Flent alive in a deleted namespace this way)."""
    from flharness.testbed import netns
    ns = f"{netns.new_testbed_id()}-cli"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    inode = os.stat(f"/run/netns/{ns}").st_ino
    try:
        script = subprocess.Popen(["ip", "netns", "exec", ns, "bash", "-c", "while :; do sleep 30 & sleep 0.002; done"],
                                  start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        assert len(netns.pids_in(ns)) > 20
        netns.remove(ns)
        script.wait(timeout=10)  # killed: reaped here
    finally:
        if os.path.exists(f"/run/netns/{ns}"):
            netns.remove(ns)
    time.sleep(0.2)
    left = []
    for d in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if d.name.isdigit() and os.stat(d / "ns" / "net").st_ino == inode:
                left.append(d.name)
    assert left == [] and ns not in netns.list_namespaces()
