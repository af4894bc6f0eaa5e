"""Several namespace testbeds at once (`--parallel 2`), an interrupt during such a run,
and a run killed with SIGKILL and started again at once (no `fl clean`).

Oracles besides fl's own records: each testbed's captures hold its own addresses only
(the second testbed lives on subnets of its own), the two testbeds' cells overlap in
time, and nothing of fl (namespaces, processes, state files) survives a run.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FL, REPO, needs_root_tools, netns_list, run_fl
from resultlib import packets
from test_e2e_interrupt import fl_processes, interruptible, wait_for_line

from flharness.run.flent_data import load as load_flent

pytestmark = [pytest.mark.e2e, needs_root_tools()]
SUBSET = ["--only", "cubic-vs-*-pfifo_*"]  # 4 cells of the demo: 2 CC pairs × 2 rates
SERVERS = {"ns1": "10.71.2.1", "ns2": "10.71.18.1"}
THREE = str(REPO / "tests" / "scenarios" / "three-short.yml")


def records(root: Path) -> dict[str, dict]:
    return {d.name: json.loads((d / "cell.json").read_text())
            for d in sorted(root.iterdir()) if (d / "cell.json").is_file()}


@pytest.fixture(scope="module")
def parallel(tmp_path_factory):
    results = tmp_path_factory.mktemp("parallel")
    before = netns_list()
    p = run_fl("run", "demo", *SUBSET, "--parallel", "2", "--results", str(results), timeout=900)
    return p, results / "default" / "demo", before


def test_two_namespace_testbeds_share_the_cells(parallel):
    p, root, _ = parallel
    assert p.returncode == 0, p.stdout + p.stderr
    assert "4 ok, 0 failed" in p.stdout
    recs = records(root)
    assert len(recs) == 4 and {r["status"] for r in recs.values()} == {"ok"}
    by_testbed: dict[str, list[dict]] = {}
    for rec in recs.values():
        by_testbed.setdefault(rec["backend"]["testbed_label"], []).append(rec)
    assert sorted(by_testbed) == ["ns1", "ns2"], by_testbed.keys()
    assert len({rec["backend"]["testbed_id"] for rec in recs.values()}) == 2
    # they ran at the same time: some cell of ns1 overlaps some cell of ns2
    assert any(a["started"] < b["ended"] and b["started"] < a["ended"]
               for a in by_testbed["ns1"] for b in by_testbed["ns2"])
    assert " ns1: demo/" in p.stdout and " ns2: demo/" in p.stdout


def test_each_testbed_captured_its_own_addresses(parallel):
    """The server's capture of each cell holds the flows to that testbed's server, and not
    a packet of the other testbed."""
    _, root, _ = parallel
    for name, rec in records(root).items():
        mine = SERVERS[rec["backend"]["testbed_label"]]
        other = next(ip for ip in SERVERS.values() if ip != mine)
        srv = root / name / "srv.pcap.xz"
        assert packets(srv, f"tcp and dst host {mine} and greater 1000") > 1000, name
        assert packets(srv, f"host {other}") == 0, name
        assert load_flent(root / name / f"{name}.flent.gz")["metadata"]["HOSTS"] == [mine]


def test_nothing_of_a_parallel_run_remains(parallel):
    _, root, before = parallel
    assert netns_list() == before
    assert fl_processes(root.parent.parent) == []
    assert not list(Path("/run/fl/testbeds").glob("*.json"))


def test_sigint_during_a_parallel_run_stops_both_testbeds_and_the_next_run_resumes(tmp_path):
    results = tmp_path / "results"
    before = netns_list()
    proc = subprocess.Popen([sys.executable, str(FL), "run", THREE, "--parallel", "2", "--results", str(results)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=interruptible)
    wait_for_line(proc, "[2/3] ns")  # the second testbed has its cell too
    time.sleep(6)  # both testbeds inside their cells
    proc.send_signal(signal.SIGINT)
    out = proc.communicate(timeout=240)[0]
    assert proc.returncode == 130, out
    assert netns_list() == before
    assert fl_processes(results) == []
    statuses = {r["status"] for r in records(results / "default" / "three-short").values()}
    assert statuses == {"interrupted"}, (statuses, out)
    p = run_fl("run", THREE, "--results", str(results))
    assert p.returncode == 0 and "3 ok, 0 failed" in p.stdout, p.stdout + p.stderr
    assert {r["status"] for r in records(results / "default" / "three-short").values()} == {"ok"}


def test_a_run_killed_with_sigkill_is_cleaned_up_by_the_next_run(tmp_path):
    """kill -9 mid-cell, then `fl run` again at once: it removes what the killed run left
    (saying so), reruns the interrupted cell, keeps the completed one, leaves nothing."""
    results = tmp_path / "results"
    before = netns_list()
    proc = subprocess.Popen([sys.executable, str(FL), "run", THREE, "--results", str(results)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=interruptible)
    wait_for_line(proc, "[2/3] three-short/")
    time.sleep(8)
    proc.kill()
    proc.wait()
    assert netns_list() != before, "the killed run should have left its testbed"
    first = records(results / "default" / "three-short")
    assert [r["status"] for r in first.values()] == ["ok"]
    p = run_fl("run", THREE, "--results", str(results))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "left by a run that was killed" in p.stdout, p.stdout
    assert "2 ok, 0 failed, 0 skipped, 1 already done" in p.stdout, p.stdout
    after = records(results / "default" / "three-short")
    assert {r["status"] for r in after.values()} == {"ok"} and len(after) == 3
    done = next(iter(first))
    assert after[done]["started"] == first[done]["started"]  # the completed cell was kept
    assert netns_list() == before
    assert fl_processes(results) == []
    assert not list(Path("/run/fl/testbeds").glob("*.json"))
