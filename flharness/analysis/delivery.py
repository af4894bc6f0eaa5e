"""What the network delivered, from the two captures (client and server):

* goodput: the bytes delivered in a window, in the receiver's own capture: those its
  cumulative ACK number passed in the window (data delivered in order, never bytes
  merely written into the sender's socket buffer) that also first arrived in it. Bytes
  that arrived before the window (out of order, held until a retransmission filled the
  hole, or not yet acknowledged) are not counted when the ACK passes them later, so
  what a window counts never exceeds what reached the receiver in it;
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


def _acked(pk: Packets, conn: Conn) -> tuple[np.ndarray, np.ndarray, int]:
    """The receiver's cumulative ACK number over time: (capture times, bytes after its
    first ACK, never decreasing), and that first ACK's raw number."""
    base = int(pk.ack[conn.acks[0]])
    return pk.ts[conn.acks], np.maximum.accumulate(unwrap(pk.ack[conn.acks], base)), base


def delivered_bytes(pk: Packets, conn: Conn, edges: np.ndarray) -> np.ndarray | None:
    """Bytes delivered in each interval between EDGES (epoch s, increasing): the bytes
    the receiver's cumulative ACK passed in the interval, less those of them that had
    already arrived (first seen in its capture, PK, CONN) before the interval began.
    None when the capture holds no ACK of the connection."""
    if not len(conn.acks):
        return None
    ack_ts, acked, base = _acked(pk, conn)
    i = np.searchsorted(ack_ts, edges, side="right") - 1
    at_edge = np.where(i >= 0, acked[np.maximum(i, 0)], 0)
    out = np.diff(at_edge)
    if len(conn.sent) and len(edges) > 1:
        out = out - _held(pk, conn.sent, ack_ts, acked, base, edges, at_edge)
    return out


def _held(pk: Packets, sent: np.ndarray, ack_ts: np.ndarray, acked: np.ndarray, base: int,
          edges: np.ndarray, at_edge: np.ndarray) -> np.ndarray:
    """Per interval between EDGES, the bytes acknowledged in it that arrived before it:
    the union of the segments that arrived before its first edge and were acknowledged
    after it, clipped to the interval's ACK advance [AT_EDGE[k], AT_EDGE[k + 1])."""
    start = unwrap(pk.seq[sent], base)
    end = start + pk.payload[sent]
    j = np.searchsorted(acked, end, side="left")  # the first ACK that covers the segment
    t_acked = np.where(j < len(acked), ack_ts[np.minimum(j, len(acked) - 1)], np.inf)
    k_lo = np.searchsorted(edges, pk.ts[sent], side="right")  # the first edge after its arrival
    k_hi = np.minimum(np.searchsorted(edges, t_acked, side="left"), len(edges) - 1)
    n = np.maximum(k_hi - k_lo, 0)  # edges it is held across (that begin an interval)
    held = np.zeros(len(edges) - 1, dtype=np.int64)
    if not n.any():
        return held
    seg = np.repeat(np.arange(len(sent)), n)
    k = np.repeat(k_lo, n) + np.arange(len(seg)) - np.repeat(np.cumsum(n) - n, n)
    lo, hi = np.maximum(start[seg], at_edge[k]), np.minimum(end[seg], at_edge[k + 1])
    keep = hi > lo
    lo, hi, k = lo[keep], hi[keep], k[keep]
    # intervals' ACK advances are disjoint and increasing: one union over all of them
    order = np.argsort(lo, kind="stable")
    lo, hi, k = lo[order], hi[order], k[order]
    covered = np.maximum.accumulate(hi)
    before = np.concatenate([[np.iinfo(np.int64).min], covered[:-1]])
    new = np.maximum(hi - np.maximum(lo, before), 0)
    np.add.at(held, k, new)
    return held


def acked_mbit(pk: Packets, conn: Conn, t_from: float, t_to: float) -> float | None:
    """Mean goodput (Mbit/s) over [T_FROM, T_TO] (epoch s): the bytes delivered in it
    (delivered_bytes). None when the capture holds no ACK of the connection."""
    got = delivered_bytes(pk, conn, np.array([t_from, t_to])) if t_to > t_from else None
    return None if got is None else float(got[0]) * 8 / (t_to - t_from) / 1e6


def peak_mbit(per_flow: list[np.ndarray], edges: np.ndarray) -> float | None:
    """The highest aggregate goodput (Mbit/s) in one interval between EDGES, given each
    flow's bytes delivered in each interval (delivered_bytes)."""
    if not per_flow or len(edges) < 2:
        return None
    total = np.sum(per_flow, axis=0)
    return float((total * 8 / np.diff(edges)).max() / 1e6)


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
