"""Findings files and the key-findings verdicts: the L4S Tests' findings as the shipped
scenarios state them, checked against the report's own published numbers; the errors a
bad `finding:` gives; the verdict rows on synthetic judgements."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from flharness.analysis.link import capacity
from flharness.cells import expand
from flharness.errors import ScenarioError
from flharness.report.collect import CellResult, ScenarioResult
from flharness.report.expect import Judgement, judge
from flharness.report.findings import FAILS, HOLDS, NOT_RUN, key_findings
from flharness.report.reproduction import matches
from flharness.results.cell_record import Coordinate
from flharness.scenario import load_scenario
from flharness.scenario.expectations import parse_expectation
from flharness.scenario.findings import load_findings
from flharness.scenario.reference import load_reference

SCENARIOS = Path(__file__).parents[2] / "scenarios"
L4S = load_findings("l4s-key-findings")


def coordinates(cell):
    """A cell's coordinates as its cell.json has them."""
    return {a: Coordinate(**c) for a, c in cell.coordinates().items()}


def stated(name: str) -> set[int]:
    return {e.finding for e in load_scenario(SCENARIOS / f"{name}.yml").expect if e.finding}


def test_the_nine_findings_and_the_scenarios_that_state_them():
    assert [f.id for f in L4S.findings] == list(range(1, 10)) and L4S.document.startswith("L4S Tests")
    named = {n for f in L4S.findings for n in f.scenarios}
    for f in L4S.findings:
        assert f.scenarios or f.note, f.id  # a finding no scenario studies says why
        for name in f.scenarios:
            assert f.id in stated(name), (f.id, name)
            assert load_scenario(SCENARIOS / f"{name}.yml").findings == "l4s-key-findings"
    for path in SCENARIOS.glob("*.yml"):  # and no scenario states a finding the file does not list for it
        assert all(path.stem in L4S.get(n).scenarios for n in stated(path.stem)), path.stem
    assert named == {"s1-rttfair", "s2-codel-rate-step", "s3-codel-variable-rate", "s5-tunnel", "s6-rfc3168",
                     "s8-rfc3168-second", "s9-tunnel-reordering", "s13-rfc3168-prague-second",
                     "video-induced-delay", "video-underutilisation"}


@pytest.mark.parametrize("name", ["s1-rttfair", "s6-rfc3168", "video-underutilisation"])
def test_the_reports_own_numbers_meet_the_statements_of_its_findings(name):
    """Each finding statement on a scenario with published values, judged on those values:
    fl's reading of a finding must hold for the report's own table."""
    path = SCENARIOS / f"{name}.yml"
    scenario, ref = load_scenario(path), load_reference(name)
    s = ScenarioResult(name, Path("/nonexistent"), scenario)
    for cell in expand(scenario, path):
        row = next((r for r in ref.rows if matches(lambda a, c=cell: c.coords[a].label if a in c.coords else None, r,
                                                    lambda a, c=cell: c.coords[a].variant_of if a in c.coords else None)),
                   None)
        if row is None or row.missing or "dss_mbit" not in row.published():
            continue
        dss = row.published()["dss_mbit"][0]
        record = SimpleNamespace(label=lambda a, c=cell: c.coords[a].label if a in c.coords else None, status="ok",
                                 reason="", cell=cell.name, config=cell.config, coordinates=coordinates(cell))
        metrics = SimpleNamespace(invalid=[], flags=[], flows=[SimpleNamespace(steady_mbit=x) for x in dss],
                                  capacity={"up": capacity(cell.config, "up", 0.0, cell.config.length)})
        s.cells.append(CellResult(name, Path("/nonexistent"), record, metrics))  # type: ignore[arg-type]
    judged = [j for j in judge(s) if j.expectation.finding]
    assert len(judged) >= {"s1-rttfair": 16, "s6-rfc3168": 48, "video-underutilisation": 2}[name]
    if name == "s1-rttfair":  # the FIFO's statement names its qdisc as written ({{ pfifo_limit }}): every rate's cells
        fifo = {j.cell for j in judged if j.expectation.finding == 4 and "pfifo" in j.cell}
        assert fifo == {f"cubic-vs-cubic-pfifo_{n}-{r}-{rtt}" for n, r in (("200", "10mbit"), ("1000", "50mbit"))
                        for rtt in ("80ms-20ms", "160ms-10ms")}, fifo
    missed = [f"{j.cell}: {j.expectation.text}: {j.detail}" for j in judged if not j.ok]
    assert not missed, missed


