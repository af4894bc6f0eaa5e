"""The competing UDP flow (scenario key `udp`): what iperf's client sent and its server
received, from the client's log (udp.log), which ends with iperf's own count and the
server's report:

    Sending 1472 byte datagrams, IPG target: 560.78 us (kalman adjust)
    [  1] 0.0000-8.0044 sec  20.0 MBytes  21.0 Mbits/sec
    [  1] Sent 14268 datagrams
    [  1] Server Report:
    [ ID] Interval       Transfer     Bandwidth        Jitter   Lost/Total Datagrams
    [  1] 0.0000-8.0038 sec  19.9 MBytes  20.9 Mbits/sec   0.020 ms 63/14267 (0.44%)

Rates are computed from the datagram counts and size (iperf prints three digits): the
UDP payload per second, as iperf's -b counts it.
"""
from __future__ import annotations

import re

from ..results.cell_metrics import UdpFlow

_SIZE = re.compile(r"Sending (\d+) byte datagrams")
_SENT = re.compile(r"\[\s*\d+\] Sent (\d+) datagrams")
_INTERVAL = r"\[\s*\d+\]\s+([\d.]+)\s*-\s*([\d.]+) sec\s+[\d.]+ \w+\s+[\d.]+ \w+/sec"
_CLIENT_TOTAL = re.compile(_INTERVAL + r"\s*$", re.M)
_REPORT = re.compile(_INTERVAL + r"\s+([\d.]+) ms\s+(-?\d+)/\s*(\d+)")


def udp_flow(text: str | None, declared_bps: float) -> UdpFlow | str:
    """The flow's figures from udp.log's TEXT (None: there is none), or why there are none."""
    if text is None:
        return "no udp.log (iperf's output)"
    size, sent = _SIZE.search(text), _SENT.search(text)
    client, report = text.split("Server Report", 1) if "Server Report" in text else (text, "")
    server = _REPORT.search(report)
    if not (size and sent and server):
        return "udp.log has no server report (the server's answer to iperf did not arrive)"
    totals = _CLIENT_TOTAL.findall(client)
    start, end, jitter, lost, total = server.groups()
    payload, n_sent, lost_n, total_n = int(size.group(1)), int(sent.group(1)), max(int(lost), 0), int(total)
    duration = float(end) - float(start)
    client_s = float(totals[-1][1]) - float(totals[-1][0]) if totals else None
    return UdpFlow(declared_mbit=declared_bps / 1e6, datagram_bytes=payload, sent=n_sent, received=total_n - lost_n,
                   lost=lost_n, loss_pct=100 * lost_n / total_n if total_n else 0.0, jitter_ms=float(jitter),
                   duration_s=duration,
                   sent_mbit=n_sent * payload * 8 / client_s / 1e6 if client_s else None,
                   received_mbit=(total_n - lost_n) * payload * 8 / duration / 1e6 if duration > 0 else 0.0)
