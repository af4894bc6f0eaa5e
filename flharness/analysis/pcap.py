"""Per-connection packet counts from fl's xz-compressed captures, read with dpkt.

A TCP connection is keyed by its data direction (sender → receiver): the side that
sent payload. Counted per connection: data segments, retransmitted segments (payload
starting below the highest sequence number already sent, seen on the sender's side)
and the IP ECN codepoint of data segments, plus the DSCP the sender used.
"""
from __future__ import annotations

import lzma
import socket
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import dpkt

ECN_NAMES = ("not_ect", "ect1", "ect0", "ce")  # IP ECN field 0..3

Key = tuple[str, int, str, int]  # sender address, port, receiver address, port


@dataclass
class Conn:
    first: float  # capture time of the connection's first packet
    dscp: int = 0
    data: int = 0
    retrans: int = 0
    ecn: Counter = field(default_factory=Counter)
    _high: int | None = None  # highest sequence number sent + 1 (mod 2^32 arithmetic)

    def add(self, seq: int, length: int, tos: int) -> None:
        self.data += 1
        self.dscp = tos >> 2
        self.ecn[ECN_NAMES[tos & 3]] += 1
        end = (seq + length) & 0xFFFFFFFF
        if self._high is not None and _before(seq, self._high):
            self.retrans += 1
        if self._high is None or _before(self._high, end):
            self._high = end


def _before(a: int, b: int) -> bool:
    """a < b in TCP's wrapping sequence space."""
    return ((a - b) & 0xFFFFFFFF) > 0x7FFFFFFF


def connections(pcap: Path, skip_ports: set[int]) -> dict[Key, Conn]:
    """TCP data connections in PCAP (xz), except those on SKIP_PORTS (control)."""
    conns: dict[Key, Conn] = {}
    with lzma.open(pcap) as f:
        reader = dpkt.pcap.Reader(f)
        for ts, buf in reader:
            ip = _ipv4(buf, reader.datalink())
            if ip is None or not isinstance(ip.data, dpkt.tcp.TCP):
                continue
            tcp = ip.data
            if tcp.sport in skip_ports or tcp.dport in skip_ports:
                continue
            payload = ip.len - ip.hl * 4 - tcp.off * 4  # the capture is truncated (snaplen)
            key = (socket.inet_ntoa(ip.src), tcp.sport, socket.inet_ntoa(ip.dst), tcp.dport)
            rkey = (key[2], key[3], key[0], key[1])
            if payload <= 0:
                if key not in conns and rkey not in conns:
                    conns[key] = Conn(ts)  # provisional direction: the SYN's sender
                continue
            if key not in conns:
                conns[key] = conns.pop(rkey, None) or Conn(ts)
            conns[key].add(tcp.seq, payload, ip.tos)
    return {k: c for k, c in conns.items() if c.data}


def _ipv4(buf: bytes, datalink: int) -> dpkt.ip.IP | None:
    try:
        if datalink == dpkt.pcap.DLT_EN10MB:
            eth = dpkt.ethernet.Ethernet(buf)
            return eth.data if isinstance(eth.data, dpkt.ip.IP) else None
        if datalink == dpkt.pcap.DLT_LINUX_SLL:
            sll = dpkt.sll.SLL(buf)
            return sll.data if isinstance(sll.data, dpkt.ip.IP) else None
        return dpkt.ip.IP(buf)
    except (dpkt.UnpackError, dpkt.NeedData):
        return None
