"""Schemes (user-space congestion controllers: docs/schemes.md) run for real on namespaces
(tests/scenarios/host-schemes.yml), checked against what fl did not compute: the two
captures read here with dpkt, each QUIC datagram matched by its own payload bytes, the
link's physics (its UDP payload capacity at the datagrams' own size), and LEDBAT's own
definition (RFC 6817: a 100 ms target of queueing delay, below TCP's through a deeper queue)."""
from __future__ import annotations

import json
import lzma

import dpkt
import numpy as np
import pytest
from flrun import REPO, needs_root_tools, run_fl
from resultlib import find

pytestmark = [pytest.mark.e2e, needs_root_tools("gtlsserver", "gtlsclient")]
SCENARIO = REPO / "tests" / "scenarios" / "host-schemes.yml"
PORT = 7101  # flow 1's (hosts.SCHEME_PORT + 1)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    results = tmp_path_factory.mktemp("schemes")
    p = run_fl("run", str(SCENARIO), "--results", str(results))
    assert "6 ok, 1 failed" in p.stdout, p.stdout + p.stderr
    plot = run_fl("plot", "--results", str(results))
    assert plot.returncode == 0, plot.stdout + plot.stderr
    return results / "default"


def quic_datagrams(capture, server: str) -> dict[bytes, float]:
    """The flow's data datagrams (to the server, port PORT): payload bytes 20-36 → the first time seen."""
    out: dict[bytes, float] = {}
    with lzma.open(capture) as f:
        for ts, buf in dpkt.pcap.Reader(f):
            ip = dpkt.ethernet.Ethernet(buf).data
            if isinstance(ip, dpkt.ip.IP) and isinstance(ip.data, dpkt.udp.UDP) and \
                    ip.dst == bytes(map(int, server.split("."))) and PORT in (ip.data.sport, ip.data.dport):
                out.setdefault(bytes(ip.data.data[20:36]), ts)
    return out


def test_quic_alone_fills_the_link_and_its_datagrams_are_the_captures(run):
    """QUIC Cubic alone: goodput at least 90 % of what the link carries of its datagrams'
    payload (10 Mbit/s × payload / (payload + 42) at its own datagram size, read here);
    fl's datagram counts and one-way delays are the test's own matching of the captures."""
    rec, _, d = find(run, "host-schemes", cc="quic_cubic")
    assert rec["status"] == "ok", rec["reason"]
    metrics = json.loads((d / "metrics.json").read_text())
    (flow,) = metrics["flows"]
    server = rec["endpoints"]["server"]
    sent, got = quic_datagrams(d / "cli.pcap.xz", server), quic_datagrams(d / "srv.pcap.xz", server)
    assert flow["pcap"]["sent"] >= len(sent) and flow["pcap"]["received"] >= len(got) > 5000, (flow["pcap"], len(got))
    start = metrics["t0"] + rec["config"]["lead"]  # the test's window, on Flent's time axis: fl's and the report's
    matched = [k for k, t in sent.items() if k in got and start <= t <= start + rec["config"]["length"]]
    delays = np.array([(got[k] - sent[k]) * 1e3 for k in matched])
    owd = flow["owd_ms"]
    assert owd["n"] == len(matched), (owd, len(matched))
    assert owd["median"] == pytest.approx(float(np.median(delays)), abs=0.01), owd
    assert owd["p95"] == pytest.approx(float(np.percentile(delays, 95)), abs=0.05), owd
    share = flow["payload_share"]
    assert 0.9 < share < 0.98 and flow["label"].startswith("QUIC Cubic (ngtcp2 0.12.1)"), flow
    capacity = 10.0 * share  # Mbit/s of UDP payload the link carries at that datagram size
    assert 0.9 * capacity <= flow["mean_mbit"] <= 1.01 * capacity, (flow["mean_mbit"], capacity)
    assert flow["steady_mbit"] <= 1.01 * capacity and metrics["utilisation"]["up"] <= 1.01, metrics["utilisation"]
    assert not any(f["kind"] == "measurement_error" for f in metrics["flags"]), metrics["flags"]
    assert 0 < flow["cpu_s"]["sender"] < 0.9 * rec["config"]["length"] and flow["cpu_s"]["receiver"] > 0, flow["cpu_s"]


