"""`fl plot` and `fl push` on a real run of the demo scenario.

Checks: every item is produced (metrics, Flent plots, charts, dataset, summary, index);
the tables agree with the Flent data (Jain's index and a D_SS recomputed here from the
raw socket samples); a second `fl plot` draws nothing; editing the template changes the
index; `fl push` to a directory served by a real nginx, every link answers 200, and
headless Chromium renders the tables and images (screenshot kept in the test's tmp).
"""
from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest
from flrun import REPO, needs_root_tools, run_fl
from resultlib import beyond_load, doubts, lead_in, payload_received_mbit
from weblib import render_in_chromium

from flharness.analysis.flent_data import load as load_flent
from flharness.analysis.flent_data import t0 as flent_t0

pytestmark = [pytest.mark.e2e, pytest.mark.alone, needs_root_tools()]  # compares the demo run's cells: a quiet machine


@pytest.fixture(scope="module")
def report(demo_run):
    results = demo_run.results
    p = run_fl("plot", "--run", "e2e", "--results", str(results))
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout, results / "e2e"


def cell_dirs(run: Path) -> list[Path]:
    return sorted(p.parent for p in (run / "demo").glob("*/cell.json"))


def test_every_item_is_produced(report):
    out, run = report
    m = re.search(r"12 cells \(0 invalid, (\d+) flagged, 0 unreadable\); plots: (\d+) drawn, (\d+) current, 0 failed", out)
    assert m and int(m.group(2)) + int(m.group(3)) == 12, out  # another test may have plotted first
    flags = {d.name: json.loads((d / "metrics.json").read_text())["flags"] for d in cell_dirs(run)}
    assert int(m.group(1)) == sum(bool(f) for f in flags.values()), (out, flags)
    assert not any(beyond_load(f) for f in flags.values()), flags  # only the machine's load (steal, busy cores), if any
    for d in cell_dirs(run):
        assert (d / f"{d.name}_tcp_delivery_with_rtt.svg").read_text().lstrip().startswith("<?xml")
        assert (d / f"{d.name}_queue.svg").read_text().lstrip().startswith("<?xml")
    m = re.search(r"queue plots: (\d+) drawn, (\d+) current", out)
    assert m and int(m.group(1)) + int(m.group(2)) == 12, out
    charts = sorted(p.name for p in (run / "demo" / "charts").glob("*.svg"))
    delay = [c for c in charts if c.startswith("demo_throughput_delay_")]  # one per rate × qdisc
    assert len(delay) == 4 and "demo_cc_qdisc_10mbit.svg" in charts, charts
    rows = list(csv.DictReader((run / "dataset.csv").open()))
    assert len(rows) == 24 and {"axis_qdisc", "axis_rate", "steady_mbit", "jain", "received_ce", "queue_delay_p95_ms"} <= set(rows[0])
    # the FIFOs hold 250 ms at the link rate (rounded up to a packet, or a byte)
    assert all(0 <= float(r["queue_delay_p95_ms"]) <= 250 * 1.01 + 1.3 for r in rows), rows
    summary = json.loads((run / "summary.json").read_text())
    assert summary["scenarios"]["demo"]["by_status"] == {"ok": 12}
    readme = (run / "README.md").read_text()
    assert "### Fairness" in readme and "| qdisc | rate | CC1 (RTT) |" in readme
    assert (run / "index.html").read_text().count("<table>") >= 3


def _by_hand(d: Path, window: float) -> list[float]:
    """D_SS per flow from the raw samples: mean delivery rate over WINDOW s ending 1 s
    before the flow's last socket sample."""
    data = load_flent(d / f"{d.name}.flent.gz")
    out = []
    for i in (1, 2):
        samples = [(s["t"], s["tcp_delivery_rate"]) for s in data["raw_values"][f"TCP upload::{i}"]
                   if s.get("tcp_delivery_rate")]
        end = samples[-1][0] - 1
        window_vals = [v for t, v in samples if end - window - 0.05 <= t <= end + 0.05]  # a sample on a bound is in
        out.append(sum(window_vals) / len(window_vals))
    return out


