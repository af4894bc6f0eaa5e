"""A scheme's UDP flow (a user-space congestion controller: QUIC, uTP …) from the two
captures, as delivery.py measures a TCP flow:

* its data: the datagrams to the server's address with the flow's port on either end (the
  side that listens has it), in the client's capture (sent) and the server's (received);
  what comes back (acknowledgements) is not data;
* matched one by one between the captures by their tag (their first 36 payload bytes: an
  encrypted datagram's first bytes and its IP id repeat across thousands, its bytes 20 to
  36 do not; a plain one's header numbers it);
  a datagram matched twice (the same tag sent again) is counted once, at its first copy;
* goodput: the UDP payload that reached the receiver in the window (headers and the
  scheme's own framing count: no program's view of what it delivered is taken);
* one-way delay per matched datagram, on the clock the captures share; loss two ways as
  for TCP: datagrams that never arrived, those sent after the last that did left out (they
  may have been queued still when the captures stopped), and Pantheon's, the payload sent
  in the window that had not arrived by its end.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ..frames import UDP_FRAME_OVERHEAD
from ..results.cell_metrics import OneWayDelay, PcapCounts
from .capture import Datagrams

ECN_NAMES = {0: "not-ect", 1: "ect1", 2: "ect0", 3: "ce"}


@dataclass(frozen=True)
class SchemeData:
    """One scheme flow's data datagrams in each capture (indices into its Datagrams)."""

    sent: NDArray[np.intp]
    received: NDArray[np.intp]


def data(dg: Datagrams, server: int, port: int) -> NDArray[np.intp]:
    """The flow's data datagrams in one capture: to the server, PORT on either end."""
    mask = (dg.dst == server) & ((dg.sport == port) | (dg.dport == port))
    return np.flatnonzero(mask)


def counts(sender: Datagrams, sent: NDArray[np.intp], receiver: Datagrams, received: NDArray[np.intp]) -> PcapCounts:
    """The datagrams each capture holds, the codepoints they arrived with and their DSCP."""
    codes = receiver.tos[received] & 3
    ecn = {ECN_NAMES[int(c)]: int(n) for c, n in zip(*np.unique(codes, return_counts=True))}
    dscp = int(sender.tos[sent[0]] >> 2) if len(sent) else 0
    lost = 1 - len(received) / len(sent) if len(sent) else None
    return PcapCounts(sent=len(sent), received=len(received), retrans=None, loss=lost, ecn_received=ecn, dscp=dscp)


def payload_share(dg: Datagrams, idx: NDArray[np.intp]) -> float | None:
    """The share of the datagrams' frames on the wire that is their UDP payload (what the
    link's rate carries of it, as PAYLOAD_SHARE says for full-size TCP segments)."""
    if not len(idx):
        return None
    payload = dg.payload[idx].sum()
    return float(payload / (payload + UDP_FRAME_OVERHEAD * len(idx)))


def delivered_bytes(receiver: Datagrams, received: NDArray[np.intp], edges: NDArray[np.float64]) -> NDArray[np.int64]:
    """UDP payload bytes that reached the receiver in each interval between EDGES (epoch s),
    each datagram once (its first copy)."""
    first = _first_copies(receiver, received)
    return np.histogram(receiver.ts[first], bins=edges, weights=receiver.payload[first])[0].astype(np.int64)


def received_mbit(receiver: Datagrams, received: NDArray[np.intp], t_from: float, t_to: float) -> float | None:
    if t_to <= t_from:
        return None
    got = delivered_bytes(receiver, received, np.array([t_from, t_to]))
    return float(got[0]) * 8 / (t_to - t_from) / 1e6


def one_way_samples(sender: Datagrams, sent: NDArray[np.intp], receiver: Datagrams, received: NDArray[np.intp],
                    t_from: float, t_to: float) -> tuple[OneWayDelay | None, NDArray[np.float64], NDArray[np.float64]]:
    """As delivery.one_way_samples, for datagrams matched by their tag: the figures of those
    sent in [T_FROM, T_TO], and each matched one's departure (epoch s, increasing) and delay (ms)."""
    none = np.empty(0)
    window = sent[(sender.ts[sent] >= t_from) & (sender.ts[sent] <= t_to)]
    out = _first_copies(sender, window)
    if not len(out):
        return None, none, none
    inn = _first_copies(receiver, received)
    _, i_out, i_in = np.intersect1d(sender.tag[out], receiver.tag[inn], return_indices=True)
    departed, arrived = sender.ts[out[i_out]], receiver.ts[inn[i_in]]
    delays = (arrived - departed) * 1e3
    if not len(delays):
        return OneWayDelay(median=None, p95=None, p99=None, n=0, sent=len(out), loss=1.0, loss_by_end=1.0), none, none
    p50, p95, p99 = np.percentile(delays, [50, 95, 99])
    settled = np.count_nonzero(sender.ts[out] <= departed.max())
    total = sender.payload[out].sum()
    in_time = sender.payload[out[i_out]][arrived <= t_to].sum()
    order = np.argsort(departed, kind="stable")
    return (OneWayDelay(median=float(p50), p95=float(p95), p99=float(p99), n=len(delays), sent=settled,
                        loss=1 - len(i_out) / settled, loss_by_end=float(1 - in_time / total) if total else None),
            departed[order], delays[order])


def _first_copies(dg: Datagrams, idx: NDArray[np.intp]) -> NDArray[np.intp]:
    """IDX without the datagrams whose tag an earlier one carried (a copy), nor those cut
    short of the tag (tag 0), in capture order."""
    idx = idx[dg.tag[idx] != 0]
    _, first = np.unique(dg.tag[idx], return_index=True)
    out: NDArray[np.intp] = idx[np.sort(first)]
    return out