def test_quic_beside_kernel_cubic_both_carry_data_and_the_tables_have_both(run):
    rec, _, d = find(run, "host-schemes", cc="quic_cubic-vs-cubic")
    assert rec["status"] == "ok", rec["reason"]
    quic, cubic = json.loads((d / "metrics.json").read_text())["flows"]
    assert quic["cc"] == "quic_cubic" and cubic["cc"] == "cubic"
    assert quic["mean_mbit"] > 0.5 and cubic["mean_mbit"] > 0.5, (quic["mean_mbit"], cubic["mean_mbit"])
    index = (run / "README.md").read_text()
    per_cc = index.split("### Per congestion control", 1)[1].split("\n### ", 1)[0]
    assert "QUIC Cubic (ngtcp2 0.12.1)" in per_cc and "| cubic |" in per_cc, per_cc


def test_a_scheme_that_exits_at_once_fails_its_cell_with_its_words(run):
    rec, _, d = find(run, "host-schemes", cc="gives_up")
    assert rec["status"] == "failed"
    assert "flow 1's sender (Gives up (fl-test 1), scheme gives_up) ended by itself" in rec["reason"], rec["reason"]
    assert "status 3: cannot reach" in rec["reason"] and "it never sent" in rec["reason"], rec["reason"]
    events = [e for line in (d / "scheme-1.sender.json").read_text().splitlines() if (e := json.loads(line))["event"] != "cpu"]
    assert [e["event"] for e in events] == ["start", "exit"] and events[1]["status"] == 3, events


def test_ledbat_alone_fills_the_link_at_its_target_delay_and_yields_to_cubic(run):
    """libutp's LEDBAT through a 480 ms FIFO: alone it fills the link (90 % of its datagrams'
    payload capacity) and holds the queue near its 100 ms target, not the FIFO's 480 ms
    (its datagrams' one-way delay, p95, between 50 and 200 ms); beside kernel Cubic, which
    fills the FIFO, it yields: its D_SS under 10 % of Cubic's and Cubic's above 80 % of the link."""
    rec, _, d = find(run, "host-schemes", cc="ledbat")
    assert rec["status"] == "ok", rec["reason"]
    (flow,) = json.loads((d / "metrics.json").read_text())["flows"]
    assert flow["label"].startswith("LEDBAT (libutp/utp-native 2.5.3)"), flow["label"]
    assert flow["mean_mbit"] >= 0.9 * 10.0 * flow["payload_share"], flow
    assert 50 <= flow["owd_ms"]["p95"] <= 200, flow["owd_ms"]
    rec, _, d = find(run, "host-schemes", cc="ledbat-vs-cubic")
    assert rec["status"] == "ok", rec["reason"]
    ledbat, cubic = json.loads((d / "metrics.json").read_text())["flows"]
    assert ledbat["steady_mbit"] < 0.1 * cubic["steady_mbit"] and cubic["steady_mbit"] > 0.8 * 9.56, (ledbat, cubic)
    assert cubic["owd_ms"]["p95"] > 300, cubic["owd_ms"]  # Cubic keeps the FIFO full, past LEDBAT's target


@pytest.mark.parametrize(("cc", "title"), [("vivace", "PCC-Vivace (Pantheon stub)"), ("pantheon_ledbat", "LEDBAT (Pantheon stub)")])
def test_a_pantheon_checkouts_schemes_run_as_its_wrappers_run_them(run, cc, title):
    """Pantheon's protocol, spoken by fl: the stub checkout's programs (tests/fixtures/
    pantheon-stub) check that they get their wrapper's arguments and environment (PORT for
    the side that runs first, IP PORT for the other, LD_LIBRARY_PATH their own folder) and
    exit 2 otherwise; their data reaches the server (ucat's, standing in)."""
    rec, _, d = find(run, "host-schemes", cc=cc)
    assert rec["status"] == "ok", rec["reason"]
    (flow,) = json.loads((d / "metrics.json").read_text())["flows"]
    assert flow["label"].startswith(title) and flow["mean_mbit"] > 5, flow
    assert rec["config"]["schemes"][cc]["implementation"] == "Pantheon"
