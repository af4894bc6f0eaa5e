"""Scenario schema, matrix expansion, naming and hashing (no system access)."""
from pathlib import Path

import pytest

from flharness.cells import FLOW_DSCPS, expand
from flharness.errors import ScenarioError
from flharness.scenario import load_scenario

BASE = """
test: tcp_2up
length: 20
matrix:
  rate: [10mbit, 50mbit]
  qdisc: [pfifo limit 1000, fq_codel]
  cc: [cubic-vs-cubic, [cubic, prague]]
  rtt: [20ms, [80ms, 20ms]]
"""


def cells_of(path: Path):
    return expand(load_scenario(path), path)


def test_cross_product_and_names(scenario_file):
    cells = cells_of(scenario_file(BASE))
    assert len(cells) == 2 * 2 * 2 * 2
    names = {c.name for c in cells}
    assert "cubic-vs-prague-pfifo_1000-50mbit-80ms-20ms" in names
    assert "cubic-vs-cubic-fq_codel-10mbit-20ms" in names
    assert len(names) == len(cells)


def test_cell_coordinates_are_typed(scenario_file):
    cell = next(c for c in cells_of(scenario_file(BASE)) if c.name == "cubic-vs-prague-pfifo_1000-50mbit-80ms-20ms")
    up = cell.config.bottleneck.up
    assert [f.cc for f in cell.config.flows] == ["cubic", "prague"]
    assert [f.rtt_ms for f in cell.config.flows] == [80, 20]
    assert up.rate_bps == 50e6 and up.qdisc == "pfifo limit 1000"
    assert not up.self_shaping
    coords = cell.coordinates()
    assert coords["rate"]["value"]["up_bps"] == 50e6
    assert coords["cc"]["value"] == ["cubic", "prague"]
    # per-flow RTTs need flows told apart: each flow gets its own unassigned DSCP
    assert [f.tos for f in cell.config.flows] == [FLOW_DSCPS[0] << 2, FLOW_DSCPS[1] << 2] == [0x4C, 0x8C]


def test_same_rtt_flows_are_unmarked(scenario_file):
    cell = next(c for c in cells_of(scenario_file(BASE)) if c.name.endswith("-20ms") and "80ms" not in c.name)
    assert all(f.tos is None for f in cell.config.flows)


def test_hash_is_stable_and_config_sensitive(scenario_file, tmp_path):
    a = {c.name: c.config_hash for c in cells_of(scenario_file(BASE, "a.yml"))}
    # comments, key order, the description and the file name do not change a cell's hash
    b = {c.name: c.config_hash for c in cells_of(scenario_file(
        "description: other words\n# a comment\n" + BASE, "b.yml"))}
    assert a == b
    c = {c.name: c.config_hash for c in cells_of(scenario_file(BASE.replace("length: 20", "length: 30"), "c.yml"))}
    assert set(c) == set(a) and all(c[n] != a[n] for n in a)


def test_derived_qdisc_value(scenario_file):
    cells = cells_of(scenario_file("""
        test: tcp_1up
        cc: cubic
        qdisc: "pfifo limit {{ packets('250ms') }}"
        matrix:
          rate: [10mbit, 50mbit, {up: 1mbit, down: 10mbit}]
    """))
    by = {c.coords["rate"].label: c for c in cells}
    assert by["10mbit"].config.bottleneck.up.qdisc == "pfifo limit 206"   # 10e6*0.25/8/1514
    assert by["50mbit"].config.bottleneck.up.qdisc == "pfifo limit 1032"
    asym = by["1mbit-10mbit"].config.bottleneck
    assert asym.up.words[-1] == "21" and asym.down.words[-1] == "206"
    assert by["1mbit-10mbit"].name == "cubic-pfifo_21-pfifo_206-1mbit-10mbit-0ms"


