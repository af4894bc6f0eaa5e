"""Interrupts for real: SIGINT mid-cell, SIGKILL + `fl clean`. Nothing of the
run may remain: its namespaces, state files, processes (checked by the test's own
testbed ids and namespace inodes, seen while the run went on: another fl run on the
machine does not disturb the check)."""
from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from flrun import NETNS_DIR, REPO, FlProcess, leftovers, needs_root_tools, removed_stale, run_fl, wait_for

pytestmark = [pytest.mark.e2e, needs_root_tools()]
SCENARIO = str(REPO / "tests" / "scenarios" / "three-short.yml")
#: A partial server capture this large holds more than Flent's lead-in (ping alone writes
#: a few kB a second): the cell's flows run.
FLOWS_RUNNING_BYTES = 300_000


def start_run(results: Path, *args: str) -> FlProcess:
    return FlProcess("run", SCENARIO, "--results", str(results), *args)


def partial_capture(results: Path, scenario: str, cell: str) -> Path:
    """Where a running cell's server capture grows (results/<run>/<scenario>/.partial/<cell>/)."""
    return results / "default" / scenario / ".partial" / cell / "srv.pcap"


def flows_running(results: Path, scenario: str, cell: str, size: int = FLOWS_RUNNING_BYTES) -> bool:
    """Whether the cell's partial server capture exceeds SIZE bytes (at 20 Mbit/s, 300 kB
    is about half a second of the flows)."""
    pcap = partial_capture(results, scenario, cell)
    try:
        return pcap.stat().st_size > size
    except OSError:
        return False


def running_cells(results: Path, scenario: str) -> list[str]:
    """Cells whose flows are running now (their partial server captures are large)."""
    partial = results / "default" / scenario / ".partial"
    return [d.name for d in partial.iterdir() if flows_running(results, scenario, d.name)] if partial.is_dir() else []


def cells(results: Path) -> dict[str, dict]:
    root = results / "default" / "three-short"
    return {d.name: json.loads((d / "cell.json").read_text())
            for d in root.iterdir() if d.is_dir() and not d.name.startswith(".")}


def own_namespaces(fl: FlProcess) -> list[str]:
    return sorted(p.name for tid in fl.seen.ids for p in NETNS_DIR.glob(f"{tid}-*"))


def test_sigint_mid_cell_leaves_nothing_and_the_next_run_resumes(tmp_path):
    """Ctrl-C while the second cell's flows run: exit status 130, the first cell kept, the
    second marked interrupted, the third never started, nothing of the run left; the next
    run runs the other two and keeps the first. (SIGTERM: test_e2e_cli.)"""
    results = tmp_path / "results"
    fl = start_run(results)
    fl.wait_for_line("[2/3] three-short/cubic-vs-reno")
    fl.wait_until(lambda: flows_running(results, "three-short", "cubic-vs-reno-pfifo_200-20mbit-0ms"),
                  "cell 2's flows run")
    assert len(own_namespaces(fl)) == len(fl.seen.inodes) == 3, fl.seen  # what leftovers() checks
    fl.send_signal(signal.SIGINT)
    assert fl.finish(timeout=180) == 130, fl.output
    assert leftovers(fl.seen, results) == []
    state = cells(results)
    first = state["cubic-vs-cubic-pfifo_200-20mbit-0ms"]
    assert first["status"] == "ok" and "cli.pcap.xz" in first["files"]
    second = state["cubic-vs-reno-pfifo_200-20mbit-0ms"]
    assert second["status"] == "interrupted" and "SIGINT/SIGTERM" in second["reason"], second
    assert "reno-vs-reno-pfifo_200-20mbit-0ms" not in state
    p = run_fl("run", SCENARIO, "--results", str(results))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "2 ok, 0 failed, 0 skipped, 1 already done" in p.stdout
    assert {c["status"] for c in cells(results).values()} == {"ok"}
    assert cells(results)["cubic-vs-cubic-pfifo_200-20mbit-0ms"]["started"] == first["started"]
    assert leftovers(p.seen, results) == []


def test_fl_clean_removes_what_a_killed_run_left(tmp_path):
    results = tmp_path / "results"
    fl = start_run(results)
    fl.wait_for_line("[1/3] three-short/cubic-vs-cubic")
    fl.wait_until(lambda: flows_running(results, "three-short", "cubic-vs-cubic-pfifo_200-20mbit-0ms"),
                  "cell 1's flows run")
    fl.proc.kill()  # SIGKILL: fl cannot clean up
    fl.proc.wait(timeout=30)
    (tid,) = fl.seen.ids
    assert len(own_namespaces(fl)) == len(fl.seen.inodes) == 3, "expected the killed run to leave its namespaces"
    p = run_fl("clean")
    assert p.returncode == 0 and removed_stale(p.stdout, tid), p.stdout + p.stderr
    wait_for(lambda: not own_namespaces(fl), "the killed run's namespaces are gone")
    assert leftovers(fl.seen, results) == []
