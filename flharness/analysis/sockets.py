"""The ss samples fl records on the endpoints: which congestion control each flow ran."""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

_STATE_RE = re.compile(r"^\S+\s+\d+\s+\d+\s+(\S+):(\d+)\s+(\S+):(\d+)")
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


def sockets(ss_log: Path, control_port: int, count: re.Pattern[str] = _ACKED_RE) -> dict[tuple[str, str], tuple[str, int]]:
    """(local, peer) 'addr:port' → (congestion control, the most bytes COUNT saw: acked, or
    received), for every socket of an `ss -tin` sample log except the netperf control
    connections."""
    found: dict[tuple[str, str], tuple[str, int]] = {}
    key: tuple[str, str] | None = None
    for line in ss_log.read_text(errors="replace").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if not line[0].isspace():
            m = _STATE_RE.match(line)
            key = None
            if m and control_port not in (int(m.group(2)), int(m.group(4))):
                key = (f"{m.group(1)}:{m.group(2)}", f"{m.group(3)}:{m.group(4)}")
            continue
        if key is None:
            continue
        acked = int(m.group(1)) if (m := count.search(line)) else 0
        cc = next((w for w in line.split() if _WORD_RE.match(w) and w not in _FLAGS), "?")
        found[key] = (cc, max(acked, found.get(key, ("", 0))[1]))
    return found


def check_ccs(declared: list[str], observed: list[str]) -> bool:
    return Counter(declared) == Counter(observed)
