"""What the network delivered, from the two captures (client and server):

* goodput: the bytes that first reached the receiver in a window, in its own capture
  (payload, never bytes merely written into the sender's socket buffer; a byte counts
  once, when its first copy arrives). By any moment the receiver holds the bytes its
  cumulative ACK passed and, above them, segments that arrived out of order (a hole
  waiting for a retransmission): a window counts how much that grew. Counting only the
  ACK's advance would move bytes held across an edge into the window the hole filled
  in (a 5 s drop-tail queue at 1 Mbit/s holds a buffer's worth for seconds);
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
from numpy.typing import NDArray

from ..results.cell_metrics import OneWayDelay
from .capture import Packets
from .pcap import Conn, unwrap


def _acked(pk: Packets, conn: Conn) -> tuple[NDArray[np.float64], NDArray[np.int64], int]:
    """The receiver's cumulative ACK number over time: (capture times, bytes after its
    first ACK, never decreasing), and that first ACK's raw number."""
    base = int(pk.ack[conn.acks[0]])
    return pk.ts[conn.acks], np.maximum.accumulate(unwrap(pk.ack[conn.acks], base)), base


def delivered_bytes(pk: Packets, conn: Conn, edges: NDArray[np.float64]) -> NDArray[np.int64] | None:
    """Bytes that first reached the receiver in each interval between EDGES (epoch s,
    increasing): the growth of what it holds (received_by). None when the capture holds
    no ACK of the connection."""
    if not len(conn.acks):
        return None
    return np.diff(received_by(pk, conn, edges))


def received_by(pk: Packets, conn: Conn, edges: NDArray[np.float64]) -> NDArray[np.int64]:
    """Per edge, the payload bytes the receiver holds (its capture, PK, CONN): those its
    cumulative ACK passed by then, and the segments that had arrived above it."""
    ack_ts, acked, base = _acked(pk, conn)
    i = np.searchsorted(ack_ts, edges, side="right") - 1
    at_edge = np.where(i >= 0, acked[np.maximum(i, 0)], 0)
    return at_edge + _held_above(pk, conn.sent, ack_ts, acked, base, edges, at_edge)


#: Apart per edge in _held_above's single union (above any connection's sequence span).
_EDGE_SPAN = 2**42


def _held_above(pk: Packets, sent: NDArray[np.intp], ack_ts: NDArray[np.float64], acked: NDArray[np.int64], base: int,
                edges: NDArray[np.float64], at_edge: NDArray[np.int64]) -> NDArray[np.int64]:
    """Per edge, the bytes above the cumulative ACK (AT_EDGE) of the segments that had
    arrived by it: the union of those arrived before the edge and acknowledged after."""
    held = np.zeros(len(edges), dtype=np.int64)
    if not len(sent):
        return held
    start = unwrap(pk.seq[sent], base)
    end = start + pk.payload[sent]
    j = np.searchsorted(acked, end, side="left")  # the first ACK that covers the segment
    t_acked = np.where(j < len(acked), ack_ts[np.minimum(j, len(acked) - 1)], np.inf)
    k_lo = np.searchsorted(edges, pk.ts[sent], side="right")  # the first edge after its arrival
    k_hi = np.searchsorted(edges, t_acked, side="left")  # the first edge its ACK came by
    n = np.maximum(k_hi - k_lo, 0)  # edges it is held across
    if not n.any():
        return held
    seg = np.repeat(np.arange(len(sent)), n)
    k = np.repeat(k_lo, n) + np.arange(len(seg)) - np.repeat(np.cumsum(n) - n, n)
    lo, hi = np.maximum(start[seg], at_edge[k]), end[seg]
    keep = hi > lo
    # one union over all edges at once: each edge's segments shifted apart
    lo, hi, k = lo[keep] + k[keep] * _EDGE_SPAN, hi[keep] + k[keep] * _EDGE_SPAN, k[keep]
    order = np.argsort(lo, kind="stable")
    lo, hi, k = lo[order], hi[order], k[order]
    covered = np.maximum.accumulate(hi)
    before = np.concatenate([[np.iinfo(np.int64).min], covered[:-1]])
    np.add.at(held, k, np.maximum(hi - np.maximum(lo, before), 0))
    return held


