"""The shipped geni-tcp-lab scenario (8 s tests) end to end on this machine's kernel.

Cells this kernel can run (no added delay or loss, drop-tail) run for real, among them
10 CUBIC flows against an unresponsive 20 Mbit/s UDP flow; the others are skipped with
the kernel's reason (the VM suite runs netem/sfq cells). Checks come from the results.
"""
from __future__ import annotations

import json

import pytest
from conftest import REPO, needs_root_tools, run_fl
from resultlib import udp_received_mbit

from flharness.capabilities import probe_for
from flharness.cells import expand
from flharness.run.flent_data import load as load_flent
from flharness.scenario import load_scenario

pytestmark = [pytest.mark.e2e, needs_root_tools()]
GENI = REPO / "tests" / "scenarios" / "geni-short.yml"
RATE = 100e6


@pytest.fixture(scope="module")
def geni(tmp_path_factory):
    results = tmp_path_factory.mktemp("geni")
    p = run_fl("run", str(GENI), "--results", str(results))
    assert p.returncode == 0, p.stdout + p.stderr
    return results / "default" / "geni-short"


def record(root, cell):
    return json.loads((root / cell / "cell.json").read_text())


def test_runnable_cells_ran_and_the_rest_say_why(geni):
    cells = expand(load_scenario(GENI), GENI)
    caps = probe_for(cells)
    for c in cells:
        rec = record(geni, c.name)
        why = caps.unsupported(c)
        assert (rec["status"], rec["reason"] or None) == (("ok", None) if why is None else ("skipped", why)), c.name
    assert sum(caps.unsupported(c) is None for c in cells) >= 3


def test_reno_and_cubic_fill_the_link(geni):
    for cc in ("reno", "cubic"):
        cell = f"{cc}-droptail-100mbit-0ms-tcp_1up-noudp"
        data = load_flent(geni / cell / f"{cell}.flent.gz")
        goodput = data["metadata"]["SERIES_META"]["TCP upload"]["MEAN_VALUE"] * 1e6
        assert goodput >= 0.9 * RATE, (cc, goodput)


def test_udp_flow_competes_with_ten_tcp_flows(geni):
    cell = "cubic-droptail-100mbit-0ms-tcp_nup-10flows-udp20mbit"
    data = load_flent(geni / cell / f"{cell}.flent.gz")
    meta = data["metadata"]["SERIES_META"]
    tcp = [meta[f"TCP upload::{i}"]["MEAN_VALUE"] for i in range(1, 11)]
    assert all(t > 0 for t in tcp)
    udp = udp_received_mbit(geni / cell)  # what arrived of the 20 Mbit/s sent
    assert 15 <= udp <= 21, udp
    assert 0.85 * RATE <= (sum(tcp) + udp) * 1e6 <= 1.01 * RATE, (sum(tcp), udp)
    assert record(geni, cell)["config"]["udp"] == "20mbit"
