"""`expect:` items: what they accept, the errors they give, and the bounds' arithmetic."""
from __future__ import annotations

import pytest

from flharness.errors import ScenarioError
from flharness.scenario import load_scenario
from flharness.scenario.expectations import evaluate, parse_expectation


def test_an_expectation_with_a_rule_a_flow_and_an_expression():
    e = parse_expectation({"qdisc": "fq_codel", "cc": ["cubic", "reno"], "metric": "owd_p95_ms", "flow": 2,
                           "<": "rtt_ms + 30"})
    assert e.rule == {"qdisc": ["fq_codel"], "cc": ["cubic", "reno"]} and e.flow == 2 and e.op == "<"
    assert e.limit({"rtt_ms": 20, "capacity_mbit": 1, "rate_mbit": 1, "flows": 2}) == 50
    assert e.text == "owd_p95_ms flow 2 < rtt_ms + 30 (qdisc fq_codel, cc cubic/reno)"


def test_bounds_are_arithmetic_of_the_cells_physics_only():
    names = {"capacity_mbit": 9.5, "rtt_ms": 20.0}
    assert evaluate("0.9 * capacity_mbit", names) == pytest.approx(8.55)
    assert evaluate("(rtt_ms + 10) / 2 - -1", names) == 16
    for bad, why in (("__import__('os')", "only numbers"), ("capacity", "unknown name"), ("1 +", "no number"),
                     ("2 ** 8", "only numbers")):
        with pytest.raises(ValueError, match=why):
            evaluate(bad, names)


@pytest.mark.parametrize(("item", "why"), [
    ({"metric": "jain"}, "exactly one comparison"),
    ({"metric": "jain", ">=": 0.9, "<": 1}, "exactly one comparison"),
    ({"metric": "fairness", ">=": 0.9}, "none of goodput_mbit"),
    ({"metric": "jain", ">=": "0.9 * speed"}, "unknown name 'speed'"),
    ({"metric": "dss_mbit", "flow": 0, ">=": 1}, "a flow number from 1"),
    ({"metric": "jain", ">=": True}, "no number or expression"),
    ({"metric": "jain", ">=": "1/0"}, "divides by zero"),
    ({"metric": "jain", ">=": "capacity_mbit / (rate_mbit - rate_mbit)"}, "divides by zero"),
    ({"metric": "jain", ">=": "-" * 100_000 + "1"}, "at most 200 characters"),
    ({"metric": "jain", ">=": "1e308 * 10"}, "not a finite number"),
])
def test_bad_expectations_are_refused(item, why):
    with pytest.raises(ValueError, match=why):
        parse_expectation(item)


def test_a_bad_expectation_names_its_file_and_key(scenario_file):
    path = scenario_file("test: tcp_1up\nrate: 10mbit\nqdisc: pfifo\ncc: cubic\n"
                         "expect:\n  - {metric: jain, '>=': 0.9}\n  - {metric: jain, '=>': 0.9}\n")
    with pytest.raises(ScenarioError) as e:
        load_scenario(path)
    assert "expect[1]" in str(e.value) and "exactly one comparison" in str(e.value) and str(path) in str(e.value)


def test_an_expectations_rule_names_axes_and_values_of_the_scenario(scenario_file):
    from flharness.cells import expand
    path = scenario_file("test: tcp_1up\nrate: 10mbit\nqdisc: pfifo\ncc: [cubic, reno]\n"
                         "expect:\n  - {cc: vegas, metric: jain, '>=': 0.9}\n")
    with pytest.raises(ScenarioError) as e:
        expand(load_scenario(path), path)
    assert "expect[0].cc" in str(e.value) and "'vegas' is none of the cc values" in str(e.value)


def test_a_bound_that_divides_by_zero_with_a_cells_physics_is_a_miss_not_a_crash(scenario_file):
    """1 / (rate_mbit - 10) passes validation (every name 1) but divides by zero at 10 Mbit/s."""
    from types import SimpleNamespace

    from judging import one_cell

    from flharness.report.expect import judge
    path = scenario_file("test: tcp_1up\nrate: 10mbit\nqdisc: pfifo\ncc: cubic\n"
                         "expect:\n  - {metric: jain, '>=': 1 / (rate_mbit - 10)}\n")
    (j,) = judge(one_cell(path, SimpleNamespace(invalid=[], flags=[], jain=1.0, capacity={})))
    assert j.ok is False and j.detail == "bound: '1 / (rate_mbit - 10)' divides by zero"


