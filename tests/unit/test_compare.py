"""`fl compare`'s statistics and matching, on known inputs (the real runs: test_e2e_compare.py)."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from flharness.report.collect import CellResult
from flharness.report.compare import config_differences, flatten, trusted
from flharness.report.stats import compare, t_half_width, welch_ci
from flharness.results import files
from flharness.results.cell_metrics import CellMetrics
from flharness.results.cell_record import CellRecord
from flharness.results.flags import Flag, FlagCode, FlagKind

GOLDEN = Path(__file__).parents[1] / "fixtures" / "golden"


def test_welch_ci_of_known_samples():
    # B − A = 3; each variance 1, n 3: se = √(2/3), Welch's df = 4, t(0.975, 4) = 2.7764
    lo, hi = welch_ci([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    half = 2.776445 * math.sqrt(2 / 3)
    assert lo == pytest.approx(3 - half, abs=1e-5) and hi == pytest.approx(3 + half, abs=1e-5)


def test_welch_ci_with_unequal_variances_and_sizes():
    # a: mean 10, variance 4/3 (n 4); b: mean 12, variance 18 (n 2): Welch–Satterthwaite df ≈ 1.07
    a, b = [9.0, 9.0, 11.0, 11.0], [9.0, 15.0]
    assert sum((x - 10) ** 2 for x in a) / 3 == pytest.approx(4 / 3)  # the input's own variance
    lo, hi = welch_ci(a, b)
    se = math.sqrt((4 / 3) / 4 + 18 / 2)
    df = se ** 4 / (((4 / 3) / 4) ** 2 / 3 + (18 / 2) ** 2 / 1)
    from scipy.stats import t
    assert (lo, hi) == pytest.approx((2 - t.ppf(0.975, df) * se, 2 + t.ppf(0.975, df) * se))
    assert lo < 0 < hi  # so wide with n 2 that it says nothing


def test_student_t_interval_of_a_mean():
    # [1, 2, 3]: sd 1, n 3, t(0.975, 2) = 4.3027; [5] alone has none
    assert t_half_width([1.0, 2.0, 3.0]) == pytest.approx(4.302653 / math.sqrt(3), abs=1e-5)
    assert t_half_width([5.0]) is None
    # 40 values: t(0.975, 39) = 2.0227, not the normal's 1.96
    assert t_half_width([0.0, 2.0] * 20) == pytest.approx(2.022691 * math.sqrt(40 / 39) / math.sqrt(40), abs=1e-5)


def test_one_repetition_gives_no_ci_and_says_so():
    d = compare([10.0], [5.0])
    assert d.ci is None and d.verdict == "n = 1: no CI" and d.delta == -5 and d.pct == -50


def test_verdicts():
    assert compare([10.0, 10.1, 9.9], [7.5, 7.6, 7.4]).verdict == "lower"
    assert compare([10.0, 10.1, 9.9], [12.5, 12.6, 12.4]).verdict == "higher"
    assert compare([10.0, 10.1, 9.9], [10.05, 10.0, 9.95]).verdict == "no change"
    # a difference the CI calls significant but below the practical margin is no change
    tight = compare([10.0, 10.001, 9.999], [10.1, 10.101, 10.099], margin=0.02)
    assert tight.ci and tight.ci[0] > 0 and tight.verdict == "no change"
    assert compare([5.0, 5.0], [5.0, 5.0]).ci == (0.0, 0.0)
    assert compare([], [1.0]).verdict == "no data"


def test_flatten_and_config_differences():
    assert flatten({"a": {"b": 1}, "c": [{"d": None}]}) == {"a.b": "1", "c[0].d": "–"}

    class Cell:
        def __init__(self, rate: str) -> None:
            self.record = type("R", (), {"config": type("C", (), {"model_dump": lambda _, **kw: {
                "bottleneck": {"up": {"rate": rate}}, "repetition": 9, "length": 6}})()})()

    diffs = config_differences([([Cell("20mbit")], [Cell("15mbit")]), ([Cell("20mbit")], [Cell("15mbit")])])
    assert diffs == [("bottleneck.up.rate", "20mbit", "15mbit", 2)]


def test_repetitions_whose_measurement_is_in_doubt_are_left_out():
    """A calibration flag or an impossible figure leaves the repetition out of the
    statistics; a result flag (a starved flow) does not."""
    record = files.read(CellRecord, GOLDEN / "cell.json")

    def cell(*flags: tuple[FlagKind, FlagCode]) -> CellResult:
        # texts that say nothing: the selection reads kinds, never words
        made = [Flag(kind=kind, code=code, text="calibration: impossible, a measurement error") for kind, code in flags]
        return CellResult("s", GOLDEN, record, CellMetrics.model_construct(flags=made, invalid=[]))

    starved = cell(("finding", "starved"))
    stolen = cell(("calibration", "cpu_stolen"))
    impossible = cell(("measurement_error", "goodput_over_capacity"))
    assert trusted([cell(), starved, stolen, impossible]) == [cell(), starved]
    assert stolen.mismeasured == stolen.flags and not starved.mismeasured


def test_a_compare_chart_names_every_side_it_draws():
    """The second run's repetitions of the first row were all left out (in doubt): its
    points in the second row are still named in the legend, after the baseline (issue 37)."""
    from flharness.report.compare import Row
    from flharness.report.compare_chart import figure
    from flharness.report.matching import Key
    from flharness.report.measures import MEASURES

    def row(cell: str, *values: tuple[float, ...]) -> Row:
        return Row(Key("s", (("cc", cell),)), MEASURES["goodput_mbit"], "flow 1 (cubic)", values, ())
    fig = figure([row("a", (9.0, 9.2), ()), row("b", (8.0,), (7.5, 7.7))], ["default", "vm"], "goodput")
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["default", "vm"]