def received_mbit(pk: Packets, conn: Conn, t_from: float, t_to: float) -> float | None:
    """Mean goodput (Mbit/s) over [T_FROM, T_TO] (epoch s): the bytes that first reached
    the receiver in it (delivered_bytes). None when the capture holds no ACK of the
    connection."""
    got = delivered_bytes(pk, conn, np.array([t_from, t_to])) if t_to > t_from else None
    return None if got is None else float(got[0]) * 8 / (t_to - t_from) / 1e6


def peak_mbit(per_flow: list[NDArray[np.int64]], edges: NDArray[np.float64]) -> float | None:
    """The highest aggregate goodput (Mbit/s) in one interval between EDGES, given each
    flow's bytes delivered in each interval (delivered_bytes)."""
    if not per_flow or len(edges) < 2:
        return None
    total = np.sum(per_flow, axis=0)
    return float((total * 8 / np.diff(edges)).max() / 1e6)


def one_way(sender: Packets, s_conn: Conn, receiver: Packets, r_conn: Conn,
            t_from: float, t_to: float) -> OneWayDelay | None:
    """One-way delay percentiles (ms) and loss of the data segments the sender sent in
    [T_FROM, T_TO]; None when it sent none (one_way_samples)."""
    return one_way_samples(sender, s_conn, receiver, r_conn, t_from, t_to)[0]


def one_way_samples(sender: Packets, s_conn: Conn, receiver: Packets, r_conn: Conn, t_from: float, t_to: float,
                    ) -> tuple[OneWayDelay | None, NDArray[np.float64], NDArray[np.float64]]:
    """The one-way delay figures of the data segments the sender sent in [T_FROM, T_TO],
    and every matched segment's departure (epoch s, increasing) and delay (ms). Loss two
    ways: the segments that never arrived, those sent after the last that did left out
    (they may still have been queued when the captures stopped); and Pantheon's, the
    payload that had not arrived by T_TO (what was queued then counts as lost)."""
    none = np.empty(0)
    sent = s_conn.sent[(sender.ts[s_conn.sent] >= t_from) & (sender.ts[s_conn.sent] <= t_to)]
    if not len(sent):
        return None, none, none
    base = int(sender.seq[s_conn.sent[0]])
    out_keys = _keys(sender, sent, base)
    in_keys = _keys(receiver, r_conn.sent, base)
    _, i_out, i_in = np.intersect1d(out_keys, in_keys, return_indices=True)
    departed, arrived = sender.ts[sent[i_out]], receiver.ts[r_conn.sent[i_in]]
    delays = (arrived - departed) * 1e3
    if not len(delays):
        return OneWayDelay(median=None, p95=None, p99=None, n=0, sent=len(sent), loss=1.0, loss_by_end=1.0), none, none
    p50, p95, p99 = np.percentile(delays, [50, 95, 99])
    settled = np.unique(out_keys[sender.ts[sent] <= departed.max()])
    in_time = sender.payload[sent[i_out]][arrived <= t_to].sum()
    total = sender.payload[sent].sum()
    order = np.argsort(departed, kind="stable")
    return (OneWayDelay(median=float(p50), p95=float(p95), p99=float(p99), n=len(delays), sent=len(settled),
                        loss=1 - len(i_out) / len(settled), loss_by_end=float(1 - in_time / total) if total else None),
            departed[order], delays[order])


def _keys(pk: Packets, idx: NDArray[np.intp], base: int) -> NDArray[np.int64]:
    """One number per segment: its sequence number (bytes after BASE) and IP id."""
    return (unwrap(pk.seq[idx], base) << 16) | pk.ipid[idx]
