"""Path features this machine's kernel can run, for real: a rate schedule, per-flow ECN
rewrites at the middlebox and a receiver's own CC (tests/scenarios/host-features.yml). The netem features
(per-flow RTT, loss, slotting) are tested in the VM suite (test_e2e_vm_features.py)."""
from __future__ import annotations

import re

import pytest
from flrun import REPO, needs_root_tools, run_fl
from resultlib import ecn_split, find, packets, schedule_steps, ss_sockets, step_applied, step_time

pytestmark = [pytest.mark.e2e, needs_root_tools()]
SCENARIO = REPO / "tests" / "scenarios" / "host-features.yml"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    results = tmp_path_factory.mktemp("features")
    p = run_fl("run", str(SCENARIO), "--results", str(results), "--parallel", "2")  # light cells: two testbeds
    assert p.returncode == 0, p.stdout + p.stderr
    assert "3 ok, 0 failed" in p.stdout, p.stdout
    return results / "default"


def test_rate_step_five_seconds_into_the_flow(run):
    """20 → 5 Mbit/s at t = 7 s (the flow runs from 2 to 12 s, after the 2 s lead-in):
    Flent's own goodput shows it within 0.5 s, the middlebox's log applied it within 0.1 s."""
    _, data, d = find(run, "host-features", rate_schedule="5mbit@7s")
    before, after, step = step_time(data, "TCP upload", (4, 6.5), (8.5, 11.5))
    assert before > 17 and after < 5.5, (before, after)
    assert abs(step - 7) <= 0.5, step
    steps = schedule_steps(d)
    assert [(planned, up) for _, planned, up, _ in steps] == [(7.0, "5mbit")], steps
    assert abs(step_applied(d, 7.0) - 7) <= 0.1, steps


def test_bleached_flow_arrives_not_ect_the_other_ect(run):
    _, _, d = find(run, "host-features", ecn="bleach-none")
    assert packets(d / "cli.pcap.xz", "ip[1] & 0xfc == 0x4c and ip[1] & 3 == 2 and greater 1000") > 100
    (all1, ect1), (all2, ect2) = ecn_split(d, 0x4c), ecn_split(d, 0x8c)
    assert all1 > 100 and ect1 == 0, (all1, ect1)
    assert all2 > 100 and ect2 >= 0.95 * all2, (all2, ect2)  # retransmissions go Not-ECT (RFC 3168)
    teardown = (d / "teardown.log").read_text()
    assert re.search(r'ip ecn set not-ect counter packets [1-9]\d* .*comment "flow 1: bleach"', teardown), teardown


def test_the_receiver_runs_its_own_cc(run):
    """receiver_cc: reno under a cubic sender: the server's own socket samples show its
    receiving socket running reno (netperf -K cubic,reno), the client's cubic."""
    rec, _, d = find(run, "host-features", receiver_cc="rcv_reno")
    assert rec["status"] == "ok" and rec["config"]["flows"][0]["receiver_cc"] == "reno", rec["reason"]
    server, client = ss_sockets(d / "srv.ss.log"), ss_sockets(d / "cli.ss.log")
    receiving = [words for words in server.values() if any(w.startswith("bytes_received:") and int(w.split(":")[1]) > 10**6 for w in words)]
    assert len(receiving) == 1 and "reno" in receiving[0] and "cubic" not in receiving[0], server
    assert any("cubic" in words for words in client.values())