def test_goodput_is_possible_and_what_the_server_received(report):
    """Every demo cell's goodput is at most the link's payload capacity (rate × 1448/1514:
    HTB counts 1514-byte frames that carry 1448 bytes of TCP payload), and within 2 % of
    the payload the server's capture received in the same window."""
    _, run = report
    for d in cell_dirs(run):
        rec = json.loads((d / "cell.json").read_text())
        m = json.loads((d / "metrics.json").read_text())
        capacity = rec["config"]["bottleneck"]["up"]["rate_bps"] * 1448 / 1514 / 1e6
        goodput = sum(f["mean_mbit"] for f in m["flows"])
        assert goodput <= capacity * 1.001 and m["utilisation"]["up"] <= 1.001, (d.name, goodput, capacity)
        assert all(f["goodput_source"].startswith("receiver") for f in m["flows"])
        data = load_flent(d / f"{d.name}.flent.gz")
        t0 = flent_t0(data)
        start = t0 + lead_in(data)
        end = start + rec["config"]["length"]
        received = payload_received_mbit(d / "srv.pcap.xz", start, end)
        assert abs(goodput - received) <= 0.02 * received, (d.name, goodput, received)


def test_tables_agree_with_the_flent_data(report):
    _, run = report
    d = next(d for d in cell_dirs(run) if d.name == "cubic-vs-reno-pfifo_206-10mbit-0ms")
    metrics = json.loads((d / "metrics.json").read_text())
    d1, d2 = _by_hand(d, metrics["steady_window_s"])
    jain = (d1 + d2) ** 2 / (2 * (d1 * d1 + d2 * d2))
    assert metrics["steady_window_s"] == 7  # 2/3 of the 10 s test
    assert abs(metrics["flows"][0]["steady_mbit"] - d1) < 1e-9 and abs(metrics["jain"] - jain) < 1e-9
    row = next(line for line in (run / "README.md").read_text().splitlines()
               if line.startswith("| [pfifo_206](") and f"/{d.name}/" in line)  # the fairness table
    assert f"| {d1:.2f} |" in row and f"| {d2:.2f} |" in row and f"| {jain:.3f} |" in row, row
    # the link's payload capacity (the physics: 10 Mbit/s × 1448/1514) and the share of it used
    assert f"| {10 * 1448 / 1514:.2f} | {100 * metrics['utilisation']['up']:.1f} | 1 |" in row, row
    assert metrics["capacity"]["up"] == {"mean_mbit": pytest.approx(10 * 1448 / 1514), "peak_mbit": pytest.approx(10 * 1448 / 1514)}


def test_second_plot_does_no_work(report):
    _, run = report
    p = run_fl("plot", "--run", "e2e", "--results", str(run.parent))
    assert p.returncode == 0 and "plots: 0 drawn, 12 current" in p.stdout, p.stdout


