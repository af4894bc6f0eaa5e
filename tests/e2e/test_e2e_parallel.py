"""Several namespace testbeds at once (`--parallel 2`: the session's demo run,
conftest.demo_run), an interrupt during such a run, and a run killed with SIGKILL and
started again at once (no `fl clean`).

Oracles besides fl's own records: each testbed's captures hold its own addresses only
(the second testbed lives on subnets of its own), the two testbeds' cells overlap in
time, and nothing of the run (its namespaces, processes, state files: by the testbed ids
and namespace inodes the test saw while it ran) survives it.
"""
from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from flrun import NETNS_DIR, REPO, FlProcess, built_testbeds, leftovers, needs_root_tools, removed_stale, run_fl
from resultlib import packets
from test_e2e_interrupt import flows_running, running_cells

from flharness.analysis.flent_data import load as load_flent

pytestmark = [pytest.mark.e2e, needs_root_tools()]
#: Tests that read the demo run go where its other readers go (`alone`): each pytest process makes the run once
ON_THE_DEMO_RUN = pytest.mark.alone
SERVERS = {"ns1": "10.71.2.1", "ns2": "10.71.18.1"}
THREE = str(REPO / "tests" / "scenarios" / "three-short.yml")


def records(root: Path) -> dict[str, dict]:
    return {d.name: json.loads((d / "cell.json").read_text())
            for d in sorted(root.iterdir()) if (d / "cell.json").is_file()}


@pytest.fixture(scope="module")
def parallel(demo_run):
    return demo_run.fl, demo_run.results / "e2e" / "demo"


@ON_THE_DEMO_RUN
def test_two_namespace_testbeds_share_the_cells(parallel):
    p, root = parallel
    assert p.returncode == 0, p.stdout + p.stderr
    assert "12 ok, 0 failed" in p.stdout
    recs = records(root)
    assert len(recs) == 12 and {r["status"] for r in recs.values()} == {"ok"}
    by_testbed: dict[str, list[dict]] = {}
    for rec in recs.values():
        by_testbed.setdefault(rec["backend"]["testbed_label"], []).append(rec)
    assert sorted(by_testbed) == ["ns1", "ns2"], by_testbed.keys()
    assert len({rec["backend"]["testbed_id"] for rec in recs.values()}) == 2
    # they ran at the same time: some cell of ns1 overlaps some cell of ns2
    assert any(a["started"] < b["ended"] and b["started"] < a["ended"]
               for a in by_testbed["ns1"] for b in by_testbed["ns2"])
    assert " ns1: demo/" in p.stdout and " ns2: demo/" in p.stdout


@ON_THE_DEMO_RUN
def test_each_testbed_captured_its_own_addresses(parallel):
    """The server's capture of each cell holds the flows to that testbed's server, and not
    a packet of the other testbed."""
    _, root = parallel
    for name, rec in records(root).items():
        mine = SERVERS[rec["backend"]["testbed_label"]]
        other = next(ip for ip in SERVERS.values() if ip != mine)
        srv = root / name / "srv.pcap.xz"
        assert packets(srv, f"tcp and dst host {mine} and greater 1000") > 1000, name
        assert packets(srv, f"host {other}") == 0, name
        assert load_flent(root / name / f"{name}.flent.gz")["metadata"]["HOSTS"] == [mine]


@ON_THE_DEMO_RUN
def test_nothing_of_a_parallel_run_remains(parallel):
    p, root = parallel
    assert len(built_testbeds(p, *(c.parent for c in root.glob("*/cell.json")))) == 2
    assert len(p.seen.inodes) == 6  # three namespaces each
    assert leftovers(p.seen, root.parent.parent) == []


def test_sigint_during_a_parallel_run_stops_both_testbeds_and_the_next_run_resumes(tmp_path):
    """With 8 s tests: both testbeds' flows must run at once, though one testbed's build
    may lag the other's by a whole cell."""
    results, three = tmp_path / "results", tmp_path / "three-short.yml"  # named three-short too
    three.write_text(f"extends: {THREE}\nlength: 8\n")
    fl = FlProcess("run", str(three), "--parallel", "2", "--results", str(results))
    fl.wait_for_line("[2/3] ns")  # the second testbed has its cell too
    fl.wait_until(lambda: len(running_cells(results, "three-short")) == 2, "both testbeds' flows run")
    running = running_cells(results, "three-short")
    assert len(fl.seen.ids) == 2 and len(fl.seen.inodes) == 6, fl.seen
    fl.send_signal(signal.SIGINT)
    assert fl.finish(timeout=240) == 130, fl.output
    assert leftovers(fl.seen, results) == []
    # the two running cells were interrupted; a cell a testbed finished before (when the
    # other one's build lagged by a whole cell) stays ok
    statuses = {name: r["status"] for name, r in records(results / "default" / "three-short").items()}
    assert {statuses.get(name) for name in running} == {"interrupted"}, (running, statuses, fl.output)
    assert set(statuses.values()) <= {"interrupted", "ok"}, statuses
    p = run_fl("run", str(three), "--results", str(results))
    assert p.returncode == 0 and "3 ok, 0 failed" in p.stdout, p.stdout + p.stderr
    assert {r["status"] for r in records(results / "default" / "three-short").values()} == {"ok"}
    assert leftovers(p.seen, results) == []


def test_a_run_killed_with_sigkill_is_cleaned_up_by_the_next_run(tmp_path):
    """kill -9 mid-cell, then `fl run` again at once: it removes what the killed run left
    (saying so), reruns the interrupted cell, keeps the completed one, leaves nothing."""
    results = tmp_path / "results"
    fl = FlProcess("run", THREE, "--results", str(results))
    line = fl.wait_for_line("[2/3] three-short/")
    cell = line.split("three-short/")[1].split()[0]
    fl.wait_until(lambda: flows_running(results, "three-short", cell), "cell 2's flows run")
    fl.proc.kill()
    fl.proc.wait(timeout=30)
    (tid,) = fl.seen.ids
    assert len(list(NETNS_DIR.glob(f"{tid}-*"))) == len(fl.seen.inodes) == 3, "the killed run should have left its testbed"
    first = records(results / "default" / "three-short")
    assert [r["status"] for r in first.values()] == ["ok"]
    p = run_fl("run", THREE, "--results", str(results))
    assert p.returncode == 0, p.stdout + p.stderr
    assert removed_stale(p.stdout, tid), p.stdout
    assert "2 ok, 0 failed, 0 skipped, 1 already done" in p.stdout, p.stdout
    after = records(results / "default" / "three-short")
    assert {r["status"] for r in after.values()} == {"ok"} and len(after) == 3
    done = next(iter(first))
    assert after[done]["started"] == first[done]["started"]  # the completed cell was kept
    assert leftovers(fl.seen, results) == [] and leftovers(p.seen, results) == []
