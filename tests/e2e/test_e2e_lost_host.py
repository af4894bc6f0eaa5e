"""A host of an ssh testbed lost mid-run, for real (namespaces with an sshd each, as
tests/lib/sshbed.py builds them): while the first cell's flows run, every process of the server
dies (its sshd, netserver, irtt, tcpdump). Back 20 s later: that cell fails, naming the
host, and the run goes on once the testbed is built again. Staying away (past its --host-wait): the run stops
in one line naming it, the other hosts are restored; once it answers, `fl clean` restores
it too, and the run resumes. Each test reads the hosts back before and after."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from flrun import REPO, FlProcess, needs_root_tools, run_fl
from sshbed import HOSTS, host_state, needs_sshd, sh

pytestmark = [pytest.mark.e2e, needs_root_tools(), needs_sshd]
SCENARIO = str(REPO / "tests" / "scenarios" / "ssh-lost.yml")
FIRST = "cubic-vs-cubic-pfifo_200-20mbit-0ms"
STATE_DIR = Path("/run/fl/testbeds")


def state(ns: dict[str, str]) -> dict[str, dict[str, str]]:
    """Each host as fl may have changed it: addresses, routes, links, offloads, the sysctl
    the scenario sets, qdiscs (but the noqueue a veth gets once up), nftables tables."""
    return {h: {**host_state(ns[h]), "tcp_ecn": sh("sysctl", "-n", "net.ipv4.tcp_ecn", ns=ns[h]),
                "qdiscs": "".join(q for q in sh("tc", "qdisc", "show", ns=ns[h]).splitlines(True)
                                  if not q.startswith("qdisc noqueue")),  # a link's own, once it was up
                "nft": sh("nft", "list", "tables", ns=ns[h])}
            for h in HOSTS}


def same(now: dict[str, dict[str, str]], before: dict[str, dict[str, str]], hosts: tuple[str, ...] = HOSTS) -> None:
    for h in hosts:
        assert {k: v for k, v in now[h].items() if v != before[h][k]} == {}, (h, before[h])


def lose_the_server(fl: FlProcess, ns: dict[str, str], tmp_path: Path) -> None:
    """Once the first cell's flows run (its server capture past 300 kB), kill every process
    in the server's namespace."""
    fl.wait_for_line(f"ssh-lost/{FIRST} …", timeout=300)

    def flowing() -> bool:
        return any(p.stat().st_size > 300_000 for tid in fl.seen.ids for p in Path(f"/run/fl/{tid}/srv").glob("*/srv.pcap"))
    fl.wait_until(flowing, "the first cell's flows run")
    for pid in sh("ip", "netns", "pids", ns["srv"]).split():
        subprocess.run(["kill", "-KILL", pid], check=False)


def sshd_again(ns: dict[str, str], tmp_path: Path) -> subprocess.Popen[bytes]:
    """The server's sshd started again (the namespaces' removal stops it)."""
    cfg = next(tmp_path.glob("sshd-*-srv.conf"))
    return subprocess.Popen(["ip", "netns", "exec", ns["srv"], "/usr/sbin/sshd", "-D", "-e", "-f", str(cfg)],
                            stderr=subprocess.DEVNULL)


def statuses(results: Path) -> dict[str, str]:
    return {p.parent.name: json.loads(p.read_text())["status"] for p in (results / "default" / "ssh-lost").glob("*/cell.json")}


def test_a_host_lost_mid_cell_and_back_costs_that_cell_only(hosts, tmp_path):
    ns, inventory = hosts
    before = state(ns)
    results = tmp_path / "results"
    fl = FlProcess("run", SCENARIO, "--inventory", str(inventory), "--results", str(results))
    lose_the_server(fl, ns, tmp_path)
    time.sleep(20)
    sshd_again(ns, tmp_path)
    assert fl.finish(timeout=600) == 1, fl.output  # a cell failed
    assert "srv could not be reached over ssh; waiting up to 60 s for it" in fl.output, fl.output
    cells = statuses(results)
    assert cells.pop(FIRST) == "failed" and set(cells.values()) == {"ok"} and len(cells) == 2, fl.output
    reason = json.loads((results / "default" / "ssh-lost" / FIRST / "cell.json").read_text())["reason"]
    assert reason.startswith("srv could not be reached over ssh: ssh: connect to host"), reason
    same(state(ns), before)
    assert not [tid for tid in fl.seen.ids if (STATE_DIR / f"{tid}.json").exists()]


def test_a_host_that_stays_away_stops_the_run_in_one_line_and_fl_clean_restores_it(hosts, tmp_path):
    ns, inventory = hosts
    before = state(ns)
    results = tmp_path / "results"
    fl = FlProcess("run", SCENARIO, "--inventory", str(inventory), "--results", str(results), "--host-wait", "15")
    lose_the_server(fl, ns, tmp_path)
    assert fl.finish(timeout=600) == 1, fl.output
    (line,) = [ln for ln in fl.output.splitlines() if ln.startswith("fl: error:")]
    assert "no testbed left to run the 2 cell(s) left (fl run again resumes with them)" in line, line
    assert "srv could not be reached over ssh: ssh: connect to host" in line and "still after 15 s" in line, line
    assert "Traceback" not in fl.output
    now = state(ns)
    same(now, before, ("cli", "mid"))  # the others restored
    assert now["srv"]["tcp_ecn"].strip() == "1"  # the lost host keeps what the cell set: nothing could undo it
    (kept,) = [tid for tid in fl.seen.ids if (STATE_DIR / f"{tid}.json").exists()]
    assert json.loads((STATE_DIR / f"{kept}.json").read_text())["unreached"] == ["srv"]
    sshd_again(ns, tmp_path)
    time.sleep(1)
    p = run_fl("clean")
    assert p.returncode == 0, p.stdout + p.stderr
    same(state(ns), before)
    assert not (STATE_DIR / f"{kept}.json").exists()
    p = run_fl("run", SCENARIO, "--inventory", str(inventory), "--results", str(results), timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert set(statuses(results).values()) == {"ok"} and len(statuses(results)) == 3
    same(state(ns), before)
