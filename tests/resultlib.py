"""Reading a results folder in tests: cells by coordinates, Flent series, pcap counts."""
from __future__ import annotations

import json
import lzma
import re
import subprocess
from pathlib import Path

import dpkt

from flharness.run.flent_data import load as load_flent

LEAD_IN = 5.0  # Flent's -d: ping runs alone before the flows start


def cells(root: Path, scenario: str) -> dict[str, Path]:
    return {d.name: d for d in sorted((root / scenario).iterdir()) if (d / "cell.json").is_file()}


def find(root: Path, scenario: str, **coords: str) -> tuple[dict, dict, Path]:
    """The one cell whose coordinate labels are COORDS: (cell.json, Flent data, folder)."""
    hits = []
    for d in cells(root, scenario).values():
        rec = json.loads((d / "cell.json").read_text())
        if all(rec["coordinates"].get(axis, {}).get("label") == label for axis, label in coords.items()):
            hits.append((rec, load_flent(d / f"{d.name}.flent.gz"), d))
    assert len(hits) == 1, (coords, [h[0]["cell"] for h in hits])
    return hits[0]


def series(data: dict, name: str, after: float = 0, before: float = 1e9) -> list[tuple[float, float]]:
    return [(t, v) for t, v in zip(data["x_values"], data["results"][name])
            if v is not None and after <= t < before]


def payload_received_mbit(pcap: Path, start: float, end: float) -> float:
    """The test's own count, with dpkt: new TCP payload bytes (beyond the highest sequence
    number seen per connection) arriving at the server between START and END (epoch s),
    netperf's control connections aside."""
    high: dict[tuple, int] = {}
    total = 0
    with lzma.open(pcap) as f:
        for ts, buf in dpkt.pcap.Reader(f):
            ip = dpkt.ethernet.Ethernet(buf).data
            if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.tcp.TCP) or 12865 in (ip.data.sport, ip.data.dport):
                continue
            size = ip.len - ip.hl * 4 - ip.data.off * 4
            if size <= 0:
                continue
            key = (ip.src, ip.data.sport)
            begin = high.get(key, ip.data.seq)
            new = (ip.data.seq + size - begin) % 2**32
            if new < 2**31:  # beyond the highest byte seen: unwrap relative to it
                high[key] = (begin + new) % 2**32
                if start <= ts < end:
                    total += new
    return total * 8 / (end - start) / 1e6

def packets(pcap: Path, expr: str) -> int:
    """Packets in an xz-compressed pcap matching a tcpdump filter."""
    xz = subprocess.Popen(["xz", "-dc", str(pcap)], stdout=subprocess.PIPE)
    out = subprocess.run(["tcpdump", "-nr", "-", expr], stdin=xz.stdout, capture_output=True, text=True)
    xz.wait()
    assert out.returncode == 0, out.stderr
    return len(out.stdout.splitlines())


def udp_received_mbit(cell_dir: Path) -> float:
    """What arrived of the competing UDP flow during the test: iperf's server report."""
    report = (cell_dir / "udp.log").read_text().split("Server Report")[-1]
    m = re.search(r"([\d.]+) Mbits/sec", report)
    assert m, f"{cell_dir}: no iperf server report in udp.log"
    return float(m.group(1))


def step_time(data: dict, name: str, high: tuple[float, float], low: tuple[float, float],
              fraction: float = 0.25) -> tuple[float, float, float]:
    """(mean before, mean after, time of the step) of a throughput series stepping down
    between the windows HIGH and LOW: the first sample after HIGH's start that has fallen
    FRACTION of the way from the level before to the level after and stays there until
    LOW ends (netperf's samples average over their interval, so the fall is a ramp of a
    few samples; a single low sample before it is sampling jitter, not the step)."""
    before = sum(v for _, v in series(data, name, *high)) / len(series(data, name, *high))
    after = sum(v for _, v in series(data, name, *low)) / len(series(data, name, *low))
    threshold = before - fraction * (before - after)
    samples = series(data, name, high[0], low[1])
    step = next(t for i, (t, _) in enumerate(samples) if all(v < threshold for _, v in samples[i:]))
    return before, after, step


def ecn_split(cell_dir: Path, tos: int) -> tuple[int, int]:
    """(all, ECN-capable) data packets with TOS's DSCP in the server-side capture."""
    flow = f"ip[1] & 0xfc == {tos:#x} and greater 1000"
    pcap = cell_dir / "srv.pcap.xz"
    return packets(pcap, flow), packets(pcap, f"{flow} and ip[1] & 3 != 0")
