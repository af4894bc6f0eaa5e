"""Fixtures of the end-to-end tests: runs shared by several test modules (the demo, the
behaviours), a real nginx serving a folder (weblib), and ssh testbeds of namespaces (sshbed)."""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest
from flrun import DEMO, REPO, FlResult, built_testbeds, leftovers, run_fl
from machine import Steal
from sshbed import hosts, ssh_testbeds  # noqa: F401 (the fixtures)
from weblib import nginx  # noqa: F401 (the fixture)


class DemoRun(NamedTuple):
    out: str  # fl's output
    results: Path  # the results root (run folder results/e2e/)
    fl: FlResult
    steal: Steal  # the machine's CPU steal during the run


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory) -> DemoRun:
    """The shipped demo scenario (shortened: DEMO) run once for the session on two namespace testbeds
    (`--parallel 2`, as on a machine of two cores or more). test_e2e_demo checks the run,
    test_e2e_parallel the two testbeds, test_e2e_report its analysis."""
    results, steal = tmp_path_factory.mktemp("results"), Steal()
    p = run_fl("run", DEMO, "--run", "e2e", "--parallel", "2", "--results", str(results))
    assert p.returncode == 0, p.stdout + p.stderr
    built_testbeds(p, *(c.parent for c in (results / "e2e" / "demo").glob("*/cell.json")))
    assert not leftovers(p.seen, results), "the run left something behind"
    return DemoRun(p.stdout, results, p, steal.stop())


#: Two scenario files run in one `fl run` for the session (several scenarios on one
#: testbed): path and endpoint behaviours this machine's kernel can run, and a download
#: test in two repetitions with analysis settings. tests/e2e/test_e2e_behaviours.py checks
#: them, tests/e2e/test_e2e_cli.py publishes them.
BEHAVIOURS = [str(REPO / "tests" / "scenarios" / f"{n}.yml") for n in ("behaviours-paths", "behaviours-reps")]


@pytest.fixture(scope="session")
def behaviours_run(tmp_path_factory):
    """(the finished run, its run folder results/default/): checked by the tests."""
    results = tmp_path_factory.mktemp("behaviours")
    p = run_fl("run", *BEHAVIOURS, "--results", str(results), timeout=900)
    return p, results / "default"


@pytest.fixture(scope="session")
def behaviours_report(behaviours_run):
    """`fl plot` of the session's behaviours run: (its output, the run folder)."""
    _, run = behaviours_run
    p = run_fl("plot", "--results", str(run.parent), timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout, run
