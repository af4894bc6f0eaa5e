"""Socket statistics of one connection from fl's own `ss -tin` samples (cli.ss.log,
srv.ss.log, written by flharness/programs/fl-ss-sample: a "# EPOCH" line per sample,
"% cpu…" lines, then a state line and an info line per socket).

Flent samples the client's sockets only, where a download flow merely receives: a
download flow's delivery rate and RTT are its sender's, the server's samples."""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

#: A socket's state line: state, Recv-Q, Send-Q, local address:port, peer address:port.
_STATE_RE = re.compile(r"^\S+\s+\d+\s+\d+\s+(\S+):(\d+)\s+(\S+):(\d+)")
_RATE_RE = re.compile(r"\bdelivery_rate (\d+(?:\.\d+)?)bps\b")
_RTT_RE = re.compile(r"\brtt:(\d+(?:\.\d+)?)/")

Sample = tuple[float, float | None, float | None]  # epoch s, delivery rate Mbit/s, RTT ms
#: A host's samples per connection: (local address, port, peer address, port) → its samples.
SocketSamples = dict["SocketKey", list[Sample]]


def _addr(text: str) -> str:
    """An address as ss prints it, IPv4-mapped IPv6 ('[::ffff:10.0.0.1]') as IPv4."""
    return text.strip("[]").removeprefix("::ffff:")


SocketKey = tuple[str, int, str, int]  # local address, port, peer address, port


def socket_lines(ss_log: Path) -> Iterator[tuple[float | None, SocketKey, str]]:
    """Each socket's info line of an `ss -tin` sample log, with its sample's epoch time
    (None before the first "# EPOCH" line) and its socket: the one parser of fl's ss logs."""
    stamp, key = None, None
    for line in ss_log.read_text(errors="replace").splitlines():
        if line.startswith("# "):
            try:
                stamp = float(line[2:])
            except ValueError:
                stamp = None
            key = None
        elif not line.strip() or line.startswith(("#", "%")):
            continue
        elif not line[0].isspace():
            m = _STATE_RE.match(line)
            key = (_addr(m.group(1)), int(m.group(2)), _addr(m.group(3)), int(m.group(4))) if m else None
        elif key is not None:
            yield stamp, key, line
            key = None


def samples(ss_log: Path) -> SocketSamples:
    """(local address, port, peer address, port) → the socket's samples in time order:
    (the sample's epoch time, delivery_rate in Mbit/s, rtt in ms; None where ss printed
    none, as for a socket that only received)."""
    out: SocketSamples = {}
    for stamp, key, line in socket_lines(ss_log):
        if stamp is None:
            continue
        rate, rtt = _RATE_RE.search(line), _RTT_RE.search(line)
        out.setdefault(key, []).append((stamp, float(rate.group(1)) / 1e6 if rate else None,
                                        float(rtt.group(1)) if rtt else None))
    return out
