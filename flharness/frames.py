"""The link's physics fl counts with, defined once: a full-size Ethernet frame as shapers
(HTB) and FIFOs count it, and the TCP payload it carries at a 1500-byte MTU with TCP
timestamps (1500 − 20 IP − 20 TCP − 12 options). A link of rate R delivers at most
R × PAYLOAD_SHARE of TCP payload."""
from __future__ import annotations

FRAME_BYTES = 1514
PAYLOAD_BYTES = 1448
PAYLOAD_SHARE = PAYLOAD_BYTES / FRAME_BYTES
#: IP and UDP headers by IP version: a datagram of the MTU less this fills one packet.
UDP_HEADERS = {4: 20 + 8, 6: 40 + 8}
#: What a UDP datagram of an IPv4 packet adds on the wire to its payload: Ethernet, IP, UDP.
UDP_FRAME_OVERHEAD = FRAME_BYTES - 1500 + UDP_HEADERS[4]
