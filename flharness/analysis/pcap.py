"""The TCP connections in one of fl's captures (read by capture.py).

A connection is keyed by its data direction (sender → receiver): the side that sent
more payload. Per connection: its data segments and the packets its receiver sent
(ACKs) as indices into the capture, retransmitted segments (payload starting below
the highest sequence number already sent; meaningful on the sender's side), the IP
ECN codepoints of its data segments and the DSCP the sender used.
"""
from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from .capture import Packets, read

ECN_NAMES = ("not_ect", "ect1", "ect0", "ce")  # IP ECN field 0..3

Key = tuple[str, int, str, int]  # sender address, port, receiver address, port


@dataclass
class Conn:
    first: float  # capture time of the connection's first packet
    dscp: int
    data: int  # data segments
    retrans: int
    ecn: dict[str, int]
    sent: NDArray[np.intp]  # indices of the data segments (sender → receiver)
    acks: NDArray[np.intp]  # indices of the packets from the receiver


def unwrap(raw: NDArray[np.int64], base: int) -> NDArray[np.int64]:
    """32-bit sequence (or ACK) numbers as bytes after BASE, across wrap-arounds."""
    if not len(raw):
        return raw.astype(np.int64)
    steps = np.diff(raw, prepend=base)
    return np.cumsum(((steps + 2**31) & 0xFFFFFFFF) - 2**31)


def connections(pk: Packets) -> dict[Key, Conn]:
    """The TCP connections that carried data in a capture."""
    a = (pk.src.astype(np.uint64) << np.uint64(16)) | pk.sport
    b = (pk.dst.astype(np.uint64) << np.uint64(16)) | pk.dport
    pairs, group = np.unique(np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1), axis=0, return_inverse=True)
    group = group.ravel()
    order = np.argsort(group, kind="stable")
    bounds = np.searchsorted(group[order], np.arange(len(pairs) + 1))
    out: dict[Key, Conn] = {}
    for g, lo in enumerate(pairs[:, 0]):
        idx = order[bounds[g]:bounds[g + 1]]
        if (conn := _conn(pk, idx, a[idx] == lo)) is not None:
            out[conn[0]] = conn[1]
    return out


def _conn(pk: Packets, idx: NDArray[np.intp], from_lo: NDArray[np.bool_]) -> tuple[Key, Conn] | None:
    has_data = pk.payload[idx] > 0
    forward = int(np.count_nonzero(has_data & from_lo)) >= int(np.count_nonzero(has_data & ~from_lo))
    by_sender = from_lo if forward else ~from_lo
    sent = idx[has_data & by_sender]
    if not len(sent):
        return None
    i = sent[0]
    key = (_addr(pk.src[i]), int(pk.sport[i]), _addr(pk.dst[i]), int(pk.dport[i]))
    tos = pk.tos[sent]
    ends = (unwrap(pk.seq[sent], int(pk.seq[i])) + pk.payload[sent])
    starts = ends - pk.payload[sent]
    high = np.maximum.accumulate(ends)
    retrans = int(np.count_nonzero(starts[1:] < high[:-1]))
    ecn = np.bincount(tos & 3, minlength=4)
    return key, Conn(first=float(pk.ts[idx[0]]), dscp=int(tos[-1]) >> 2, data=len(sent), retrans=retrans,
                     ecn={name: int(n) for name, n in zip(ECN_NAMES, ecn) if n},
                     sent=sent, acks=idx[~by_sender & ((pk.flags[idx] & 0x10) != 0)])


def _addr(v: int) -> str:
    return socket.inet_ntoa(struct.pack("!I", int(v)))


def load(path: Path) -> tuple[Packets, dict[Key, Conn]]:
    """A capture's packets and its connections."""
    pk = read(path)
    return pk, connections(pk)
