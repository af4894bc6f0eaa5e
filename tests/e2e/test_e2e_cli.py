"""fl's commands and options for real, on tiny cells (2 s tests at 4 Mbit/s) of a scenario
file the test writes and edits: `--only` with a match (a glob, then substrings), `fl list`
with every status (new, done, changed, interrupted, failed), a changed configuration
running its cell again, SIGTERM mid-cell, `--force`, a failed cell and exit status 1;
and `fl push` exiting non-zero on a broken link.

Oracles besides fl's records: the captures (a cell that ran again has a capture taken
after the earlier run ended; the failed cell's capture shows why it failed), tc's own
report of the qdisc in the teardown log, the test's own testbed ids and namespace inodes
(nothing left after SIGTERM), and the web server's access log.
"""
from __future__ import annotations

import json
import re
import shutil
import signal
import tempfile
from pathlib import Path

import pytest
from flrun import FlProcess, leftovers, needs_root_tools, run_fl
from resultlib import read_pcap
from test_e2e_interrupt import flows_running
from weblib import start_nginx, stop_nginx

from flharness.cells import expand
from flharness.scenario import load_scenario

pytestmark = [pytest.mark.e2e, needs_root_tools()]
SCENARIO = """\
# Tiny cells for tests/e2e/test_e2e_cli.py; the test edits preset qa between runs.
description: e2e test of fl's commands and options
test: tcp_1up
length: 2
lead: 2
step_size: 0.2
rate: 4mbit
qdiscs:
  qa: "pfifo limit {limit}"
  qb: "pfifo limit 30"
matrix:
  - {{cc: [cubic], qdisc: [qa]}}
  - {{cc: [reno], qdisc: [qb]}}
  # the server ignores pings: Flent's ping runner gets no reply, so the cell fails
  - {{cc: [reno], qdisc: [qb], sysctls: [{{value: {{srv: {{net.ipv4.icmp_echo_ignore_all: 1}}}}, label: noping}}]}}
"""
SRV = "10.71.2.1"