@pytest.mark.parametrize(("item", "why"), [
    ({"metric": "dss_mbit", "flow": 1, "<": "0.75 * baseline"}, "needs the expectation's baseline: key"),
    ({"metric": "dss_mbit", "<": "baseline", "baseline": [0]}, "a mapping of axes to one value each"),
    ({"metric": "dss_mbit", "<": "baseline", "baseline": {"replay_window": [0, 32]}}, "one value each"),
    ({"metric": "dss_mbit", "<": "baseline", "baseline": {}}, "one value each"),
])
def test_a_bad_baseline_is_refused(item, why):
    with pytest.raises(ValueError, match=why):
        parse_expectation(item)


def test_a_baseline_names_axes_and_values_of_the_scenario(scenario_file):
    from flharness.cells import expand
    path = scenario_file("test: tcp_1up\nrate: 10mbit\nqdisc: pfifo\nmatrix: {cc: [cubic, reno]}\n"
                         "expect:\n  - {cc: reno, metric: jain, '<': baseline, baseline: {cc: vegas}}\n")
    with pytest.raises(ScenarioError) as e:
        expand(load_scenario(path), path)
    assert "expect[0].baseline.cc" in str(e.value) and "'vegas' is none of the cc values" in str(e.value)


def test_a_claim_against_its_baseline_cell(scenario_file):
    """Finding 9 as the report words it: Cubic's D_SS with a replay window "well below" its
    D_SS in the same cell without one (window 0); the baseline is the cell with the
    baseline's values and the judged cell's on every other axis (here its rate); without
    a valid baseline cell the claim is not judged, neither met nor missed."""
    from types import SimpleNamespace

    from flharness.cells import expand
    from flharness.report.collect import CellResult, ScenarioResult
    from flharness.report.expect import judge
    from flharness.results.cell_record import Coordinate
    path = scenario_file("test: tcp_2up\nqdisc: pfifo\ncc: cubic-vs-cubic\ntunnel: ipsec\n"
                         "matrix: {rate: [10mbit, 20mbit], replay_window: [0, 32, 64]}\n"
                         "expect:\n  - {replay_window: [32, 64], metric: dss_mbit, flow: 1, '<': 0.75 * baseline,"
                         " baseline: {replay_window: 0}}\n")
    scenario = load_scenario(path)
    dss = {("10mbit", 0): 6.0, ("10mbit", 32): 4.0, ("10mbit", 64): 5.0, ("20mbit", 0): 8.0, ("20mbit", 32): 5.0}
    s = ScenarioResult(scenario.name, path.parent, scenario)
    for cell in expand(scenario, path):
        at = (cell.coords["rate"].label, cell.coords["replay_window"].value)
        if at not in dss:
            continue  # 20 Mbit/s, window 64: its window 0 is there, it is not
        record = SimpleNamespace(label=lambda a, c=cell: c.coords[a].label if a in c.coords else None, status="ok",
                                 reason="", cell=cell.name, config=cell.config,
                                 coordinates={a: Coordinate(**v) for a, v in cell.coordinates().items()})
        metrics = SimpleNamespace(invalid=[], flags=[], capacity={}, flows=[SimpleNamespace(steady_mbit=dss[at]),
                                                                           SimpleNamespace(steady_mbit=1.0)])
        s.cells.append(CellResult(s.name, path.parent, record, metrics))  # type: ignore[arg-type]
    got = {j.cell.removeprefix("cubic-vs-cubic-pfifo-").replace("-0ms", ""): j for j in judge(s)}
    assert len(got) == 3
    met, missed, met20 = got["10mbit-replay32"], got["10mbit-replay64"], got["20mbit-replay32"]
    assert met.ok is True and met.detail == "dss_mbit = 4, expected < 4.5 (0.75 * baseline) against cubic-vs-cubic-pfifo-10mbit-0ms-replay0"
    assert missed.ok is False and "against cubic-vs-cubic-pfifo-10mbit-0ms-replay0" in missed.detail
    assert met20.ok is True and "expected < 6 " in met20.detail and "against cubic-vs-cubic-pfifo-20mbit-0ms-replay0" in met20.detail
    s.cells = [c for c in s.cells if not c.name.endswith("20mbit-0ms-replay0")]
    (alone,) = [j for j in judge(s) if j.cell.endswith("20mbit-0ms-replay32")]
    assert alone.ok is None and alone.detail == "baseline (replay_window 0): no such cell in this run"
