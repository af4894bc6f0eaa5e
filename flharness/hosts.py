"""The testbed's three hosts, defined once: the client (Flent, the senders of upload
flows), the middlebox (the bottleneck) and the server (netserver, irtt)."""
from __future__ import annotations

HOSTS = ("cli", "mid", "srv")
CLIENT, MIDDLEBOX, SERVER = HOSTS
ENDPOINTS = ("cli", "srv")  # the hosts that send and receive (and capture)
UDP_PORT = 5001  # the server's iperf UDP server for competing UDP flows (scenario key udp)
VIDEO_PORT = 5002  # and the one for video flows (scenario key video)
SCHEME_PORT = 7100  # flow N of a scheme (a user-space congestion controller) listens on SCHEME_PORT + N
