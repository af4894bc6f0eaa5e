"""Estimates from measured pace (run/pace.py): a cell's cost in units of its Flent run,
scaled by link rate under TCG; the pace is the median wall time per unit of the cells a
kind of testbed ran here, kept in the cache across runs."""
from types import SimpleNamespace

import pytest

from flharness.cells import expand
from flharness.image.store import CACHE_ENV
from flharness.run import pace
from flharness.scenario import load_scenario

SCENARIO = """
    test: tcp_1up
    length: 20
    qdisc: pfifo
    cc: cubic
    matrix:
      rate: [8mbit, 40mbit]
"""


@pytest.fixture
def cells(scenario_file):
    path = scenario_file(SCENARIO)
    slow, fast = sorted(expand(load_scenario(path), path), key=lambda c: c.config.bottleneck.max_rate_bps)
    return slow, fast


def test_a_cells_units_grow_with_its_rate_under_tcg_only(cells):
    slow, fast = cells
    flent = float(slow.config.flent_s)
    assert pace.units(slow, "host") == pace.units(fast, "host") == flent
    assert pace.units(slow, "vm-tcg") == pytest.approx(2 * flent)  # 8 Mbit/s: one knee
    assert pace.units(fast, "vm-tcg") == pytest.approx(6 * flent)


def test_the_pace_is_the_median_of_what_ran_here_and_shared_cores_count(cells, monkeypatch):
    slow, _ = cells
    monkeypatch.setattr(pace.os, "cpu_count", lambda: 2)
    samples = [pace.Sample("vm-tcg", 10.0, wall, 1.0, 1e9) for wall in (5.0, 7.0, 100.0)]
    samples.append(pace.Sample("host", 10.0, 1.0, 1.0, 1e9))
    p = pace.pace("vm-tcg", samples)
    assert (p.factor, p.measured) == (0.7, 3)
    assert p.cell_s(slow, 4) == pytest.approx(2 * p.cell_s(slow, 2))  # four VMs on two cores
    assert pace.pace("ssh", samples).factor == pace.DEFAULTS["ssh"]


def test_two_testbeds_halve_a_run_and_a_vm_boots_first(cells):
    p = pace.Pace("vm-kvm", 1.0, 1, None)
    one, two = p.run_s(list(cells), 1), p.run_s(list(cells), 2)
    work = sum(float(c.config.flent_s) for c in cells)
    assert one == pytest.approx(pace.BOOT_S["vm-kvm"] + work)
    assert two == pytest.approx(pace.BOOT_S["vm-kvm"] + work / 2)
    assert p.run_s([], 2) == 0


def test_runs_record_their_ok_cells_in_the_cache(cells, tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    slow, fast = cells

    class Rec:
        def __init__(self, status, started, ended):
            self.status, self.started, self.ended = status, started, ended

    pace.record([(slow, Rec("ok", 100.0, 100.0 + 3 * slow.config.flent_s)),
                 (fast, Rec("failed", 100.0, 500.0))], "host", 1)
    assert [s.wall for s in pace.load()] == [3 * slow.config.flent_s]
    assert pace.pace("host").factor == pytest.approx(3.0)
    (tmp_path / pace.PACE_FILE).write_text("not json")
    assert pace.load() == []


def test_before_anything_was_measured_here_the_estimate_is_a_range_said_as_a_guess(cells, monkeypatch, tmp_path):
    """A fresh machine's first VM run: no pace measured, so `fl list` gives the range of the
    paces measured elsewhere (TCG's 0.6 to 2.5: a fresh box took 2.1 times the old single
    guess, this machine one day 4 times), and the run's first ETA too; once a cell of the
    kind ran here, one number."""
    from flharness.run.progress import Progress
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    slow, fast = cells
    fresh = pace.pace("vm-tcg")
    low, high = (pace.Pace("vm-tcg", f, 1, 1e9).run_s([slow, fast], 2) for f in pace.GUESSES["vm-tcg"])
    text = fresh.estimate([slow, fast], 2)
    assert text.endswith("(a guess)") and text.split(" (")[0] == "–".join(map(pace.human_duration, (low, high)))
    assert "not measured here yet" in fresh.describe() and fresh.guess == pytest.approx((1.0, 2.5 / 0.6))
    lines = []
    progress = Progress([100.0, 100.0], 2, guess=fresh.guess)
    progress._print = lines.append  # type: ignore[method-assign]
    progress.start("a")
    assert lines[-1].endswith("(run ETA 1m40s to 6m57s, a guess)"), lines
    progress.finish("a", "ok", 250.0)
    progress.start("b")
    assert lines[-1].endswith("(run ETA 2m05s)"), lines  # one measured: its pace, one number
    pace.record([(slow, SimpleNamespace(status="ok", started=1.0, ended=61.0))], "vm-tcg", 1)  # type: ignore[list-item]
    assert pace.pace("vm-tcg").estimate([slow], 1).startswith("~")
