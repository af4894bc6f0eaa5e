"""The kernel's own trace (tracefs, as `cat trace` prints it) of TCP's tracepoints, read
into events: what a VM test compares a congestion control's behaviour with."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

LINE = re.compile(r"\s(\d+\.\d+): (\w+): (.*)$")
FIELD = re.compile(r"(\w+)=(\S+)")
#: tcp_cong_state_set's cong_state (enum tcp_ca_state).
OPEN, DISORDER, CWR, RECOVERY, LOSS = range(5)
INFINITE_SSTHRESH = 0x7FFFFFFF


@dataclass(frozen=True)
class Event:
    t: float  # seconds, the trace clock
    name: str  # tcp_probe, tcp_cong_state_set, tcp_retransmit_skb …
    fields: dict[str, str]

    @property
    def port(self) -> int:
        """The connection's local port (tcp_probe prints it in src=ADDR:PORT)."""
        if "sport" in self.fields:
            return int(self.fields["sport"])
        return int(self.fields["src"].rsplit(":", 1)[1])

    def int(self, name: str) -> int:
        return int(self.fields[name])


def read_trace(path: Path) -> list[Event]:
    found = (LINE.search(line) for line in path.read_text(errors="replace").splitlines())
    return [Event(float(m[1]), m[2], dict(FIELD.findall(m[3]))) for m in found if m is not None]


def with_states(events: list[Event]) -> list[tuple[int, Event]]:
    """Each tcp_probe event with its connection's congestion state at that ACK (tcp_probe
    reports the socket before the ACK is processed)."""
    state: dict[int, int] = {}
    out = []
    for e in events:
        if e.name == "tcp_cong_state_set":
            state[e.port] = e.int("cong_state")
        elif e.name == "tcp_probe":
            out.append((state.get(e.port, OPEN), e))
    return out
