"""The progress line of a finished cell (run/progress.py)."""
from __future__ import annotations

from types import SimpleNamespace

from flharness.cells import expand
from flharness.run.progress import progress_detail
from flharness.scenario import load_scenario


def test_the_goodput_is_a_share_of_every_rate_the_schedule_set(scenario_file):
    path = scenario_file("test: tcp_1up\nrate: 50mbit\nqdisc: pfifo\ncc: cubic\n"
                         "rate_schedule: [{at: 10s, rate: 25mbit}, {at: 20s, rate: 5mbit}]\n")
    cell, = expand(load_scenario(path), path)
    verdict = SimpleNamespace(status="ok", reason="", utilisation={"up": 0.9}, analysis_error=None,
                              checks=SimpleNamespace(calibration=None, late_start_s={}))
    assert progress_detail(cell, verdict) == "goodput 90.0% of 50mbit then 25mbit then 5mbit's payload capacity"  # type: ignore[arg-type]
