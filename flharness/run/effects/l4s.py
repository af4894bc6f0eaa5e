"""A scalable congestion control in effect: each connection whose sender ran prague (its
host's socket samples name it) sent its data ECT(1) where the server's SYN/ACK accepted
AccECN, and Not-ECT where it did not (Prague's classic fallback), in the sender's own
capture (before the path can change the codepoint)."""
from __future__ import annotations

import numpy as np

from ...analysis.capture import Packets
from ...analysis.cell_files import CellFiles
from ...analysis.sockets import sockets
from ...ecn import ACCECN_SYNACKS, ACK, CODEPOINTS, CWR, ECE, ECT1, NOT_ECT, SYN
from ...results import cell_folder
from ...results.cell_record import Effect

#: Congestion controls that identify their packets as L4S (ECT(1)) once AccECN is negotiated.
L4S_CCS = ("prague",)
SHARE = 0.99  # of a connection's data packets with the codepoint its negotiation calls for
SENDERS = {"up": "cli", "down": "srv"}


def check(files: CellFiles) -> list[Effect]:
    out = []
    for cc in L4S_CCS:
        directions = sorted({f.direction for f in files.config.flows if f.cc == cc})
        out += [_connections(files, cc, SENDERS[d]) for d in directions]
    return out


def _connections(files: CellFiles, cc: str, host: str) -> Effect:
    feature = f"{cc}: AccECN and ECT(1)"
    log, sent, srv = files.dir / cell_folder.ss_log(host), files.capture(host), files.capture("srv")
    ports = sorted({sock[1] for sock, (ran, _) in (sockets(log, 0).items() if log.is_file() else []) if ran == cc})
    if sent is None or srv is None or not ports:
        return Effect(feature=feature, ok=False, evidence=f"no {cc} socket in {host}'s samples, or a capture missing")
    seen = [_connection(sent, srv, port, files.server_addr, host == "srv") for port in ports]
    return Effect(feature=feature, ok=all(ok for ok, _ in seen), evidence="; ".join(text for _, text in seen))


def _connection(sent: Packets, srv: Packets, port: int, server: int, from_server: bool) -> tuple[bool, str]:
    synack = np.flatnonzero((srv.src == server) & ((srv.sport == port) | (srv.dport == port))
                            & ((srv.flags & (SYN | ACK)) == SYN | ACK))
    bits = {(int(srv.ae[i]), int(bool(srv.flags[i] & CWR)), int(bool(srv.flags[i] & ECE))) for i in synack}
    accecn = bool(bits) and bits <= ACCECN_SYNACKS
    data = np.flatnonzero((sent.sport == port) & (sent.payload > 0) & ((sent.src == server) == from_server))
    want = ECT1 if accecn else NOT_ECT
    right = int(np.count_nonzero((sent.tos[data] & 3) == want))
    ok = bool(bits) and len(data) > 0 and right >= SHARE * len(data)
    return ok, (f"port {port}: {'AccECN' if accecn else 'no AccECN'} (SYN/ACK AE, CWR, ECE {sorted(bits) or 'none'}); "
                f"{right} of {len(data)} data packets {CODEPOINTS[want]}")
