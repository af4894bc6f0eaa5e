from flharness.analysis.sockets import check_ccs, sender_ccs

SAMPLE = """\
# 1795337039.132755465
ESTAB 0      0      10.71.1.1:43485 10.71.2.1:12865
\t ts sack bbr wscale:7,7 rto:204 rtt:0.1/0.05 bytes_acked:600 segs_out:9 bbr:(bw:1Mbps,mrtt:0.1)
ESTAB 0      812    10.71.1.1:50001 10.71.2.1:39425
\t ts sack cubic wscale:7,7 rto:396 rtt:190/1 mss:1448 cwnd:52 bytes_sent:100000 bytes_acked:90000 bytes_received:0
ESTAB 0      0      10.71.1.1:50002 10.71.2.1:39427
\t ts sack ecn reno wscale:7,7 rto:396 rtt:190/1 mss:1448 cwnd:60 bytes_acked:10
# 1795337040.141447094
ESTAB 0      0      10.71.1.1:50002 10.71.2.1:39427
\t ts sack ecn reno wscale:7,7 rto:396 rtt:190/1 mss:1448 cwnd:60 bytes_acked:9000000
LAST-ACK 0      1      10.71.1.1:50003 10.71.2.1:39429
\t ts sack cubic wscale:7,7 rto:204 rtt:0.1/0.05 mss:1448 cwnd:10 bytes_acked:2 bytes_received:3000000
"""


def test_sender_ccs_ignores_control_and_idle_sockets(tmp_path):
    """The last socket received a download: its SYN and FIN acknowledged (2), no data."""
    log = tmp_path / "cli.ss.log"
    log.write_text(SAMPLE)
    assert sender_ccs(log, 12865) == ["cubic", "reno"]


def test_check_ccs_is_a_multiset_comparison():
    assert check_ccs(["cubic", "reno"], ["reno", "cubic"])
    assert not check_ccs(["cubic", "cubic"], ["cubic", "bbr"])
    assert not check_ccs(["cubic", "cubic"], ["cubic"])
