"""`fl compare`'s matching of cells across runs and within a run (report/matching.py), on
records made from the golden cell's (the real runs: tests/e2e/test_e2e_compare.py)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from flharness.analysis import cache
from flharness.analysis.metrics import Settings
from flharness.errors import FlError
from flharness.report import compare_page
from flharness.report.collect import CellResult, RunResult, ScenarioResult
from flharness.report.compare import compare_sides, summary_lines
from flharness.report.matching import axis_sides, check_axes, match, run_sides
from flharness.results import files
from flharness.results.cell_metrics import CellMetrics
from flharness.results.cell_record import CellRecord, Coordinate
from flharness.results.run_record import RunRecord

GOLDEN = Path(__file__).parents[1] / "fixtures" / "golden"
RECORD = files.read(CellRecord, GOLDEN / "cell.json")
FIXED = {"qdisc": "pfifo_100", "rtt": "0ms", "test": "tcp_2up"}


def cell(scenario: str, swept: list[str], rep: int = 1, repeated: bool = False, **labels: str) -> CellResult:
    coords = {**FIXED, **labels, "repetition": str(rep)}
    name = "-".join(coords[a] for a in ("cc", "qdisc", "rate", "rtt")) + (f"-r{rep}" if repeated else "")
    record = RECORD.model_copy(update={
        "scenario": scenario, "cell": name, "swept": swept,
        "coordinates": {a: Coordinate(label=v, value=v) for a, v in coords.items()},
        "config": RECORD.config.model_copy(update={"repetition": rep})})
    return CellResult(scenario, GOLDEN, record)


def run(name: str, *cells: CellResult) -> RunResult:
    scenarios = {}
    for c in cells:
        scenarios.setdefault(c.scenario, ScenarioResult(c.scenario, GOLDEN, None, [])).cells.append(c)  # type: ignore[arg-type]
    return RunResult(name, GOLDEN, RunRecord(run=name), list(scenarios.values()))


def two_ccs(rate: str, reps: int = 2) -> list[CellResult]:
    return [cell("s", ["cc"], rep=r, repeated=True, cc=cc, rate=rate) for cc in ("cubic", "reno") for r in range(1, reps + 1)]


def test_runs_differing_in_a_fixed_setting_match_on_the_swept_axes():
    """rate 10mbit in A, 20mbit in B, cc swept in both: the cells (named for their rates)
    match by cc, and the rate is what is compared."""
    sides = run_sides([run("a", *two_ccs("10mbit")), run("b", *two_ccs("20mbit"))])
    cmp = compare_sides(sides, matching := match(sides))
    assert matching.axes == {"s": ["cc"]}
    assert [k.cell for k in cmp.matched] == ["cubic", "reno"] and cmp.unmatched == []
    assert all(len(group) == 2 for group in sides[1].groups.values())  # the repetitions pooled
    assert cmp.compared == {"b": [("rate", "10mbit", "20mbit")]} and cmp.coordinates == []


def test_n_runs_each_against_the_baseline():
    sides = run_sides([run(n, *two_ccs(r)) for n, r in (("a", "10mbit"), ("b", "15mbit"), ("c", "20mbit"))])
    cmp = compare_sides(sides, match(sides))
    assert cmp.title() == "a → b, c" and len(cmp.matched) == 2
    assert cmp.compared == {"b": [("rate", "10mbit", "15mbit")], "c": [("rate", "10mbit", "20mbit")]}


def test_an_axis_one_run_sweeps_is_a_key_axis_for_both():
    """A sweeps rate (10, 20), B fixes it at 10: B's cells match A's 10mbit ones; A's
    20mbit cells are not matched, and say where they are."""
    a = run("a", *[cell("s", ["cc", "rate"], cc=cc, rate=r) for cc in ("cubic", "reno") for r in ("10mbit", "20mbit")])
    b = run("b", *[cell("s", ["cc"], cc=cc, rate="10mbit") for cc in ("cubic", "reno")])
    sides = run_sides([a, b])
    cmp = compare_sides(sides, match(sides))
    assert [k.cell for k in cmp.matched] == ["cubic-10mbit", "reno-10mbit"]
    assert [(k.cell, names) for k, names in cmp.unmatched] == [("cubic-20mbit", ["a"]), ("reno-20mbit", ["a"])]
    assert cmp.compared == {"b": []}


def test_ignored_and_added_axes():
    a, b = run("a", *two_ccs("10mbit")), run("b", *two_ccs("20mbit"))
    sides = run_sides([a, b])
    assert match(sides, extra=["rate"]).axes == {"s": ["cc", "rate"]}
    assert not compare_sides(sides, match(sides, extra=["rate"])).matched  # 10mbit ≠ 20mbit: nothing in common
    with pytest.raises(FlError, match=r"a: cells cubic-pfifo_100-10mbit-0ms and reno-pfifo_100-10mbit-0ms of s "
                                      r"fall on one key \(no key axis\); they differ in cc: add --match cc"):
        match(run_sides([a, b]), ignore=["cc"])
    with pytest.raises(FlError, match=r"--match: no axis 'speed' \(axes: cc, qdisc"):
        check_axes(["speed"], "--match")


def test_one_axis_within_a_run():
    """--by qdisc: the pfifo and bfifo cells of one run, matched by cc; --baseline picks
    the value the others are compared with."""
    cells = [cell("s", ["cc", "qdisc"], cc=cc, qdisc=q, rate="10mbit") for q in ("pfifo_100", "bfifo_150k")
             for cc in ("cubic", "reno")]
    r = run("r", *cells)
    sides = axis_sides(r, "qdisc", None)
    assert [s.name for s in sides] == ["qdisc=pfifo_100", "qdisc=bfifo_150k"]
    cmp = compare_sides(sides, match(sides, by="qdisc"))
    assert cmp.matching.axes == {"s": ["cc"]} and len(cmp.matched) == 2 and cmp.provenance == []
    assert cmp.compared == {"qdisc=bfifo_150k": [("qdisc", "pfifo_100", "bfifo_150k")]}
    assert cmp.title() == "qdisc in r: pfifo_100 → bfifo_150k"
    assert [s.name for s in axis_sides(r, "qdisc", "bfifo_150k")] == ["qdisc=bfifo_150k", "qdisc=pfifo_100"]
    with pytest.raises(FlError, match=r"--baseline 'fq_codel': r's qdisc takes pfifo_100, bfifo_150k"):
        axis_sides(r, "qdisc", "fq_codel")
    with pytest.raises(FlError, match=r"--by rate: r does not sweep rate \(it sweeps: cc, qdisc\)"):
        axis_sides(r, "rate", None)


def test_runs_of_one_name_are_refused():
    with pytest.raises(FlError, match="two runs have one name"):
        run_sides([run("a", *two_ccs("10mbit")), run("a", *two_ccs("20mbit"))])


@pytest.fixture(scope="module")
def golden_metrics(tmp_path_factory) -> CellMetrics:
    """The golden cell's metrics (two flows: cubic and reno), computed from its files."""
    d = tmp_path_factory.mktemp("golden") / "cell"
    shutil.copytree(GOLDEN, d)
    return cache.compute(d, Settings())