@pytest.mark.parametrize(("text", "key", "why"), [
    ("expect:\n  - {finding: 1, metric: jain, '>=': 0.9}\n", "expect[0].finding", "names no findings file"),
    ("findings: l4s-key-findings\nexpect:\n  - {metric: jain, '>=': 0.5}\n  - {finding: 12, metric: jain, '>=': 0.9}\n",
     "expect[1].finding", "12 is not a finding of"),
    ("findings: nosuch\n", "findings", "no file nosuch.yml"),
    ("findings: ../etc/passwd\n", "findings", "must be letters, digits"),
])
def test_a_bad_finding_names_the_file_and_key(scenario_file, text, key, why):
    path = scenario_file("test: tcp_1up\nrate: 10mbit\nqdisc: pfifo\ncc: cubic\n" + text)
    with pytest.raises(ScenarioError) as e:
        load_scenario(path)
    assert str(e.value).startswith(f"{path}: {key}: ") and why in str(e.value), str(e.value)
    with pytest.raises(ValueError, match="the number of a finding"):
        parse_expectation({"finding": "one", "metric": "jain", ">=": 0.5})


def test_the_verdict_of_each_finding_on_each_scenario():
    def scenario(name, *findings):
        expect = [parse_expectation({"finding": f, "metric": "jain", ">=": 0.5}) for f in findings]
        return SimpleNamespace(name=name, scenario=SimpleNamespace(findings="l4s-key-findings", expect=expect), cells=[])

    def j(name, cell, finding, ok):
        return Judgement(name, cell, parse_expectation({"finding": finding, "metric": "jain", ">=": 0.5}), ok, "jain = 0.4")

    run = SimpleNamespace(scenarios=[scenario("s6-rfc3168", 1), scenario("s1-rttfair", 3, 4)])
    judged = [j("s6-rfc3168", "a", 1, True), j("s6-rfc3168", "b", 1, True), j("s6-rfc3168", "c", 1, None),
              j("s1-rttfair", "a", 3, True), j("s1-rttfair", "b", 3, False), j("s1-rttfair", "c", 4, None)]
    (table,) = key_findings(run, judged)  # type: ignore[arg-type]
    got = {(r.finding.id, r.scenario): r for r in table.rows}
    assert table.known is not None and (got[1, "s6-rfc3168"].verdict, got[1, "s6-rfc3168"].cells) == (HOLDS, 2)
    assert got[1, "s6-rfc3168"].elsewhere == ["s8-rfc3168-second", "s13-rfc3168-prague-second"]  # named, no rows
    assert got[3, "s1-rttfair"].verdict == FAILS and got[3, "s1-rttfair"].detail.startswith("b: jain >= 0.5")
    assert got[4, "s1-rttfair"].verdict == NOT_RUN and got[4, "s1-rttfair"].detail == "no cell it selects was judged"
    assert sorted(got) == [(1, "s6-rfc3168"), (3, "s1-rttfair"), (4, "s1-rttfair")]  # only the run's scenarios
    absent = {f.id: names for f, names in table.absent}
    assert absent == {2: ["s5-tunnel"], 5: ["video-induced-delay"], 6: ["video-underutilisation"],
                      7: ["s2-codel-rate-step"], 8: ["s2-codel-rate-step", "s3-codel-variable-rate"],
                      9: ["s9-tunnel-reordering"]}
    assert got[3, "s1-rttfair"].judged == [("b", False), ("a", True)]  # misses first
    assert got[1, "s6-rfc3168"].judged == [("a", True), ("b", True)]  # not judged: not listed
    key = got[1, "s6-rfc3168"].key
    assert key is not None and key.published == [45.70, 1.94] and key.reproduced == [None] and key.cells == []
    assert got[3, "s1-rttfair"].key is not None and got[4, "s1-rttfair"].key is not None  # each on its scenario's row


def test_a_findings_key_number_is_the_runs_mean_over_the_cells_of_its_rule():
    """Finding 3's key: the report's D_SS of prague-vs-cubic through dualpi2 at 50 Mbit/s,
    10/10 ms, beside the mean of this run's repetitions of that cell, per flow; other cells,
    and a repetition without a valid result, do not count."""
    from flharness.report.findings import key_result
    path = SCENARIOS / "s1-rttfair.yml"
    scenario = load_scenario(path)
    s = ScenarioResult("s1-rttfair", Path("/nonexistent"), scenario)
    wanted = {"cc": "prague-vs-cubic", "qdisc": "dualpi2", "rate": "50mbit", "rtt": "10ms-10ms"}
    for cell in expand(scenario, path):
        for dss, valid in (([34.0, 13.0], True), ([36.0, 11.0], True), ([1.0, 1.0], False)):
            record = SimpleNamespace(label=lambda a, c=cell: c.coords[a].label if a in c.coords else None,
                                     coordinates=coordinates(cell),
                                     status="ok", reason="", cell=cell.name, config=cell.config)
            metrics = SimpleNamespace(invalid=[] if valid else ["no data"], flags=[],
                                      flows=[SimpleNamespace(steady_mbit=x) for x in dss])
            s.cells.append(CellResult("s1-rttfair", Path("/nonexistent"), record, metrics))  # type: ignore[arg-type]
            if not all(cell.coords[a].matches(v) for a, v in wanted.items()):
                break  # one repetition of every other cell
    got = key_result(L4S.get(3).key, s)
    assert got.published == [34.09, 13.04] and got.reproduced == [35.0, 12.0] and len(got.cells) == 2


