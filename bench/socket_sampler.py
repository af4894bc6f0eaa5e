#!/usr/bin/env python3
"""The socket sampler's cost, two ways, in one run: fl's way (flharness/programs/fl-ss-sample
starts `ss -tinH "( dst PEER or src PEER )"` once per sample and keeps its text) against one
long-lived process asking the kernel through netlink's inet_diag for the same sockets'
tcp_info and congestion control (pyroute2's DiagSocket, one dump per sample).

In a network namespace of its own (flbss-<hex>), CONNECTIONS loopback TCP connections (both
ends local: 2 × CONNECTIONS sockets, each sending a little every sample so their counters
move); ROUNDS rounds, each taking SAMPLES samples one way then the other. Per sample: the
CPU time (user + system, the sampler's and its children's) and the wall time, medians over
the rounds, and their ratio, netlink's over ss's. The netlink process's own start (Python and
pyroute2 imported, the first dump) is timed apart: fl would pay it once per cell and host.
Both ways must see the same sockets with the same congestion control (the ss text read by
fl's own parser, analysis/sockets.py), or the run fails; ss is timed as a host runs it,
without the parsing fl does later.

pyroute2 is no dependency of fl (the hosts sample with iproute2's ss): run this with a
Python that has it, e.g.
    python3 -m venv /tmp/pr2 && /tmp/pr2/bin/pip install pyroute2
    /tmp/pr2/bin/python bench/socket_sampler.py [--connections 8] [--samples 200] [--rounds 5]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # fl's parser, from a venv with pyroute2
from flharness.analysis.sockets import sockets

PEER = "127.0.0.1"
SS = ["ss", "-tinH", f"( dst {PEER} or src {PEER} )"]


def cpu_s() -> float:
    """CPU time so far of this process and its waited-for children, seconds."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def connections(n: int) -> list[tuple[socket.socket, socket.socket]]:
    """N connected loopback pairs (client end, server end), cubic's and reno's alternately."""
    listener = socket.create_server((PEER, 0))
    pairs = []
    for i in range(n):
        c = socket.socket()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"cubic" if i % 2 else b"reno")
        c.connect(listener.getsockname())
        s, _ = listener.accept()
        pairs.append((c, s))
    listener.close()
    return pairs


def nudge(pairs: list[tuple[socket.socket, socket.socket]]) -> None:
    """Each connection moves a little data, so each sample's counters differ."""
    for c, s in pairs:
        c.sendall(b"x" * 1448)
        s.recv(65536)


def ss_sample() -> str:
    """One sample fl's way, what the host does: ss started, its text kept."""
    return subprocess.run(SS, capture_output=True, text=True, check=True).stdout


def ss_read(text: str) -> dict[tuple[str, int, str, int], str]:
    """A sample read back by fl's own parser (analysis/sockets.py, at analysis time, not on
    the host): (local, port, peer, port) → congestion control."""
    with tempfile.NamedTemporaryFile("w", suffix=".ss.log") as f:
        f.write(text)
        f.flush()
        return {key: cc for key, (cc, _) in sockets(Path(f.name), control_port=0).items()}


class Netlink:
    """The other way: one netlink socket kept open, one inet_diag dump per sample."""

    def __init__(self) -> None:
        from pyroute2.netlink.diag import AF_INET, DiagSocket  # type: ignore[import-not-found]
        self.family = AF_INET
        self.sock = DiagSocket()
        self.sock.bind()

    def sample(self) -> dict[tuple[str, int, str, int], str]:
        info, cong = 1 << (2 - 1), 1 << (4 - 1)  # INET_DIAG_INFO, INET_DIAG_CONG (linux/inet_diag.h)
        found = {}
        for msg in self.sock.get_sock_stats(family=self.family, extensions=info | cong):
            if PEER not in (msg["idiag_src"], msg["idiag_dst"]) or msg["idiag_state"] == 10:  # not LISTEN
                continue
            tcp = msg.get_attr("INET_DIAG_INFO")
            if tcp is None or tcp["tcpi_rtt"] is None:
                continue
            key = (msg["idiag_src"], msg["idiag_sport"], msg["idiag_dst"], msg["idiag_dport"])
            found[key] = msg.get_attr("INET_DIAG_CONG") or "?"
        return found


def timed(take: Callable[[], object], samples: int, pairs: list[tuple[socket.socket, socket.socket]]) -> tuple[
        float, float]:
    """(CPU s, wall s) per sample of SAMPLES calls of TAKE, the connections nudged between."""
    cpu = wall = 0.0
    for _ in range(samples):
        nudge(pairs)
        c0, w0 = cpu_s(), time.perf_counter()
        take()
        cpu, wall = cpu + cpu_s() - c0, wall + time.perf_counter() - w0
    return cpu / samples, wall / samples


def inside(args: argparse.Namespace) -> dict:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    pairs = connections(args.connections)
    w0 = time.perf_counter()  # a new process: Python started, pyroute2 imported, one dump
    subprocess.run([sys.executable, "-c", "import sys; sys.path[:0] = [sys.argv[1]]; import socket_sampler as s; "
                    "s.Netlink().sample()", str(Path(__file__).parent)], check=True)
    start_wall = time.perf_counter() - w0
    netlink = Netlink()
    seen_ss, seen_nl = ss_read(ss_sample()), netlink.sample()
    if seen_ss != seen_nl or len(seen_ss) != 2 * args.connections:
        raise SystemExit(f"the two ways disagree: ss {sorted(seen_ss.items())}\nnetlink {sorted(seen_nl.items())}")
    rounds = [(timed(ss_sample, args.samples, pairs), timed(netlink.sample, args.samples, pairs))
              for _ in range(args.rounds)]
    ss_cpu, ss_wall = (statistics.median(r[0][i] for r in rounds) for i in (0, 1))
    nl_cpu, nl_wall = (statistics.median(r[1][i] for r in rounds) for i in (0, 1))
    return {"connections": args.connections, "sockets": len(seen_ss), "samples": args.samples, "rounds": args.rounds,
            "ss_cpu_ms": ss_cpu * 1e3, "ss_wall_ms": ss_wall * 1e3, "netlink_cpu_ms": nl_cpu * 1e3,
            "netlink_wall_ms": nl_wall * 1e3, "cpu_ratio": nl_cpu / ss_cpu, "wall_ratio": nl_wall / ss_wall,
            "netlink_start_wall_ms": start_wall * 1e3}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inside:
        print(json.dumps(inside(args)))
        return
    ns = f"flbss-{secrets.token_hex(3)}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        out = subprocess.run(["ip", "netns", "exec", ns, sys.executable, os.path.abspath(__file__), "--inside",
                              "--connections", str(args.connections), "--samples", str(args.samples),
                              "--rounds", str(args.rounds)], capture_output=True, text=True, check=True).stdout
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=True)
    r = json.loads(out)
    print(json.dumps(r, indent=1))
    print(f"per sample, {r['sockets']} sockets: ss {r['ss_cpu_ms']:.2f} ms CPU / {r['ss_wall_ms']:.2f} ms wall; "
          f"netlink {r['netlink_cpu_ms']:.2f} / {r['netlink_wall_ms']:.2f} ms (CPU ratio {r['cpu_ratio']:.2f}, "
          f"wall {r['wall_ratio']:.2f}); netlink's process start {r['netlink_start_wall_ms']:.0f} ms once")


if __name__ == "__main__":
    main()
