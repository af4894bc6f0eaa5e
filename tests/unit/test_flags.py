"""Flags are data: every consumer selects them by kind and code, so any text (the words of
another flag, an empty one, anything) selects the same repetitions; cell.json files whose
calibration reasons are bare texts still load."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import get_args

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from judging import one_cell

from flharness.cells import expand
from flharness.report.collect import CellResult, RunResult, ScenarioResult
from flharness.report.compare import trusted
from flharness.report.dataset import rows
from flharness.report.expect import judge
from flharness.results import files
from flharness.results.cell_metrics import CellMetrics
from flharness.results.cell_record import CELL_VERSION, CellRecord
from flharness.results.files import VersionError
from flharness.results.flags import MISMEASURED, Flag, FlagCode, FlagKind
from flharness.results.run_record import RunRecord
from flharness.scenario import load_scenario
from flharness.scenario.schema import Scenario

GOLDEN = Path(__file__).parents[1] / "fixtures" / "golden"
RECORD = files.read(CellRecord, GOLDEN / "cell.json")
#: Texts that name other kinds: a consumer reading words would be misled by them.
MISLEADING = ["calibration: base RTT 99 ms", "up goodput is 200% of the payload capacity: impossible, a measurement error",
              "flow 1: starved", ""]
flag_data = st.tuples(st.sampled_from(get_args(FlagKind)), st.sampled_from(get_args(FlagCode)))
texts = st.one_of(st.sampled_from(MISLEADING), st.text(max_size=80))


def cell_with(flags: list[Flag]) -> CellResult:
    return CellResult("s", GOLDEN, RECORD, CellMetrics.model_construct(cell=RECORD.cell, flags=flags, invalid=[]))


@settings(max_examples=60, derandomize=True, deadline=None)
@given(st.lists(flag_data, max_size=4), st.lists(texts, min_size=4, max_size=4))
def test_selections_read_kinds_never_texts(kinds_codes, words):
    """The same flags with two sets of texts: compare's trusted repetitions, a cell's
    doubted flags and the dataset's calibration column's count agree, and follow the kinds."""
    def flags(pick: int) -> list[Flag]:
        return [Flag(kind=k, code=c, text=words[(i + pick) % len(words)]) for i, (k, c) in enumerate(kinds_codes)]
    a, b = cell_with(flags(0)), cell_with(flags(1))
    doubted = any(k in MISMEASURED for k, _ in kinds_codes)
    assert [f.code for f in a.mismeasured] == [f.code for f in b.mismeasured]
    assert bool(a.mismeasured) == doubted
    assert (trusted([a]) == [a]) == (trusted([b]) == [b]) == (not doubted)


@settings(max_examples=30, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds_codes=st.lists(flag_data, max_size=4), text=texts)
def test_expectations_are_not_judged_on_doubted_measurements_whatever_the_words(kinds_codes, text, scenario_file):
    path = scenario_file("test: tcp_1up\nrate: 10mbit\nqdisc: pfifo\ncc: cubic\nexpect:\n  - {metric: jain, '>=': 0.5}\n")
    metrics = SimpleNamespace(invalid=[], flags=[Flag(kind=k, code=c, text=text) for k, c in kinds_codes], jain=1.0,
                              capacity={})
    (j,) = judge(one_cell(path, metrics))
    doubted = [Flag(kind=k, code=c, text=text) for k, c in kinds_codes if k in MISMEASURED]
    assert j.ok is (None if doubted else True), j.detail
    if doubted:  # the detail says which kind of doubt, as the index and the junit file show it
        assert j.detail == f"measurement in doubt: {doubted[0]}", j.detail


def test_the_dataset_gives_texts_and_codes():
    flags = [Flag(kind="calibration", code="cpu_stolen", text="the hypervisor took 9%"),
             Flag(kind="finding", code="starved", text="flow 2: starved")]
    scenario = Scenario.model_validate({"test": "tcp_2up", "rate": "10mbit", "cc": "cubic-vs-reno", "qdisc": "pfifo"})
    run = RunResult("r", Path("r"), RunRecord(run="r"), [ScenarioResult("s", Path("s"), scenario, [cell_with(flags)])])
    (row,) = rows(run)
    assert row["flag_codes"] == "cpu_stolen starved"
    assert row["flags"] == "calibration: the hypervisor took 9%; flow 2: starved"
    assert row["calibration"] == "the hypervisor took 9%"


def test_a_version_1_cell_record_is_upgraded_on_read(tmp_path):
    """The golden cell.json is version 1, whose calibration reasons were texts: read, it is
    version 2 with each reason a calibration flag (unclassified); a version this fl does
    not know (newer, or none) is still one clear error."""
    data = json.loads((GOLDEN / "cell.json").read_text())
    assert data["version"] == 1
    data["checks"]["calibration"]["reasons"] = ["base RTT 30.00 ms, declared 20 ms"]
    old = tmp_path / "cell.json"
    old.write_text(json.dumps(data))
    record = files.read(CellRecord, old)
    assert record.version == CELL_VERSION == 2
    (reason,) = record.checks.calibration.reasons
    assert (reason.kind, reason.code, reason.text) == ("calibration", "unclassified", "base RTT 30.00 ms, declared 20 ms")
    assert record.config == files.read(CellRecord, GOLDEN / "cell.json").config
    for version, why in ((3, "version 3; this fl reads version 2"), (None, "no version")):
        old.write_text(json.dumps({**data, "version": version}))
        with pytest.raises(VersionError, match=why):
            files.read(CellRecord, old)


def test_an_interrupted_cell_is_not_judged(scenario_file):
    """A cell stopped before it finished measured nothing: its expectations are neither met
    nor missed (a key finding it alone would judge reads "not run", not "does not hold")."""
    path = scenario_file("test: tcp_1up\nrate: 10mbit\nqdisc: pfifo\ncc: cubic\nexpect:\n  - {metric: jain, '>=': 0.5}\n")
    scenario = load_scenario(path)
    (cell,) = expand(scenario, path)
    record = SimpleNamespace(label=lambda a: None, status="interrupted", reason="interrupted (SIGINT/SIGTERM)",
                             cell=cell.name, config=cell.config)
    s = ScenarioResult(scenario.name, Path("/nonexistent"), scenario, [CellResult(scenario.name, Path("/x"), record, None)])
    (j,) = judge(s)
    assert j.ok is None and j.detail == "interrupted: interrupted (SIGINT/SIGTERM)"


def test_a_doubt_about_one_metric_leaves_the_others_judged(scenario_file):
    """An impossible D_SS doubts D_SS and the fairness built on it, not the one-way delay
    of the same cell; a calibration flag doubts every metric (issue 37: a rate-step cell
    whose D_SS was flagged lost its latency verdict too)."""
    path = scenario_file("test: tcp_1up\nrate: 10mbit\nqdisc: pfifo\ncc: cubic\nexpect:\n"
                         "  - {metric: jain, '>=': 0.5}\n  - {metric: owd_p95_ms, '<': 100}\n")
    flow = SimpleNamespace(owd_ms=SimpleNamespace(p95=40.0))
    steady = Flag(kind="measurement_error", code="steady_over_capacity", metrics=["dss_mbit", "jain", "ratio"],
                  text="flow 1: D_SS 10.3 Mbit/s is 107 % of the payload capacity, impossible")
    whole = Flag(kind="calibration", code="base_rtt", text="base RTT 30 ms, declared 20 ms")
    for flags, verdicts in (([steady], [None, True]), ([steady, whole], [None, None]), ([], [True, True])):
        s = one_cell(path, SimpleNamespace(invalid=[], flags=flags, jain=1.0, capacity={}, flows=[flow]))
        assert [j.ok for j in judge(s)] == verdicts, [j.detail for j in judge(s)]
