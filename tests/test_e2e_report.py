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
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import REPO, listening, needs_root_tools, run_fl, wait_for
from resultlib import LEAD_IN, payload_received_mbit

from flharness.run.flent_data import load as load_flent
from flharness.run.flent_data import t0 as flent_t0

pytestmark = [pytest.mark.e2e, needs_root_tools()]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def report(demo_run):
    _, results = demo_run
    p = run_fl("plot", "--run", "e2e", "--results", str(results))
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout, results / "e2e"


def cell_dirs(run: Path) -> list[Path]:
    return sorted(p.parent for p in (run / "demo").glob("*/cell.json"))


def test_every_item_is_produced(report):
    out, run = report
    m = re.search(r"12 cells \(0 invalid, 0 flagged\); plots: (\d+) drawn, (\d+) current, 0 failed", out)
    assert m and int(m.group(1)) + int(m.group(2)) == 12, out  # another test may have plotted first
    for d in cell_dirs(run):
        assert (d / "metrics.json").is_file()
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
        window_vals = [v for t, v in samples if end - window < t < end]
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
        start, end = t0 + LEAD_IN, t0 + LEAD_IN + rec["config"]["length"]
        received = payload_received_mbit(d / "srv.pcap.xz", start, end)
        assert abs(goodput - received) <= 0.02 * received, (d.name, goodput, received)


def test_tables_agree_with_the_flent_data(report):
    _, run = report
    d = next(d for d in cell_dirs(run) if d.name == "cubic-vs-reno-pfifo_206-10mbit-0ms")
    metrics = json.loads((d / "metrics.json").read_text())
    d1, d2 = _by_hand(d, metrics["steady_window_s"])
    jain = (d1 + d2) ** 2 / (2 * (d1 * d1 + d2 * d2))
    assert metrics["steady_window_s"] == 13  # 2/3 of the 20 s test
    assert abs(metrics["flows"][0]["steady_mbit"] - d1) < 1e-9 and abs(metrics["jain"] - jain) < 1e-9
    row = next(line for line in (run / "README.md").read_text().splitlines()
               if line.startswith("| [pfifo_206](") and f"/{d.name}/" in line)  # the fairness table
    assert f"| {d1:.2f} |" in row and f"| {d2:.2f} |" in row and f"| {jain:.3f} |" in row, row


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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_nginx(tmp_path: Path, www: Path) -> tuple[subprocess.Popen, str]:
    """A real nginx on a free loopback port serving WWW (its own config in TMP_PATH)."""
    port = _free_port()
    conf = tmp_path / "nginx.conf"
    conf.write_text(f"""
pid {tmp_path}/nginx.pid; error_log {tmp_path}/error.log; daemon off;
events {{}}
http {{ include /etc/nginx/mime.types; access_log {tmp_path}/access.log;
  client_body_temp_path {tmp_path}; proxy_temp_path {tmp_path}; fastcgi_temp_path {tmp_path};
  uwsgi_temp_path {tmp_path}; scgi_temp_path {tmp_path};
  server {{ listen 127.0.0.1:{port}; root {www}; }} }}
""")
    proc = subprocess.Popen([shutil.which("nginx") or "/usr/sbin/nginx", "-c", str(conf), "-p", str(tmp_path)])

    try:
        wait_for(lambda: listening("127.0.0.1", port), f"nginx listens on port {port}", timeout=10)
    except AssertionError:
        stop_nginx(proc)
        raise
    return proc, f"http://127.0.0.1:{port}/"


def stop_nginx(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGQUIT)  # graceful stop of this nginx, by its PID
    proc.wait(timeout=10)


@pytest.fixture
def nginx(tmp_path):
    if shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists():
        pytest.skip("needs nginx (./install.sh)")
    # nginx's workers drop root: serve from a world-readable folder outside pytest's 0700 tree
    www = Path(tempfile.mkdtemp(prefix="fl-www-"))
    www.chmod(0o755)
    proc, url = start_nginx(tmp_path, www)
    yield www, url
    stop_nginx(proc)
    shutil.rmtree(www)


PROBE = """<!DOCTYPE html><html><body><pre id="out">waiting</pre>
<iframe id="f" src="%s" width="1200" height="800"></iframe>
<script>
document.getElementById('f').onload = function () {
  setTimeout(function () {
    var d = document.getElementById('f').contentDocument, imgs = d.querySelectorAll('img');
    var bad = Array.prototype.filter.call(imgs, function (i) { return !(i.complete && i.naturalWidth > 0); });
    document.getElementById('out').textContent = JSON.stringify(
      {tables: d.querySelectorAll('table').length, images: imgs.length, broken: bad.map(function (i) { return i.src; })});
  }, 2000);
};
</script></body></html>"""


def test_push_to_nginx_and_render_in_chromium(report, nginx, tmp_path):
    _, run = report
    www, url = nginx
    p = run_fl("push", "--run", "e2e", "--results", str(run.parent), "--dest", str(www), "--url", url)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "all links ok" in p.stdout
    if CHROMIUM is None:
        pytest.skip("needs chromium (./install.sh)")
    (www / "probe.html").write_text(PROBE % "e2e/index.html")
    chrome = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + str(tmp_path / "chrome")]
    dom = subprocess.run(chrome + ["--virtual-time-budget=10000", "--dump-dom", url + "probe.html"],
                         capture_output=True, text=True, timeout=120).stdout
    result = json.loads(dom.split('<pre id="out">')[1].split("</pre>")[0])
    assert result["tables"] >= 3 and result["images"] >= 3 and result["broken"] == [], result
    shot = tmp_path / "index.png"
    subprocess.run(chrome + ["--window-size=1400,3000", f"--screenshot={shot}", url + "e2e/index.html"],
                   capture_output=True, timeout=120)
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")


def test_push_reports_broken_links(report, nginx):
    from flharness.report.push import check_links
    _, run = report
    www, url = nginx
    assert run_fl("push", "--run", "e2e", "--results", str(run.parent), "--dest", str(www)).returncode == 0
    victim = next((www / "e2e" / "demo").glob("*/teardown.log"))
    victim.unlink()
    broken = check_links(url + "e2e/index.html")
    assert [b[0] for b in broken] == [url + str(victim.relative_to(www))], broken
