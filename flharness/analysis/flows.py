"""The flows of a cell as fl declared them (cell.json), matched to Flent's series and to
the TCP connections in the captures."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..results.cell_record import CellConfig, Direction, Endpoints
from .flent_data import is_flow_series
from .pcap import Conn, Key
from .sockets import sockets

MIN_DATA_PACKETS = 10  # netperf's control connections carry a handful


@dataclass(frozen=True)
class FlowInfo:
    index: int  # 1-based, fl's flow number
    series: str  # Flent's series, e.g. "TCP upload::1"; "" for a scheme's flow (not Flent's)
    direction: Direction  # 'up' (cli → srv) or 'down'
    cc: str
    rtt_ms: float
    tos: int | None
    start_s: float  # after the first flow starts
    scheme: str | None = None  # a scheme's flow: what tables call it, "QUIC Cubic (ngtcp2 0.12.1)"

    @property
    def label(self) -> str:
        return f"{self.scheme or self.cc} ({self.rtt_ms:g} ms)"


def declared_flows(config: CellConfig, series_names: list[str]) -> list[FlowInfo]:
    """cell.json's flows, in order: a kernel CC's with its Flent series (ups first, then
    downs), a scheme's (a user-space program's: its packets are the captures') without."""
    names = [n for n in series_names if is_flow_series(n)]
    by_dir = {"up": [n for n in names if n.startswith("TCP upload")],
              "down": [n for n in names if n.startswith("TCP download")]}
    out = []
    for i, f in enumerate(config.flows):
        if (scheme := config.scheme(f)) is not None:
            out.append(FlowInfo(i + 1, "", f.direction, f.cc, f.rtt_ms, f.tos, f.start_s, scheme.label))
            continue
        pool = by_dir[f.direction]
        if not pool:
            break
        out.append(FlowInfo(i + 1, pool.pop(0), f.direction, f.cc, f.rtt_ms, f.tos, f.start_s))
    return out


def match_connections(flows: list[FlowInfo], direction: Direction, conns: dict[Key, Conn], ends: Endpoints,
                      ss_log: Path | None) -> dict[int, Key]:
    """Flow index → connection, for the flows of one DIRECTION and the connections of
    their sender's capture (and socket statistics, SS_LOG); ENDS: the testbed's server
    address and netperf's control port (cell.json). Flows are told apart by their DSCP
    when marked, else by congestion control, else (identical flows) in the order they
    started."""
    group = [f for f in flows if f.direction == direction and f.series]  # a scheme's flows are not TCP's here
    cands = {k: c for k, c in conns.items() if c.data >= MIN_DATA_PACKETS
             and ends.netperf_port not in (k[1], k[3])
             and (k[2] == ends.server if direction == "up" else k[0] == ends.server)}
    return _match(group, cands, ss_log, ends.netperf_port)


def _match(group: list[FlowInfo], cands: dict[Key, Conn], ss_log: Path | None, control_port: int) -> dict[int, Key]:
    if not group or not cands:
        return {}
    if all(f.tos is not None for f in group):
        by_dscp = {c.dscp: k for k, c in cands.items()}
        return {f.index: by_dscp[f.tos >> 2] for f in group if f.tos is not None and f.tos >> 2 in by_dscp}
    ccs = [f.cc for f in group]
    if ss_log is not None and ss_log.is_file() and len(set(ccs)) == len(ccs):
        cc_of = {(sock[0], sock[1]): cc for sock, (cc, _) in sockets(ss_log, control_port).items()}
        by_cc = {cc_of.get((k[0], k[1])): k for k in cands}
        if all(f.cc in by_cc for f in group):
            return {f.index: by_cc[f.cc] for f in group}
    ordered = sorted(cands, key=lambda k: cands[k].first)
    return {f.index: k for f, k in zip(sorted(group, key=lambda f: (f.start_s, f.index)), ordered)}