def test_editing_the_template_changes_the_index(report, tmp_path):
    _, run = report
    shutil.copytree(REPO / "templates", tmp_path / "templates")
    text = (REPO / "README.md.j2").read_text() + "\n## Notes added by the user\n\n{{ scenarios | length }} scenario(s).\n"
    (tmp_path / "README.md.j2").write_text(text)
    p = run_fl("plot", "--run", "e2e", "--results", str(run.parent), "--template-dir", str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "## Notes added by the user\n\n1 scenario(s)." in (run / "README.md").read_text()
    assert "<h2>Notes added by the user</h2>" in (run / "index.html").read_text()
    run_fl("plot", "--run", "e2e", "--results", str(run.parent))  # back to the shipped template


def test_push_to_nginx_and_render_in_chromium(report, nginx, tmp_path):
    _, run = report
    www, url = nginx
    p = run_fl("push", "--run", "e2e", "--results", str(run.parent), "--dest", str(www), "--url", url)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "all links ok" in p.stdout
    result = render_in_chromium(www, url, "e2e/index.html", tmp_path)
    assert result["tables"] >= 3 and result["images"] >= 3 and result["broken"] == [], result
    assert result["overlaps"] == [], result  # 1280 px wide: no thumbnail over a link, wide tables scroll


def test_compare_by_qdisc_within_the_demo_run(demo_run, report, nginx, tmp_path):
    """`fl compare e2e --by qdisc --baseline pfifo_206`: the demo's bfifo cells against its
    pfifo ones (both FIFOs 250 ms at the cell's rate, so their labels are rendered per
    rate: one value each), matched by cc and rate: 6 cells, one repetition each (no CI).
    The qdisc is what is compared; the page renders with nothing overlapping."""
    _, run = report
    p = run_fl("compare", "e2e", "--by", "qdisc", "--baseline", "pfifo_206", "--results", str(run.parent))
    assert p.returncode == 0, p.stdout + p.stderr
    head = re.search(r"^qdisc in e2e: (pfifo_\S+) → (bfifo_\S+): 6 cells matched$", p.stdout, re.M)
    assert head and set(head.group(1).split("/")) == {"pfifo_206", "pfifo_1032"}, p.stdout
    compared = re.search(r"^  compared: qdisc=(\S+): qdisc (\S+) → (\S+)$", p.stdout, re.M)
    assert compared and compared.group(1) == head.group(2), p.stdout
    assert (set(compared.group(2).split("/")), set(compared.group(3).split("/"))) == \
        (set(head.group(1).split("/")), set(head.group(2).split("/"))), p.stdout
    page = run.parent / "compare-e2e-by-qdisc"
    text = (page / "README.md").read_text()
    assert "The cells of e2e that differ only in **qdisc**" in text and "(demo: cc, rate)" in text, text
    goodput = [ln for ln in text.splitlines() if "| goodput (Mbit/s) |" in ln]
    # A cell fl doubts (the machine's load) is left out: its side has "no data", and a pair
    # with both sides left out no line at all.
    both, some = _trusted(run)
    flags = [f for d in cell_dirs(run) for f in json.loads((d / "metrics.json").read_text())["flags"]]
    if not some and demo_run.steal.explains(flags, "every pfifo/bfifo pair in doubt: no chart to draw"):
        return
    assert len(goodput) == 2 * 2 * some and sum("| n = 1: no CI |" in ln for ln in goodput) == 2 * both, (both, some, goodput)
    www, url = nginx
    assert run_fl("push", "--run", page.name, "--results", str(run.parent), "--dest", str(www)).returncode == 0
    result = render_in_chromium(www, url, f"{page.name}/index.html", tmp_path)
    assert result["images"] >= 3 and result["broken"] == [] and result["overlaps"] == [], result


def _trusted(run: Path) -> tuple[int, int]:
    """The demo's (cc, rate) pairs (a pfifo cell, a bfifo one): how many of them fl doubts
    neither cell of, and how many it does not doubt some cell of."""
    trusted: dict[tuple[str, str], list[bool]] = {}
    for d in cell_dirs(run):
        coords = json.loads((d / "cell.json").read_text())["coordinates"]
        ok = not doubts(json.loads((d / "metrics.json").read_text())["flags"])
        trusted.setdefault((coords["cc"]["label"], coords["rate"]["label"]), []).append(ok)
    assert len(trusted) == 6 and all(len(v) == 2 for v in trusted.values()), trusted
    return sum(all(v) for v in trusted.values()), sum(any(v) for v in trusted.values())


def test_push_reports_broken_links(report, nginx):
    from flharness.report.push import check_links
    _, run = report
    www, url = nginx
    assert run_fl("push", "--run", "e2e", "--results", str(run.parent), "--dest", str(www)).returncode == 0
    victim = next((www / "e2e" / "demo").glob("*/teardown.log"))
    victim.unlink()
    broken = check_links(url + "e2e/index.html")
    assert [b[0] for b in broken] == [url + str(victim.relative_to(www))], broken
