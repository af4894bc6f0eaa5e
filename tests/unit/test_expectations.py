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