def test_vars_presets_and_labels(scenario_file):
    cells = cells_of(scenario_file("""
        test: tcp_2up
        cc: [cubic, reno]
        qdiscs:
          fifo_1q: {value: "pfifo limit {{ pfifo_limit }}", label: "pfifo(sized)"}
        matrix:
          rate:
            - {value: 10mbit, vars: {pfifo_limit: 200}}
            - {value: 50mbit, vars: {pfifo_limit: 1000}}
          qdisc: [fifo_1q, {value: cake bandwidth 50mbit, label: cake}]
    """))
    by = {c.name: c for c in cells}
    assert by["cubic-vs-reno-pfifo_sized-10mbit-0ms"].config.bottleneck.up.qdisc == "pfifo limit 200"
    assert by["cubic-vs-reno-pfifo_sized-50mbit-0ms"].config.bottleneck.up.qdisc == "pfifo limit 1000"
    assert by["cubic-vs-reno-cake-10mbit-0ms"].config.bottleneck.up.self_shaping


def test_include_exclude(scenario_file):
    text = BASE + """
exclude:
  - {qdisc: fq_codel, rate: 10mbit}
include:
  - {rtt: 20ms}
  - {cc: cubic-vs-prague, rate: [50mbit]}
"""
    names = {c.name for c in cells_of(scenario_file(text))}
    assert "cubic-vs-cubic-fq_codel-10mbit-20ms" not in names
    assert "cubic-vs-cubic-fq_codel-50mbit-20ms" in names
    assert "cubic-vs-prague-pfifo_1000-50mbit-80ms-20ms" in names
    assert "cubic-vs-cubic-pfifo_1000-10mbit-80ms-20ms" not in names
    assert len(names) == 4 + 1 + 1 + 2  # rtt 20ms minus excluded, plus prague at 50mbit/80-20


def test_repetitions_and_other_axes_in_names(scenario_file):
    cells = cells_of(scenario_file("""
        test: tcp_1up
        rate: 10mbit
        qdisc: pfifo
        repetitions: 3
        matrix:
          cc: [cubic, bbr]
          length: [10, 20s]
    """))
    assert len(cells) == 12
    assert {c.name for c in cells} >= {"cubic-pfifo-10mbit-0ms-10s-r1", "bbr-pfifo-10mbit-0ms-20s-r3"}
    assert len({c.config_hash for c in cells}) == 12


def test_extends_merges_and_overrides(scenario_file):
    scenario_file("""
        test: tcp_2up
        length: 60
        qdisc: fq_codel
        matrix:
          rate: [10mbit, 50mbit]
          cc: [cubic-vs-cubic]
    """, "common.yml")
    child = scenario_file("""
        extends: common.yml
        rate: 20mbit
        matrix:
          qdisc: [fq_codel, pfifo]
    """, "child.yml")
    s = load_scenario(child)
    assert s.name == "child" and s.length.value == 60
    assert [c.name for c in expand(s, child)] == ["cubic-vs-cubic-fq_codel-20mbit-0ms",
                                                  "cubic-vs-cubic-pfifo-20mbit-0ms"]


def test_tcp_nup_flows(scenario_file):
    cells = cells_of(scenario_file("""
        test: tcp_nup
        flows: 10
        rate: 100mbit
        qdisc: pfifo
        cc: reno
    """))
    assert len(cells[0].config.flows) == 10 and cells[0].config.flows[9].direction == "up"


def test_rrul_be_has_eight_flows_both_ways(scenario_file):
    cell = cells_of(scenario_file("test: rrul_be\nrate: 10mbit\nqdisc: fq_codel\ncc: cubic\n"))[0]
    assert [f.direction for f in cell.config.flows] == ["up"] * 4 + ["down"] * 4


def test_same_name_for_different_configs_is_an_error(scenario_file):
    path = scenario_file("""
        test: tcp_1up
        rate: 10mbit
        cc: cubic
        matrix:
          qdisc: [{value: fq_codel, label: aqm}, {value: pie, label: aqm}]
    """)
    with pytest.raises(ScenarioError, match=r"same name|repeats"):
        cells_of(path)
