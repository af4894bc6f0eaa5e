#!/usr/bin/env python3
"""Time of fl's capture analysis (read, connections, receiver goodput, one-way delay and
loss) against the packet count, on captures shaped like a real cell's.

A bulk TCP flow at RATE for SECONDS is written as two pcaps, as tcpdump -s 128 writes
them on the client and the server: every data segment (1448 bytes) leaves the client
and, but for one in 200, arrives at the server 10 ms + a queueing delay later; the
server acknowledges every second segment. Both are xz-compressed at fl's level (not
timed), then analysed as `fl plot` does. Printed: seconds per 100 k packets and for
the whole cell; the issue's goal is at most 10 s for a 50 Mbit/s × 180 s cell (about
750 k packets per capture).

    .venv/bin/python bench/owd.py [--rate 50] [--seconds 180]
"""
from __future__ import annotations

import argparse
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from flharness.analysis import capture, delivery, pcap
from flharness.testbed.plan import XZ_LEVEL

CLI, SRV = (10 << 24) | (71 << 16) | (1 << 8) | 1, (10 << 24) | (71 << 16) | (2 << 8) | 1
SNAP = 128


def frames(ts: np.ndarray, src: int, dst: int, sport: int, dport: int, seq: np.ndarray,
           ack: np.ndarray, payload: int, ipid: np.ndarray) -> bytes:
    """A pcap (Ethernet, snap length 128) of TCP packets with timestamps, all at once."""
    n = len(ts)
    wire = 14 + 20 + 32 + payload
    cap = min(wire, SNAP)
    rec = np.zeros((n, 16 + cap), np.uint8)
    hdr = rec[:, :16].view("<u4")
    hdr[:, 0], hdr[:, 1] = ts.astype(np.int64), ((ts % 1) * 1e6).astype(np.int64)
    hdr[:, 2], hdr[:, 3] = cap, wire
    p = rec[:, 16:]
    p[:, 12:14] = (8, 0)
    ip = p[:, 14:34]
    ip[:, 0], ip[:, 8], ip[:, 9] = 0x45, 64, 6
    ip[:, 2:4] = _be(np.full(n, 20 + 32 + payload), 2)
    ip[:, 4:6] = _be(ipid, 2)
    ip[:, 12:16], ip[:, 16:20] = _be(np.full(n, src), 4), _be(np.full(n, dst), 4)
    tcp = p[:, 34:66]
    tcp[:, 0:2], tcp[:, 2:4] = _be(np.full(n, sport), 2), _be(np.full(n, dport), 2)
    tcp[:, 4:8], tcp[:, 8:12] = _be(seq, 4), _be(ack, 4)
    tcp[:, 12], tcp[:, 13] = 8 << 4, 0x10
    return struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, SNAP, 1) + rec.tobytes()


def _be(values: np.ndarray, size: int) -> np.ndarray:
    v = values.astype(np.int64) & ((1 << (8 * size)) - 1)
    return np.stack([(v >> (8 * (size - 1 - i))) & 0xFF for i in range(size)], axis=1).astype(np.uint8)


def cell(rate_mbit: float, seconds: float, folder: Path) -> tuple[Path, Path, int]:
    n = int(rate_mbit * 1e6 * seconds / (1514 * 8))
    rng = np.random.default_rng(1)
    sent_t = 1000.0 + np.arange(n) * 1514 * 8 / (rate_mbit * 1e6)
    seq = (123456 + np.arange(n, dtype=np.int64) * 1448) & 0xFFFFFFFF
    arrived = rng.random(n) >= 0.005
    arrive_t = sent_t + 0.010 + rng.exponential(0.005, n)
    ipid = np.arange(n)
    cli = frames(sent_t, CLI, SRV, 40001, 5001, seq, np.ones(n), 1448, ipid)
    order = np.argsort(arrive_t[arrived])
    srv_data = frames(arrive_t[arrived][order], CLI, SRV, 40001, 5001, seq[arrived][order], np.ones(order.size),
                      1448, ipid[arrived][order])
    every2 = np.nonzero(arrived)[0][::2]
    srv_acks = frames(arrive_t[every2] + 1e-5, SRV, CLI, 5001, 40001, np.ones(every2.size),
                      seq[every2] + 1448, 0, np.arange(every2.size))
    srv = _merge([(srv_data, arrive_t[arrived][order]), (srv_acks, arrive_t[every2] + 1e-5)])
    paths = []
    for name, blob in (("cli", cli), ("srv", srv)):
        path = folder / f"{name}.pcap"
        path.write_bytes(blob)
        subprocess.run(["xz", "-T1", f"-{XZ_LEVEL}", "-f", str(path)], check=True)
        paths.append(folder / f"{name}.pcap.xz")
    return paths[0], paths[1], n + int(arrived.sum()) + every2.size


def _merge(parts: list[tuple[bytes, np.ndarray]]) -> bytes:
    """One pcap of several packet streams (pcap bytes, times), in time order."""
    rows = [np.frombuffer(blob[24:], np.uint8).reshape(len(t), -1) for blob, t in parts]
    which = np.concatenate([np.full(len(t), i) for i, (_, t) in enumerate(parts)])
    index = np.concatenate([np.arange(len(t)) for _, t in parts])
    order = np.argsort(np.concatenate([t for _, t in parts]), kind="stable")
    return parts[0][0][:24] + b"".join(rows[w][i].tobytes() for w, i in zip(which[order], index[order]))


def analyse(cli: Path, srv: Path, seconds: float) -> dict[str, float]:
    capture.forget()  # read the files, not the kept copies
    t = time.perf_counter()
    c_pk, c_conns = pcap.load(cli)
    s_pk, s_conns = pcap.load(srv)
    key = next(iter(c_conns))
    good = delivery.received_mbit(s_pk, s_conns[key], 1001.0, 1000.0 + seconds)
    owd = delivery.one_way(c_pk, c_conns[key], s_pk, s_conns[key], 0, 1e10)
    return {"seconds": time.perf_counter() - t, "goodput": good, "p95": owd.p95, "loss": owd.loss}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=50.0, help="Mbit/s")
    ap.add_argument("--seconds", type=float, default=180.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fl-bench-owd-") as tmp:
        cli, srv, packets = cell(args.rate, args.seconds, Path(tmp))
        r = analyse(cli, srv, args.seconds)
    print(f"{args.rate:g} Mbit/s × {args.seconds:g} s: {packets} packets in the two captures")
    print(f"analysis {r['seconds']:.2f} s ({r['seconds'] / packets * 1e5:.3f} s per 100 k packets); "
          f"goodput {r['goodput']:.2f} Mbit/s, p95 one-way delay {r['p95']:.1f} ms, loss {r['loss']:.2%}")


if __name__ == "__main__":
    main()