def scaled(c: CellResult, metrics: CellMetrics, scale: float) -> CellResult:
    """C with the golden metrics, every flow's goodput times SCALE."""
    flows = [f.model_copy(update={"mean_mbit": f.mean_mbit * scale}) for f in metrics.flows]
    c.metrics = metrics.model_copy(update={"flows": flows, "flags": [], "invalid": []})
    return c


def test_rows_hold_each_sides_repetitions_and_the_page_has_a_line_per_side(golden_metrics, tmp_path):
    """Goodput per repetition (×1.00, ×1.01, ×1.02 of the golden cell's) in a; twice that in
    b; the same as a's in c: b's rows are higher by 100 % (its CI above 0), c's no change;
    the page has a line per side in the table and a colour per side in the charts."""
    def side(name: str, rate: str, factor: float) -> RunResult:
        cells = two_ccs(rate, reps=3)
        return run(name, *[scaled(c, golden_metrics, factor * (1 + 0.01 * (c.record.config.repetition - 1))) for c in cells])
    sides = run_sides([side("a", "10mbit", 1.0), side("b", "20mbit", 2.0), side("c", "10mbit", 1.0)])
    cmp = compare_sides(sides, match(sides))
    goodput = [r for r in cmp.rows if r.measure.name == "goodput_mbit" and r.key.cell == "cubic"]
    assert [r.series for r in goodput] == ["flow 1 (cubic)", "flow 2 (reno)"]
    r = goodput[0]
    assert [len(v) for v in r.values] == [3, 3, 3] and r.values[1][0] == pytest.approx(2 * r.values[0][0])
    (b, c) = r.diffs
    assert b.verdict == "higher" and b.pct == pytest.approx(100) and b.ci[0] > 0
    assert c.verdict == "no change" and c.delta == pytest.approx(0, abs=1e-9)
    lines = summary_lines(cmp)
    assert lines[0] == "a → b, c: 2 cells matched" and "  compared: b: rate 10mbit → 20mbit" in lines
    assert "  compared: c: nothing on the axes" in lines
    assert any(ln.startswith("  goodput: b: 4 higher; c: 4 no change") for ln in lines), lines
    page = compare_page.write(cmp, tmp_path / "page")
    table = [ln for ln in (page / "README.md").read_text().splitlines() if "| goodput (Mbit/s) |" in ln]
    assert len(table) == 2 * 2 * 3 and [ln.split("|")[4].strip() for ln in table[:3]] == ["a", "b", "c"], table
    assert table[0].rstrip().endswith("| – | – | – | baseline |") and "| **higher** |" in table[1], table
    chart = (page / "charts" / "s_goodput_mbit.svg").read_text()
    assert all(f"<!-- {name} -->" in chart for name in ("a", "b", "c"))  # the legend: one entry per side
