"""The seed figures on the golden fixture (tests/fixtures/golden/): series.npz, which
cache.compute writes beside metrics.json, against the fixture's own captures decoded here
with dpkt; the one-way delay CDF and time series, and the goodput box plot built from it."""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import matplotlib.colors as mcolors
import numpy as np
import pytest
from resultlib import arrivals, read_pcap
from test_golden import GOLDEN, data_segments, delivered, flow, flows_window, t0

from flharness.analysis import cache
from flharness.analysis.metrics import Settings
from flharness.report import boxes, owd_plot, plots
from flharness.report.collect import CellResult
from flharness.results import cell_folder, files
from flharness.results.cell_metrics import CellMetrics
from flharness.results.cell_record import CellRecord
from flharness.results.cell_series import read_series


@pytest.fixture(scope="module")
def cell(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("figures") / "cell"
    shutil.copytree(GOLDEN, d)
    cache.compute(d, Settings())
    return d


@pytest.fixture(scope="module")
def result(cell) -> CellResult:
    return CellResult("golden", cell, files.read(CellRecord, cell / "cell.json"), files.read(CellMetrics, cell / "metrics.json"))


@pytest.fixture(scope="module")
def flent(cell, result) -> dict:
    with gzip.open(cell / f"{result.name}.flent.gz", "rt") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def expected(cell, flent) -> dict[int, list[tuple[float, float]]]:
    """Per flow, every data segment the client sent in the test and the server received:
    (departure on Flent's axis, one-way delay in ms), matched by sequence number and IP id."""
    rec = json.loads((cell / "cell.json").read_text())
    start, end = flows_window(flent, rec)
    caps = {h: read_pcap(cell / f"{h}.pcap.xz") for h in ("cli", "srv")}
    out = {}
    for i, f in enumerate(rec["config"]["flows"], 1):
        sent = [p for p in data_segments(flow(caps["cli"], f["tos"])) if start <= p.ts <= end]
        arrived = arrivals(sent, data_segments(flow(caps["srv"], f["tos"])))
        out[i] = sorted((p.ts - t0(flent), (t - p.ts) * 1e3) for p, t in arrived)
    return out


def test_series_hold_every_matched_packet_and_the_goodput_per_interval(cell, result, flent, expected):
    series = read_series(cell / cell_folder.SERIES)
    assert sorted(series.flows) == [1, 2]
    rec = json.loads((cell / "cell.json").read_text())
    assert series.interval_s == pytest.approx(max(0.1, 20 * 1514 * 8 / rec["config"]["bottleneck"]["up"]["rate_bps"]))
    start, end = flows_window(flent, rec)
    for i, s in series.flows.items():
        want = np.array(expected[i])
        assert len(s.owd_t) == len(s.owd_ms) == len(want) == result.metrics.flows[i - 1].owd_ms.n > 100
        assert np.all(np.diff(s.owd_t) >= 0)  # in departure order
        assert np.allclose(s.owd_t, want[:, 0], atol=1e-4) and np.allclose(s.owd_ms, want[:, 1], atol=1e-3)
        # the intervals tile the flow's time in the test; their goodput adds up to what arrived
        assert s.goodput_t[0] == pytest.approx(start - t0(flent), abs=1e-3) and np.allclose(np.diff(s.goodput_t), series.interval_s, atol=1e-4)
        widths = np.diff(np.append(s.goodput_t, end - t0(flent)))
        conn = flow(read_pcap(cell / "srv.pcap.xz"), rec["config"]["flows"][i - 1]["tos"])
        assert float((s.goodput_mbit * widths).sum()) * 1e6 / 8 == pytest.approx(delivered(conn, start, end), rel=1e-4)


def test_the_cdf_is_monotone_and_covers_every_matched_packet(cell, expected):
    series = read_series(cell / cell_folder.SERIES)
    for i, s in series.flows.items():
        x, y = owd_plot.cdf(s.owd_ms)
        assert len(x) == len(expected[i]) and np.all(np.diff(x) >= 0) and np.all(np.diff(y) > 0)
        assert y[-1] == 1 and y[0] == pytest.approx(1 / len(x))
        assert x[0] == pytest.approx(min(d for _, d in expected[i]), abs=1e-3)


def test_the_owd_figure_draws_every_packet_per_flow(cell, result):
    series = read_series(cell / cell_folder.SERIES)
    labels = {f.index: f"{f.index}: {f.label}" for f in result.metrics.flows}
    fig = owd_plot.figure(series.flows, labels, 15.0, "golden")
    cdf_ax, time_ax = fig.axes
    assert [len(line.get_xdata()) for line in time_ax.lines] == [len(series.flows[i].owd_t) for i in (1, 2)]
    assert [len(line.get_xdata()) for line in cdf_ax.lines] == [len(series.flows[i].owd_ms) for i in (1, 2)]
    legend = [t.get_text() for t in cdf_ax.get_legend().get_texts()]
    assert legend == [f"{labels[i]} (n={len(series.flows[i].owd_ms)})" for i in (1, 2)]
    assert cdf_ax.get_ylim() == (0, 1) and time_ax.get_xlim() == (0, 15.0)


def test_the_box_plot_has_a_box_per_flow_from_its_goodput(cell, result, tmp_path):
    data, interval = boxes.samples([result])
    (scheme, flows), = data.items()
    assert scheme == "cubic-vs-reno, pfifo_20"
    series = read_series(cell / cell_folder.SERIES)
    assert [label for label, _ in flows] == [f.label for f in result.metrics.flows]
    assert all(np.array_equal(v, series.flows[i].goodput_mbit) for i, (_, v) in enumerate(flows, 1))
    capacity = 4 * 1448 / 1514
    fig = boxes.figure(data, capacity, interval, "golden")
    ax = fig.axes[0]
    patches = [p for p in ax.patches]
    assert len(patches) == 2 and [mcolors.to_hex(p.get_facecolor(), keep_alpha=False) for p in patches] == \
        [mcolors.to_hex(c) for c in boxes.COLOURS[:2]]
    assert ax.get_xlim()[0] == 0 and ax.get_xlim()[1] >= capacity
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"cubic-vs-reno, pfifo_20 · {label}" for label, _ in flows]
    medians = [line.get_xdata()[0] for line in ax.lines if line.get_gid() == "median"]
    assert medians == pytest.approx([float(np.median(v)) for _, v in flows])
    boxes.draw(data, capacity, interval, "golden", tmp_path / "box.svg")
    assert (tmp_path / "box.svg").stat().st_size > 1000


