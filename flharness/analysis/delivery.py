"""What the network delivered, from the two captures (client and server):

* goodput: the bytes the receiver acknowledged (the advance of the ACK numbers it sent,
  in its own capture) over a window: data delivered in order, never bytes merely
  written into the sender's socket buffer;
* one-way delay: each data segment seen leaving the sender matched to its arrival at
  the receiver by sequence number and IP identification (Linux numbers a TCP socket's
  packets one by one, so a retransmission is a packet of its own); the delay is the
  arrival time minus the departure time, on the clock both captures share;
* loss (Pantheon's definition): data segments sent that never arrived. A segment sent
  after the last one that did arrive may still have been queued when the captures
  stopped (a deep FIFO holds seconds of data): those are not counted either way.
"""
from __future__ import annotations

import numpy as np

from ..results.cell_metrics import OneWayDelay
from .capture import Packets
from .pcap import Conn, unwrap


def acked_bytes(pk: Packets, conn: Conn, times: np.ndarray) -> np.ndarray | None:
    """The receiver's cumulative ACK number at each of TIMES (epoch s), as bytes after
    its first ACK, from its packets in its own capture (PK, CONN); None when the capture
    holds no ACK of the connection."""
    if not len(conn.acks):
        return None
    acked = np.maximum.accumulate(unwrap(pk.ack[conn.acks], int(pk.ack[conn.acks[0]])))
    i = np.searchsorted(pk.ts[conn.acks], times, side="right") - 1
    return np.where(i >= 0, acked[np.maximum(i, 0)], 0)


def acked_mbit(pk: Packets, conn: Conn, t_from: float, t_to: float) -> float | None:
    """Mean goodput (Mbit/s) over [T_FROM, T_TO] (epoch s): the advance of the receiver's
    cumulative ACK number. None when the capture holds no ACK of the connection."""
    acked = acked_bytes(pk, conn, np.array([t_from, t_to])) if t_to > t_from else None
    return None if acked is None else float(acked[1] - acked[0]) * 8 / (t_to - t_from) / 1e6


def peak_mbit(per_flow: list[np.ndarray], edges: np.ndarray) -> float | None:
    """The highest aggregate goodput (Mbit/s) in one interval between EDGES, given each
    flow's cumulative acknowledged bytes at the edges."""
    if not per_flow or len(edges) < 2:
        return None
    total = np.sum(per_flow, axis=0)
    return float((np.diff(total) * 8 / np.diff(edges)).max() / 1e6)


def one_way(sender: Packets, s_conn: Conn, receiver: Packets, r_conn: Conn,
            t_from: float, t_to: float) -> OneWayDelay | None:
    """One-way delay percentiles (ms) and loss of the data segments the sender sent in
    [T_FROM, T_TO]; None when it sent none."""
    sent = s_conn.sent[(sender.ts[s_conn.sent] >= t_from) & (sender.ts[s_conn.sent] <= t_to)]
    if not len(sent):
        return None
    base = int(sender.seq[s_conn.sent[0]])
    out_keys = _keys(sender, sent, base)
    in_keys = _keys(receiver, r_conn.sent, base)
    _, i_out, i_in = np.intersect1d(out_keys, in_keys, return_indices=True)
    delays = (receiver.ts[r_conn.sent[i_in]] - sender.ts[sent[i_out]]) * 1e3
    if not len(delays):
        return OneWayDelay(median=None, p95=None, p99=None, n=0, sent=len(sent), loss=1.0)
    p50, p95, p99 = np.percentile(delays, [50, 95, 99])
    settled = np.unique(out_keys[sender.ts[sent] <= sender.ts[sent[i_out]].max()])
    return OneWayDelay(median=float(p50), p95=float(p95), p99=float(p99), n=len(delays),
                       sent=len(settled), loss=1 - len(i_out) / len(settled))


def _keys(pk: Packets, idx: np.ndarray, base: int) -> np.ndarray:
    """One number per segment: its sequence number (bytes after BASE) and IP id."""
    return (unwrap(pk.seq[idx], base) << 16) | pk.ipid[idx]