def test_each_findings_section_links_to_its_heading_in_the_report():
    """The anchors of the report's own table of contents (its "Elaboration on Key Findings")."""
    anchors = ["unsafety-in-shared-rfc3168-queues", "tunneled-non-l4s-flows-not-protected-by-fq", "network-bias",
               "rtt-unfairness", "between-flow-induced-delay", "underutilization-with-bursty-traffic",
               "intra-flow-latency-spikes", "burst-intolerance", "dropped-packets-for-tunnels-with-replay-protection-enabled"]
    assert [L4S.section_url(f) for f in L4S.findings] == [f"https://github.com/heistp/l4s-tests#{a}" for a in anchors]


def _study_cells(name: str, dss_of) -> ScenarioResult:
    """The study's scenario NAME (scenarios/study/), each cell with D_SS per flow DSS_OF(cell)."""
    path = SCENARIOS / "study" / f"{name}.yml"
    scenario = load_scenario(path)
    s = ScenarioResult(name, Path("/nonexistent"), scenario)
    for cell in expand(scenario, path):
        record = SimpleNamespace(label=lambda a, c=cell: c.coords[a].label if a in c.coords else None,
                                 coordinates=coordinates(cell), status="ok", reason="", cell=cell.name, config=cell.config)
        metrics = SimpleNamespace(invalid=[], flags=[], flows=[SimpleNamespace(steady_mbit=x) for x in dss_of(cell)],
                                  capacity={"up": capacity(cell.config, "up", 0.0, cell.config.length)}, replay_drops=None)
        s.cells.append(CellResult(name, Path("/nonexistent"), record, metrics))  # type: ignore[arg-type]
    return s


def test_a_finding_is_judged_under_each_variant_of_its_qdisc():
    """The study runs s1 under both of dualpi2's step rules: finding 3 gets a verdict under
    each (here Prague ahead under the 2020 rule, behind under mainline's at 10 Mbit/s), each
    on its own variant's cells; finding 4 judges the FIFO's cells (no variant) under both;
    the key number is each variant's mean."""
    def dss(cell):
        prague_wins = cell.coords["qdisc"].label != "dualpi2(mainline)" or cell.coords["rate"].label == "50mbit"
        cap = 9.56 if cell.coords["rate"].label == "10mbit" else 47.82
        big, small = 0.7 * cap, 0.25 * cap
        prague_first = cell.coords["cc"].label == "prague-vs-cubic"
        if cell.coords["cc"].label == "prague-vs-prague":
            return [0.1 * cap, 0.85 * cap]  # the 80/20 and 160/10 ms pairs: the longer RTT starved
        if cell.coords["cc"].label == "cubic-vs-cubic":
            return [0.4 * cap, 0.55 * cap]
        return [big, small] if prague_first == prague_wins else [small, big]

    s = _study_cells("s1-rttfair", dss)
    run = SimpleNamespace(scenarios=[s])
    rows = {(r.finding.id, r.condition): r for t in key_findings(run, judge(s)) for r in t.rows}  # type: ignore[arg-type]
    assert {k for k in rows if k[0] in (3, 4)} == {(3, "dualpi2(2020)"), (3, "dualpi2(mainline)"),
                                                  (4, "dualpi2(2020)"), (4, "dualpi2(mainline)")}
    assert rows[3, "dualpi2(2020)"].verdict == HOLDS and rows[3, "dualpi2(mainline)"].verdict == FAILS
    assert "dualpi2_mainline-10mbit" in rows[3, "dualpi2(mainline)"].detail
    assert all("dualpi2_mainline" not in c for c, _ in rows[3, "dualpi2(2020)"].judged)
    for rule in ("dualpi2(2020)", "dualpi2(mainline)"):
        judged = [c for c, _ in rows[4, rule].judged]
        assert "cubic-vs-cubic-pfifo_1000-50mbit-80ms-20ms" in judged and rows[4, rule].verdict == HOLDS, judged
    key = rows[3, "dualpi2(2020)"].key  # its cell (50 Mbit/s, 10/10 ms) runs under the report's rule alone
    assert key is not None and len(key.cells) == 1 and key.reproduced == [pytest.approx(0.7 * 47.82), pytest.approx(0.25 * 47.82)]
    mainline = rows[3, "dualpi2(mainline)"].key
    assert mainline is not None and mainline.cells == [] and mainline.reproduced == [None]


def test_a_key_the_source_gives_in_words_says_them_beside_the_runs_number():
    """Findings 2, 5, 8 and 9 have no published number: their keys quote the report's words,
    and the run's mean stands beside them; a key with neither is refused."""
    from flharness.scenario.findings import KeyNumber
    for n in (2, 5, 8, 9):
        key = L4S.get(n).key
        assert key is not None and key.published is None and key.said, n
    with pytest.raises(ValueError, match="needs `published` or"):
        KeyNumber(scenario="s", cell={}, metric="jain", what="w")