def listing(path: Path, results: Path) -> dict[str, tuple[str, str]]:
    """`fl list`: cell → (config hash, status)."""
    p = run_fl("list", str(path), "--results", str(results), timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    out = {}
    for line in p.stdout.splitlines():
        if m := re.match(r"^(\S+)\s+([0-9a-f]{16})\s+(\S+)", line):
            out[m.group(1)] = (m.group(2), m.group(3))
    return out


def record(root: Path, cell: str) -> dict:
    return json.loads((root / cell / "cell.json").read_text())


def capture_span(cell_dir: Path) -> tuple[float, float]:
    """First and last packet time of the cell's server capture."""
    pkts = read_pcap(cell_dir / "srv.pcap.xz")
    return pkts[0].ts, pkts[-1].ts


@pytest.fixture(scope="module")
def story(tmp_path_factory):
    """The sequence, with what the test saw at each step:
    A  `fl run --only '*cubic*'`: the cubic cell only;
       (preset qa edited: pfifo limit 30 → 20, so the cubic cell's configuration changes)
    B  `fl run --only cubic --only 'reno*0ms'`: cubic runs again, SIGTERM while reno's flows run;
    C  `fl run --force --only cubic --only noping`: cubic again though done, the failing cell."""
    tmp = tmp_path_factory.mktemp("cli")
    path, results = tmp / "cli.yml", tmp / "results"
    path.write_text(SCENARIO.format(limit=30))
    names = [c.name for c in expand(load_scenario(path), path)]
    (cubic,), (noping,) = ([n for n in names if key in n] for key in ("cubic", "noping"))
    (reno,) = set(names) - {cubic, noping}
    root = results / "default" / "cli"
    seen: dict = {"names": (cubic, reno, noping), "root": root, "lists": [listing(path, results)]}
    seen["A"] = run_fl("run", str(path), "--only", "*cubic*", "--results", str(results), timeout=300)
    seen["A_cells"] = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    seen["A_cubic"] = record(root, cubic)
    seen["A_span"] = capture_span(root / cubic)
    seen["A_teardown"] = (root / cubic / "teardown.log").read_text()
    seen["lists"].append(listing(path, results))
    path.write_text(SCENARIO.format(limit=20))
    seen["lists"].append(listing(path, results))
    b = FlProcess("run", str(path), "--only", "cubic", "--only", "reno*0ms", "--results", str(results))
    b.wait_for_line(f"cli/{reno} …", timeout=300)
    b.wait_until(lambda: flows_running(results, "cli", reno, 40_000), "reno's flows run")
    b.send_signal(signal.SIGTERM)
    seen["B_rc"], seen["B"] = b.finish(timeout=180), b
    seen["B_cubic"], seen["B_reno"] = record(root, cubic), record(root, reno)
    seen["B_span"] = capture_span(root / cubic)
    seen["B_teardown"] = (root / cubic / "teardown.log").read_text()
    seen["lists"].append(listing(path, results))
    seen["C"] = run_fl("run", str(path), "--force", "--only", "cubic", "--only", "noping", "--results", str(results),
                       timeout=300)
    seen["lists"].append(listing(path, results))
    return seen


def test_only_runs_the_cells_that_match(story):
    """A glob runs the one cell it matches (A); a substring and a glob run two of three (B);
    two substrings leave the third cell as it was (C)."""
    cubic, reno, noping = story["names"]
    a = story["A"]
    assert a.returncode == 0 and "1 ok, 0 failed" in a.stdout, a.stdout + a.stderr
    assert story["A_cells"] == [cubic]
    assert f"cli/{noping}" not in story["B"].output and f"cli/{reno}" in story["B"].output
    assert story["B_reno"]["status"] == "interrupted"  # C's --only cubic --only noping left it as B did
    assert record(story["root"], reno)["started"] == story["B_reno"]["started"]
    assert f"cli/{reno} …" not in story["C"].stdout


def test_list_shows_each_cells_status(story):
    """new before any run; done after it; changed once the scenario file changes the cell's
    configuration (with the new hash); interrupted after SIGTERM; failed after the failing
    cell ran; done again after a cell ran again."""
    cubic, reno, noping = story["names"]
    statuses = [{cell: status for cell, (_, status) in listed.items()} for listed in story["lists"]]
    assert statuses == [
        {cubic: "new", reno: "new", noping: "new"},
        {cubic: "done", reno: "new", noping: "new"},
        {cubic: "changed", reno: "new", noping: "new"},
        {cubic: "done", reno: "interrupted", noping: "new"},
        {cubic: "done", reno: "interrupted", noping: "failed"}], statuses
    hashes = [listed[cubic][0] for listed in story["lists"]]
    assert hashes[0] == hashes[1] == story["A_cubic"]["config_hash"] != hashes[2] == story["B_cubic"]["config_hash"]


def test_a_changed_configuration_runs_the_cell_again(story):
    """After the edit, the next run (no --force) runs the cubic cell again with the new
    qdisc: tc reports a 20-packet FIFO where the first run had 30, in a capture taken after
    the first run's ended."""
    assert "qdisc pfifo 10: parent 1:1 limit 30p" in story["A_teardown"]
    assert "qdisc pfifo 10: parent 1:1 limit 20p" in story["B_teardown"]
    assert story["B_span"][0] > story["A_span"][1]
    assert story["B_cubic"]["status"] == "ok" and story["B_cubic"]["started"] > story["A_cubic"]["ended"]


def test_sigterm_stops_the_run_and_leaves_nothing(story):
    """SIGTERM while reno's flows run: exit status 130, the cell recorded as interrupted,
    the cell completed before kept, nothing of the run's testbed left."""
    b = story["B"]
    assert story["B_rc"] == 130, b.output
    assert story["B_reno"]["status"] == "interrupted" and "SIGINT/SIGTERM" in story["B_reno"]["reason"]
    assert len(b.seen.ids) == 1 and len(b.seen.inodes) == 3, b.seen
    assert leftovers(b.seen, story["root"].parent.parent) == []


def test_force_runs_a_completed_cell_again(story):
    cubic, _, _ = story["names"]
    c = story["C"]
    assert f"cli/{cubic}" in c.stdout and " 0 already done" in c.stdout, c.stdout
    again = record(story["root"], cubic)
    assert again["status"] == "ok" and again["config_hash"] == story["B_cubic"]["config_hash"]
    assert capture_span(story["root"] / cubic)[0] > story["B_span"][1]  # a new capture


def test_a_failed_cell_makes_the_run_exit_1(story):
    """The cell whose server ignores pings fails (Flent's ping runner got no reply: its
    capture shows echo requests and not one reply), the run says so and exits 1."""
    _, _, noping = story["names"]
    c = story["C"]
    assert c.returncode == 1, c.stdout + c.stderr
    assert "1 ok, 1 failed" in c.stdout and f"failed      {noping}: 1 Flent runner(s) failed" in c.stdout, c.stdout
    rec = record(story["root"], noping)
    assert rec["status"] == "failed" and rec["checks"]["failed_runners"] == 1, rec
    icmp = [p for p in read_pcap(story["root"] / noping / "srv.pcap.xz") if p.proto == 1]
    assert sum(1 for p in icmp if p.flags == 8) > 10 and not [p for p in icmp if p.flags == 0]  # requests, no reply
    assert leftovers(c.seen, story["root"].parent.parent) == []


def _links(index: Path) -> list[str]:
    return re.findall(r'(?:href|src)="([^"#:]+)"', index.read_text())


def test_push_exits_non_zero_on_a_broken_link(behaviours_report, tmp_path):
    """`fl push` of a copy of the behaviours run to a directory served by nginx: all links
    answer; with one linked file removed from the copy it exits 1 and names exactly that
    link, which nginx's access log shows answered 404."""
    _, run = behaviours_report
    results = tmp_path / "results"
    shutil.copytree(run, results / "pub")
    www = Path(tempfile.mkdtemp(prefix="fl-www-"))  # nginx's workers drop root: outside pytest's 0700 tree
    www.chmod(0o755)
    nginx, url = start_nginx(tmp_path, www)
    try:
        p = run_fl("push", "--run", "pub", "--results", str(results), "--dest", str(www), "--url", url)
        assert p.returncode == 0 and "all links ok" in p.stdout, p.stdout + p.stderr
        victim = next(link for link in _links(results / "pub" / "index.html") if link.endswith("teardown.log"))
        (results / "pub" / victim).unlink()
        p = run_fl("push", "--run", "pub", "--results", str(results), "--dest", str(www), "--url", url)
        assert p.returncode == 1, p.stdout + p.stderr
        assert re.findall(r"^broken: (\S+)", p.stdout, re.M) == [f"{url}pub/{victim}"], p.stdout
        assert "1 broken link(s)" in p.stdout
        log = (tmp_path / "access.log").read_text()
        assert re.search(rf'"HEAD /pub/{re.escape(victim)} HTTP/1.1" 404 ', log), log[-2000:]
    finally:
        stop_nginx(nginx)
        shutil.rmtree(www)
