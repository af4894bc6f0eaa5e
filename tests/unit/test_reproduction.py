"""Reproduction reports: the shipped reference files against their scenarios, the verdicts
on synthetic metrics, and bad reference files (the real run: test_e2e_vm_l4s.py)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from flharness.cells import expand
from flharness.errors import ScenarioError
from flharness.report.collect import CellResult, ScenarioResult
from flharness.report.reproduction import beside, by_condition, counts, matches, reproduce, stated
from flharness.scenario import load_scenario
from flharness.scenario.reference import REFERENCE_DIR, Reference, Row, load_reference

SCENARIOS = Path(__file__).parents[2] / "scenarios"
SHIPPED = sorted(p.stem for p in REFERENCE_DIR.glob("*.yml"))


def test_ten_references_ship_and_their_scenarios_name_them():
    assert SHIPPED == ["geni-exp-module", "geni-tcp-lab", "pantheon-1mbit", "pantheon-schemes", "s1-rttfair", "s2-codel-rate-step",
                       "s5-tunnel", "s6-rfc3168", "s9-tunnel-reordering", "video-underutilisation"]
    for name in SHIPPED:
        assert load_scenario(SCENARIOS / f"{name}.yml").reference == name
    assert len(load_reference("s1-rttfair").rows) == 192  # the seed's fairness table, every row
    assert len(load_reference("s6-rfc3168").rows) == 24
    assert len(load_reference("s2-codel-rate-step").rows) == 2  # all the numbers the report prints for it
    assert len(load_reference("video-underutilisation").rows) == 8  # the report's goodput tables, one row a run
    assert len(load_reference("s9-tunnel-reordering").rows) == 11  # its Table 1, in words
    assert len(load_reference("pantheon-schemes").rows) == 15  # seed 000's schemes and seed 001's: every one
    assert all(r.says and r.shows and not r.published() for name in ("s5-tunnel", "s9-tunnel-reordering")
               for r in load_reference(name).rows)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_row_is_a_cell_of_its_scenario_with_one_value_per_flow(name):
    ref = load_reference(name)
    path = SCENARIOS / f"{ref.scenario}.yml"
    cells = expand(load_scenario(path), path)
    for i, row in enumerate(ref.rows):
        hits = [c for c in cells if matches(lambda a, c=c: c.coords[a].label if a in c.coords else None, row,
                                            lambda a, c=c: c.coords[a].variant_of if a in c.coords else None)]
        if row.missing:
            assert not hits, f"rows[{i}] says missing but matches {hits[0].name}"
            continue
        assert hits, f"rows[{i}] {row.cell} matches no cell of {ref.scenario}"
        flows = {len(c.config.flows) for c in hits}
        for metric, (published, _) in row.published().items():
            per_flow = metric not in ("jain", "ratio", "goodput_total_mbit", "utilisation", "queue_delay_p95_ms")
            assert len(published) == (flows.pop() if per_flow and len(flows) == 1 else len(published) if per_flow else 1)


def _scenario(swept: tuple[str, ...] = ("cc", "qdisc")) -> SimpleNamespace:
    """A scenario as the page reads it: the axes it sweeps, no variants."""
    return SimpleNamespace(swept_axes=lambda: list(swept), axes_list=lambda: [])


def _cell(labels: dict[str, str], dss: list[float] | None, status: str = "ok", reason: str = "") -> CellResult:
    record = SimpleNamespace(label=labels.get, status=status, reason=reason, cell="-".join(labels.values()))
    metrics = None if dss is None else SimpleNamespace(
        invalid=[], flags=[], jain=sum(dss) ** 2 / (len(dss) * sum(x * x for x in dss)), ratio=max(dss) / min(dss),
        flows=[SimpleNamespace(steady_mbit=x, scheme=None, shown_cc=None) for x in dss])
    return CellResult("s", Path("/nonexistent"), record, metrics)  # type: ignore[arg-type]


def test_verdicts_on_synthetic_metrics():
    ref = Reference(source={"document": "paper"}, scenario="s", tolerance={"dss_mbit": "10%", "jain": 0.02}, rows=[
        Row(cell={"cc": "cubic-vs-cubic", "qdisc": "fifo"}, dss_mbit=[5.0, 5.0], jain=1.0),
        Row(cell={"cc": "cubic-vs-prague", "qdisc": "fifo"}, dss_mbit=[3.0, 7.0]),
        Row(cell={"cc": "cubic-vs-cubic", "qdisc": "pie"}, jain=0.9),
        Row(cell={"cc": "vegas", "qdisc": "fifo"}, missing="no such CC in fl's scenario", jain=1.0),
    ])
    s = ScenarioResult("s", Path("/nonexistent"), _scenario())  # type: ignore[arg-type]
    s.cells = [  # two repetitions of the first row: their mean is compared
        _cell({"cc": "cubic-vs-cubic", "qdisc": "fifo"}, [5.2, 3.4]),
        _cell({"cc": "cubic-vs-cubic", "qdisc": "fifo"}, [5.4, 3.6]),
        _cell({"cc": "cubic-vs-prague", "qdisc": "fifo"}, None, "skipped", "kernel lacks tcp_prague (congestion control prague)"),
    ]
    lines = reproduce(s, ref)
    got = {(line.row, line.metric, line.series): line for line in lines}
    f1, f2 = got[("cc cubic-vs-cubic, qdisc fifo", "dss_mbit", "flow 1")], got[("cc cubic-vs-cubic, qdisc fifo", "dss_mbit", "flow 2")]
    assert (f1.reproduced, f1.n, f1.verdict) == (pytest.approx(5.3), 2, "agrees")  # 6 % off, tolerance 10 %
    assert (f2.reproduced, f2.verdict) == (pytest.approx(3.5), "differs") and f2.pct == pytest.approx(-30)
    jain = got[("cc cubic-vs-cubic, qdisc fifo", "jain", "")]
    assert jain.verdict == "differs" and jain.delta == pytest.approx(jain.reproduced - 1.0) and jain.delta < -0.02
    prague = got[("cc cubic-vs-prague, qdisc fifo", "dss_mbit", "flow 2")]
    assert prague.verdict == "not run" and "tcp_prague" in prague.why and prague.reproduced is None
    assert got[("cc cubic-vs-cubic, qdisc pie", "jain", "")].why == "no such cell in this run"
    assert got[("cc vegas, qdisc fifo", "jain", "")].verdict == "missing"
    assert counts(lines) == {"agrees": 1, "differs": 2, "not run": 3, "missing": 1}


def test_any_order_and_published_runs():
    row = Row(cell={"cc": "bbr"}, order="any", per_run=[{"dss_mbit": [1.0, 3.0]}, {"dss_mbit": [2.0, 4.0]}])
    assert row.published() == {"dss_mbit": ([1.5, 3.5], "mean of 2 published runs")}
    ref = Reference(source={}, scenario="s", tolerance={"dss_mbit": 0.1}, rows=[row])
    s = ScenarioResult("s", Path("/nonexistent"), _scenario())  # type: ignore[arg-type]
    s.cells = [_cell({"cc": "bbr"}, [3.5, 1.5])]  # fl's flows in the other order
    assert [line.verdict for line in reproduce(s, ref)] == ["agrees", "agrees"]


@pytest.mark.parametrize(("text", "key", "why"), [
    ("source: {}\nscenario: x\ntolerance: {jain: 5}\nrows:\n  - {cell: {cc: a}, fairness: 1}\n", "rows[0].fairness", "not a metric"),
    ("source: {}\nscenario: x\ntolerance: {jain: 5}\nrows:\n  - {cell: {cc: a}, dss_mbit: 1}\n", "rows[0].dss_mbit", "no tolerance"),
    ("source: {}\nscenario: x\ntolerance: {jain: 5 percent}\nrows: []\n", "tolerance", "'N%' or a number"),
    ("source: {}\nscenario: x\ntolerance: {}\nrows: []\nextra: 1\n", "extra", "Extra inputs"),
])
def test_a_bad_reference_file_names_itself_and_the_key(tmp_path, monkeypatch, text, key, why):
    monkeypatch.setattr("flharness.scenario.reference.REFERENCE_DIR", tmp_path)
    (tmp_path / "bad.yml").write_text(text)
    with pytest.raises(ScenarioError) as e:
        load_reference("bad")
    assert str(tmp_path / "bad.yml") in str(e.value) and key in str(e.value) and why in str(e.value)


def test_a_scenario_naming_no_reference_file_is_refused(scenario_file):
    path = scenario_file("test: tcp_1up\nrate: 10mbit\nqdisc: pfifo\ncc: cubic\nreference: nosuch\n")
    with pytest.raises(ScenarioError, match=r"reference: no file nosuch.yml .*available: geni-exp-module"):
        load_scenario(path)


def test_rows_stated_in_words_show_the_runs_means_or_why_not():
    ref = Reference(source={"document": "report"}, scenario="s", tolerance={}, rows=[
        Row(cell={"cc": "cubic-vs-cubic", "qdisc": "fifo"}, says="they share", shows=["dss_mbit", "jain"], note="Fig. 1"),
        Row(cell={"cc": "cubic-vs-cubic", "qdisc": "pie"}, says="they share too", shows=["dss_mbit"]),
    ])
    s = ScenarioResult("s", Path("/nonexistent"), _scenario())  # type: ignore[arg-type]
    s.cells = [_cell({"cc": "cubic-vs-cubic", "qdisc": "fifo"}, [5.0, 4.0]), _cell({"cc": "cubic-vs-cubic", "qdisc": "fifo"}, [6.0, 4.0])]
    for c in s.cells:
        for i, f in enumerate(c.metrics.flows, 1):  # type: ignore[union-attr]
            f.index, f.cc, f.shown_cc = i, "cubic", "cubic"
    fifo, pie = stated(s, ref)
    assert (fifo.n, fifo.note, fifo.why) == (2, "Fig. 1", "")
    assert fifo.measured[0].endswith("flow 1 (cubic) 5.5, flow 2 (cubic) 4") and fifo.measured[0].startswith("D_SS")
    assert fifo.measured[1].split(": ")[1] == f"{(sum([5.0, 4.0]) ** 2 / (2 * 41) + 100 / 104) / 2:.3g}"
    assert (pie.n, pie.measured, pie.why) == (0, [], "no such cell in this run")
    assert reproduce(s, ref) == []  # no published number, no verdict


def test_cells_no_row_names_are_set_beside_with_the_references_metrics():
    """Schemes a scenario runs beside the source's (pantheon-1mbit's QUIC Cubic): grouped
    by their labels on the rows' axes, the reference's metrics measured, or why not."""
    ref = Reference(source={}, scenario="s", tolerance={"dss_mbit": "10%"}, rows=[
        Row(cell={"cc": "cubic", "qdisc": "fifo"}, dss_mbit=[5.0])])
    s = ScenarioResult("s", Path("/nonexistent"), _scenario())  # type: ignore[arg-type]
    s.cells = [_cell({"cc": "cubic", "qdisc": "fifo"}, [5.0]), _cell({"cc": "quic_cubic", "qdisc": "fifo"}, [4.0]),
               _cell({"cc": "quic_cubic", "qdisc": "fifo"}, [6.0]),
               _cell({"cc": "vivace", "qdisc": "fifo"}, None, "skipped", "missing programs: vivace_sender")]
    for c in s.cells:
        for i, f in enumerate(c.metrics.flows if c.metrics else [], 1):
            f.index, f.cc = i, str(c.record.label("cc"))
            f.scheme = "QUIC Cubic (ngtcp2 0.12.1)" if f.cc == "quic_cubic" else None
            f.shown_cc = f.scheme or f.cc  # as FlowMetrics.shown_cc
    quic, vivace = beside(s, ref)
    assert (quic.row, quic.n, quic.measured) == ("cc quic_cubic, qdisc fifo", 2,
                                                 ["D_SS (Mbit/s): flow 1 (QUIC Cubic (ngtcp2 0.12.1)) 5"])
    assert (vivace.row, vivace.n, vivace.measured, vivace.why) == ("cc vivace, qdisc fifo", 0, [], "missing programs: vivace_sender")


@pytest.mark.parametrize(("row", "error"), [
    ({"says": "x", "shows": ["goodput_of_the_moon"]}, "none of the metrics"),
    ({"shows": ["dss_mbit"]}, "lacks"),
])
def test_a_stated_row_names_known_metrics_beside_words(row, error):
    with pytest.raises(ValueError, match=error):
        Row(cell={"cc": "cubic"}, **row)


def test_a_rows_cells_under_two_variants_are_compared_apart():
    """The study's s1 runs each dualpi2 row of the report under the 2020 step rule and
    mainline's: the row (qdisc dualpi2) takes both, each compared on its own, with a count
    per condition for the page and the index."""
    path = SCENARIOS / "study" / "s1-rttfair.yml"
    scenario = load_scenario(path)
    s = ScenarioResult("s1-rttfair", Path("/nonexistent"), scenario)
    published = {r.key: r.published()["dss_mbit"][0] for r in load_reference("s1-rttfair").rows if "dss_mbit" in r.published()}
    for cell in expand(scenario, path):
        labels = {a: cell.coords[a].label for a in ("cc", "qdisc", "rate", "rtt")}
        key = ", ".join(f"{a} {'dualpi2' if a == 'qdisc' and v.startswith('dualpi2') else v}" for a, v in labels.items())
        dss = published.get(key, [1.0, 1.0])
        off = 1.0 if labels["qdisc"] == "dualpi2(2020)" else 2.0  # mainline's twice the report's
        s.cells.append(_cell(labels, [x * off for x in dss]))
    ref = load_reference("s1-rttfair")
    lines = [line for line in reproduce(s, ref)
             if line.row.startswith("cc cubic-vs-prague, qdisc dualpi2, rate 10mbit") and line.metric == "dss_mbit"]
    assert {line.condition for line in lines} == {"qdisc dualpi2(2020)", "qdisc dualpi2(mainline)"}
    assert all(line.verdict == ("agrees" if "2020" in line.condition else "differs") for line in lines)
    tally = by_condition(reproduce(s, ref))
    assert tally["qdisc dualpi2(2020)"] == {"agrees": 3 * 28}  # 24 rows at 10 Mbit/s, 4 at 50: D_SS per flow and Jain's index
    assert tally["qdisc dualpi2(mainline)"] == {"agrees": 24, "differs": 2 * 24}  # Jain's index is the same at twice the rates


def test_verdict_counts_read_as_a_sentence():
    from flharness.report.index import counted_verdicts
    assert counted_verdicts({"agrees": 2, "differs": 1, "not run": 2}) == "2 agree, 1 differs, 2 not run"
    assert counted_verdicts({"agrees": 1, "differs": 3}) == "1 agrees, 3 differ"