@pytest.mark.parametrize(("cell_name", "plot"), [("download-rate-schedule", "totals"), ("bidirectional", "totals"),
                                                  ("ecn-rewrites", "tcp_delivery_with_rtt")])
def test_each_cells_flent_plot_is_one_flent_draws_for_its_test(tmp_path, cell_name, plot):
    """Flent has its socket-statistics plot for upload tests only; asked for it on a
    download it writes an empty file and exits 0: fl picks its bandwidth-and-ping plot
    there, and takes an empty figure for a failure (removed, never linked)."""
    source = Path(__file__).parents[1] / "fixtures" / "corpus" / cell_name
    d = tmp_path / cell_name
    shutil.copytree(source, d)
    record = files.read(CellRecord, d / "cell.json")
    cell = CellResult("s", d, record, cache.compute(d, Settings()))
    assert plots.plot_name(cell) == plot
    assert plots.draw_cell_plots([SimpleNamespace(cells=[cell])]) == {"drawn": 1, "current": 0, "failed": 0}
    assert plots.plot_path(cell).stat().st_size > 10_000
    argv = plots.flent_argv(cell, plots.Bounds(20, 10, 100), d / "asked.svg")
    argv[argv.index("-p") + 1] = "tcp_delivery_with_rtt" if plot == "totals" else "no_such_plot"
    with pytest.raises(RuntimeError):
        plots._run(argv, cell)
    assert not (d / "asked.svg").exists() and (d / "plot.log").is_file()
