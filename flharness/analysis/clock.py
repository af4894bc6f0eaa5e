"""The server's clock against the client's, where the testbed's hosts keep clocks of
their own (an ssh testbed), so that one-way delays from the two captures compare.

NTP's on-wire calculation (RFC 5905, section 8) over Flent's pings, which both captures
hold: a request leaves the client at T1 (the client's clock) and reaches the server at T2
(the server's); the reply leaves at T3 and is back at T4. Then

    offset θ = ((T2 - T1) + (T3 - T4)) / 2      (server's clock minus client's)
    delay  δ = (T4 - T1) - (T3 - T2)            (the exchange's round trip on the wire)

θ is exact where the exchange took as long each way, and off by at most δ/2 where it did
not. As NTP's clock filter does, the exchange of least δ is taken (the least queued), once
among the pings before the flows start (Flent's lead-in) and once among those after they
end (its lead-out); between the two the offset is interpolated (a clock that drifts), and
their difference says how far it moved over the test.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ..results.cell_metrics import ClockOffset
from .capture import ECHO_REPLY, ECHO_REQUEST, Echoes

METHOD = "NTP's on-wire calculation (RFC 5905 §8) over Flent's pings, the least-delayed exchange before and after the flows"


@dataclass(frozen=True)
class Offset:
    """The server's clock minus the client's (s), measured at two client times."""

    at: tuple[float, float]  # client epoch s of the two exchanges (equal: one measured)
    theta: tuple[float, float]
    delay: tuple[float, float]  # their round trips (s)
    exchanges: int  # matched in both captures

    def to_client(self, server_ts: NDArray[np.float64]) -> NDArray[np.float64]:
        """Server timestamps on the client's clock."""
        if self.at[1] <= self.at[0]:
            return server_ts - self.theta[0]
        return server_ts - np.interp(server_ts - self.theta[0], self.at, self.theta)

    def record(self) -> ClockOffset:
        before, after = self.theta
        return ClockOffset(method=METHOD, offset_ms=1e3 * before, drift_ms=1e3 * (after - before) if self.at[1] > self.at[0]
                           else None, delay_ms=1e3 * min(self.delay), bound_ms=1e3 * max(self.delay) / 2,
                           exchanges=self.exchanges)


def exchanges(cli: Echoes, srv: Echoes, server: int) -> NDArray[np.float64]:
    """Every ping to SERVER both captures hold, request and reply: rows of T1, T2, T3, T4."""
    def times(e: Echoes, kind: int) -> dict[tuple[int, int, int], float]:
        pick = (e.kind == kind) & ((e.dst if kind == ECHO_REQUEST else e.src) == server)
        peer = (e.src if kind == ECHO_REQUEST else e.dst)[pick]
        out: dict[tuple[int, int, int], float] = {}
        for key, ts in zip(zip(peer.tolist(), e.ident[pick].tolist(), e.seq[pick].tolist()), e.ts[pick].tolist()):
            out.setdefault(key, ts)  # a copy: its first sighting
        return out

    t1, t2, t3, t4 = times(cli, ECHO_REQUEST), times(srv, ECHO_REQUEST), times(srv, ECHO_REPLY), times(cli, ECHO_REPLY)
    keys = [k for k in t1 if k in t2 and k in t3 and k in t4 and t1[k] <= t4[k]]
    return np.array([(t1[k], t2[k], t3[k], t4[k]) for k in keys], np.float64).reshape(-1, 4)


def estimate(rows: NDArray[np.float64], before: tuple[float, float], after: tuple[float, float]) -> Offset | str:
    """The offset from the least-delayed exchange whose request left in BEFORE and in
    AFTER (client epoch s), or why there is none."""
    theta = ((rows[:, 1] - rows[:, 0]) + (rows[:, 2] - rows[:, 3])) / 2
    delay = (rows[:, 3] - rows[:, 0]) - (rows[:, 2] - rows[:, 1])
    best = []
    for lo, hi in (before, after):
        inside = np.flatnonzero((rows[:, 0] >= lo) & (rows[:, 0] < hi) & (delay >= 0))
        if len(inside):
            best.append(int(inside[np.argmin(delay[inside])]))
    if not best:
        return (f"no ping exchange in both captures before or after the flows ({len(rows)} in all) "
                "to measure the hosts' clock offset")
    first, last = best[0], best[-1]
    return Offset((float(rows[first, 0]), float(rows[last, 0])), (float(theta[first]), float(theta[last])),
                  (float(delay[first]), float(delay[last])), len(rows))
