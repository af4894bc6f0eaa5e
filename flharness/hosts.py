"""The testbed's three hosts, defined once: the client (Flent, the senders of upload
flows), the middlebox (the bottleneck) and the server (netserver, irtt)."""
from __future__ import annotations

HOSTS = ("cli", "mid", "srv")
ENDPOINTS = ("cli", "srv")  # the hosts that send and receive (and capture)
