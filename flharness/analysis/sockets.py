"""The ss samples fl records on the endpoints: which congestion control each flow ran."""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from .ss_samples import SocketKey, socket_lines

_ACKED_RE = re.compile(r"\bbytes_acked:(\d+)")
_RECEIVED_RE = re.compile(r"\bbytes_received:(\d+)")
_WORD_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_FLAGS = {"ts", "sack", "ecn", "ecnseen", "fastopen", "cwr", "ece", "tfo"}  # printed before the CC
#: A sending socket had more than its SYN and FIN acknowledged (bytes_acked counts both:
#: the receiving end of a flow shows 1, and 2 once its FIN was acknowledged, which a
#: sample taken as the flows close catches: CI saw rrul's four download receivers counted
#: as senders). Control connections are told by their port, so a flow the path starved
#: is still a data flow, and its cell a result, not a failure.
DATA_FLOW_BYTES = 3


def sender_ccs(ss_log: Path, control_port: int) -> list[str]:
    """Congestion controls of the sockets that sent data (sorted), from `ss -tin` samples."""
    return sorted(cc for cc, acked in sockets(ss_log, control_port).values() if acked >= DATA_FLOW_BYTES)


def receiver_ccs(ss_log: Path, control_port: int) -> list[str]:
    """Congestion controls of the sockets that received data (sorted)."""
    return sorted(cc for cc, got in sockets(ss_log, control_port, _RECEIVED_RE).values() if got >= DATA_FLOW_BYTES)


def sockets(ss_log: Path, control_port: int, count: re.Pattern[str] = _ACKED_RE) -> dict[SocketKey, tuple[str, int]]:
    """(local address, port, peer address, port) → (congestion control, the most bytes
    COUNT saw: acked, or received), for every socket of an `ss -tin` sample log except the
    netperf control connections."""
    found: dict[SocketKey, tuple[str, int]] = {}
    for _, key, line in socket_lines(ss_log):
        if control_port in (key[1], key[3]):
            continue
        acked = int(m.group(1)) if (m := count.search(line)) else 0
        cc = next((w for w in line.split() if _WORD_RE.match(w) and w not in _FLAGS), "?")
        found[key] = (cc, max(acked, found.get(key, ("", 0))[1]))
    return found


def check_ccs(declared: list[str], observed: list[str]) -> bool:
    return Counter(declared) == Counter(observed)
