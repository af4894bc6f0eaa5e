"""The competing UDP flow's figures from iperf's log (flharness/analysis/udp_flow.py), on
the output iperf 2.1.8 printed for a 2 s, 2 Mbit/s flow on this machine (its server's
report included), and on the same with losses and without the report."""
from __future__ import annotations

import pytest

from flharness.analysis.udp_flow import udp_flow

LOG = """------------------------------------------------------------
Client connecting to 127.0.0.1, UDP port 5001
Sending 1472 byte datagrams, IPG target: 5888.00 us (kalman adjust)
UDP buffer size:  208 KByte (default)
------------------------------------------------------------
[  1] local 127.0.0.1 port 34948 connected with 127.0.0.1 port 5001
[ ID] Interval       Transfer     Bandwidth
[  1] 0.0000-1.0000 sec   246 KBytes  2.01 Mbits/sec
[  1] 1.0000-2.0000 sec   244 KBytes  2.00 Mbits/sec
[  1] 0.0000-2.0079 sec   493 KBytes  2.01 Mbits/sec
[  1] Sent 344 datagrams
[  1] Server Report:
[ ID] Interval       Transfer     Bandwidth        Jitter   Lost/Total Datagrams
[  1] 0.0000-2.0079 sec   492 KBytes  2.01 Mbits/sec   0.002 ms 0/343 (0%)
"""


def figures(tmp_path, text: str):
    return udp_flow(text, 2e6)


def test_a_flow_that_lost_nothing(tmp_path):
    f = figures(tmp_path, LOG)
    assert (f.sent, f.received, f.lost, f.loss_pct, f.datagram_bytes) == (344, 343, 0, 0.0, 1472)
    assert f.received_mbit == pytest.approx(343 * 1472 * 8 / 2.0079 / 1e6)  # from the counts, not iperf's 3 digits
    assert f.sent_mbit == pytest.approx(344 * 1472 * 8 / 2.0079 / 1e6)
    assert (f.declared_mbit, f.jitter_ms, f.duration_s) == (2.0, 0.002, pytest.approx(2.0079))


def test_a_flow_that_lost_datagrams(tmp_path):
    f = figures(tmp_path, LOG.replace("0.002 ms 0/343 (0%)", "2.355 ms 52361/100366 (52%)"))
    assert (f.received, f.lost) == (100366 - 52361, 52361)
    assert f.loss_pct == pytest.approx(100 * 52361 / 100366)


def test_without_the_servers_report_there_are_no_figures(tmp_path):
    said = figures(tmp_path, LOG.split("[  1] Server Report:")[0] + "[  1] WARNING: did not receive ack of last datagram after 10 tries.\n")
    assert isinstance(said, str) and "no server report" in said
    assert "no udp.log" in udp_flow(None, 2e6)
