"""The Pantheon-style per-scheme table (report/tables.py): one value per run, then mean ±
95 % CI over runs; a cell that pairs different CCs gives a row per scheme."""
from __future__ import annotations

import math
import textwrap
from pathlib import Path

from flharness.cells import expand
from flharness.report.collect import CellResult, ScenarioResult
from flharness.report.tables import per_cc_table
from flharness.results.cell_metrics import CellMetrics, FlowMetrics, OneWayDelay, Percentiles
from flharness.results.cell_record import CellRecord
from flharness.scenario import load_scenario

HOST = {"kind": "host", "testbed": "netns", "inventory": "/repo/inventory.ini", "clock": "real"}


def flow(index: int, cc: str, mbit: float, owd_p95: float, sent: int, lost: int) -> FlowMetrics:
    return FlowMetrics(index=index, series=f"TCP upload::{index}", direction="up", cc=cc, rtt_ms=20, start_s=0,
                       label=cc, mean_mbit=mbit, goodput_source="receiver", netperf_mbit=mbit, first_data_s=5,
                       steady_mbit=mbit, tcp_rtt_ms=Percentiles(median=owd_p95, p95=2 * owd_p95, p99=2 * owd_p95, n=50),
                       socket_samples=50,
                       owd_ms=OneWayDelay(median=owd_p95, p95=owd_p95, p99=owd_p95, n=sent - lost, sent=sent,
                                          loss=lost / sent))


def scenario(tmp_path: Path) -> ScenarioResult:
    path = tmp_path / "pairs.yml"
    path.write_text(textwrap.dedent("""\
        test: tcp_2up
        rate: 20mbit
        qdisc: dualpi2
        repetitions: 2
        matrix: {cc: [dctcp-vs-cubic]}
        """))
    sc = load_scenario(path)
    out = ScenarioResult("pairs", tmp_path, sc)
    runs = {1: [flow(1, "dctcp", 2.0, 11.0, 1000, 10), flow(2, "cubic", 17.0, 30.0, 9000, 0)],
            2: [flow(1, "dctcp", 4.0, 13.0, 3000, 0), flow(2, "cubic", 15.0, 34.0, 8000, 80)]}
    for cell in expand(sc, path):
        rec = CellRecord(scenario="pairs", cell=cell.name, config_hash=cell.config_hash, status="ok",
                         coordinates=cell.coordinates(), config=cell.config, backend=HOST)
        out.cells.append(CellResult("pairs", tmp_path, rec, CellMetrics(cell=cell.name, flows=runs[cell.repetition])))
    return out


def test_a_mixed_pair_gives_a_row_per_scheme_with_statistics_over_runs(tmp_path):
    table = per_cc_table(scenario(tmp_path))
    assert table["axes"][-1] == "flow cc"
    rows = {r["axes"][-1]: r for r in table["rows"]}
    assert set(rows) == {"dctcp", "cubic"}
    dctcp, cubic = rows["dctcp"], rows["cubic"]
    assert dctcp["n"] == 2 and dctcp["throughput"].n == 2
    assert math.isclose(dctcp["throughput"].mean, 3.0) and math.isclose(cubic["throughput"].mean, 16.0)
    assert math.isclose(dctcp["owd_p95"].mean, 12.0) and math.isclose(cubic["owd_p95"].mean, 32.0)
    # two runs: t(1) = 12.706 × sd / √2; sd of (11, 13) is √2
    assert math.isclose(dctcp["owd_p95"].ci, 12.706205, rel_tol=1e-6)
    # loss per run over the scheme's data packets: 1 % and 0 %; then their mean
    assert math.isclose(dctcp["loss"].mean, 0.5) and math.isclose(cubic["loss"].mean, 0.5)


def test_an_axis_swept_in_one_sub_matrix_only_leaves_the_others_unlabelled(tmp_path):
    """prague-differential's cells: module_params swept by one sub-matrix, not the other;
    the table sorts and shows both (it raised comparing None with a label)."""
    path = tmp_path / "subs.yml"
    path.write_text(textwrap.dedent("""\
        test: tcp_2up
        rate: 20mbit
        qdisc: pfifo
        matrix:
          - {cc: [cubic-vs-reno]}
          - {cc: [cubic-vs-reno], module_params: [{tcp_cubic: {beta: 800}}]}
        """))
    sc = load_scenario(path)
    out = ScenarioResult("subs", tmp_path, sc)
    for cell in expand(sc, path):
        rec = CellRecord(scenario="subs", cell=cell.name, config_hash=cell.config_hash, status="ok",
                         coordinates=cell.coordinates(), config=cell.config, backend=HOST)
        flows = [flow(1, "cubic", 10.0, 20.0, 1000, 0), flow(2, "reno", 8.0, 20.0, 1000, 0)]
        out.cells.append(CellResult("subs", tmp_path, rec, CellMetrics(cell=cell.name, flows=flows)))
    table = per_cc_table(out)
    assert [r["axes"][:2] for r in table["rows"]] == [["cubic-vs-reno", None]] * 2 + [["cubic-vs-reno", "beta800"]] * 2
