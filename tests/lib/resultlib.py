"""Reading a results folder in tests: cells by coordinates, Flent series, pcap counts."""
from __future__ import annotations

import functools
import json
import lzma
import re
import socket
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import dpkt

from flharness.analysis.flent_data import load as load_flent

LEAD_IN = 5.0  # Flent's default -d: ping runs alone before the flows start (and after they end)
CLI, SRV = "10.71.1.1", "10.71.2.1"  # the namespace testbed's client and server
PAYLOAD_SHARE = 1448 / 1514  # TCP payload per full 1514-byte frame (1500-byte MTU, timestamps)


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


def schedule_steps(cell_dir: Path) -> list[tuple[float, float, str, str]]:
    """The steps the middlebox's schedule log (in the cell's teardown log) says it took, as
    (applied, planned: s on Flent's axis, up, down rates): its JSON lines {"t_s": …,
    "planned": {…}} (docs/results-folder.md), read without fl."""
    lines = (cell_dir / "teardown.log").read_text().splitlines()
    records = [json.loads(line) for line in lines if line.startswith('{"t_s": ')]
    return [(r["t_s"], r["planned"]["at_s"], r["planned"]["up"].split()[0], r["planned"]["down"].split()[0]) for r in records]


def step_applied(cell_dir: Path, planned: float) -> float:
    """When the middlebox applied the step planned at PLANNED s, on Flent's axis."""
    applied = [at for at, due, _, _ in schedule_steps(cell_dir) if due == planned]
    assert applied, (cell_dir / "teardown.log").read_text()
    return applied[0]


def lead_in(data: dict) -> float:
    """The cell's lead-in (its scenario's `lead:`), from Flent's own metadata: its whole
    run less the test, halved."""
    meta = data["metadata"]
    return (float(meta["TOTAL_LENGTH"]) - float(meta["LENGTH"])) / 2


def series(data: dict, name: str, after: float = 0, before: float = 1e9) -> list[tuple[float, float]]:
    return [(t, v) for t, v in zip(data["x_values"], data["results"][name])
            if v is not None and after <= t < before]


def payload_received_mbit(pcap: Path, start: float, end: float) -> float:
    """The test's own count, with dpkt: TCP payload bytes whose first copy arrived at the
    server between START and END (epoch s), netperf's control connections aside. Bytes
    beyond a hole count when they arrive, the hole's when its retransmission does."""
    spans: dict[tuple, list[list[int]]] = {}  # per connection: disjoint byte ranges held
    first: dict[tuple, int] = {}
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
            lo = (ip.data.seq - first.setdefault(key, ip.data.seq)) % 2**32
            new = _add_span(spans.setdefault(key, []), lo, lo + size)
            total += new if start <= ts < end else 0
    return total * 8 / (end - start) / 1e6


def _add_span(held: list[list[int]], lo: int, hi: int) -> int:
    """Add [LO, HI) to HELD (sorted disjoint ranges, a few: holes are rare); the bytes new."""
    new, keep = hi - lo, []
    for a, b in held:
        if b < lo or a > hi:
            keep.append([a, b])
        else:
            new -= max(0, min(b, hi) - max(a, lo))
            lo, hi = min(lo, a), max(hi, b)
    held[:] = sorted([*keep, [lo, hi]])
    return new

def packets(pcap: Path, expr: str) -> int:
    """Packets in an xz-compressed pcap matching a tcpdump filter."""
    xz = subprocess.Popen(["xz", "-dc", str(pcap)], stdout=subprocess.PIPE)
    out = subprocess.run(["tcpdump", "-nr", "-", expr], stdin=xz.stdout, capture_output=True, text=True, timeout=300)
    xz.wait(timeout=60)
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


@dataclass(frozen=True)
class Pkt:
    """One IPv4 packet of a capture, decoded by dpkt (the tests' own reader, independent of
    fl's numpy one). TCP and UDP: ports; ICMP: sport = echo id, dport = echo sequence,
    flags = ICMP type."""

    ts: float
    src: str
    dst: str
    proto: int
    sport: int
    dport: int
    seq: int
    ack: int
    flags: int
    payload: int  # TCP/UDP payload bytes (from the IP total length)
    tos: int
    ipid: int
    wire: int  # the frame's length on the wire (what HTB counts)
    header: bytes = b""  # TCP: the raw TCP header as captured (up to 60 bytes)

    @property
    def dscp(self) -> int:
        return self.tos >> 2

    @property
    def ecn(self) -> int:
        return self.tos & 3


NOT_ECT, ECT1, ECT0, CE = 0, 1, 2, 3
ETHERNET = 14  # header bytes before the IP packet: a frame on a veth is 14 + the IP length
SYN, ACK, ECE, CWR = 0x02, 0x10, 0x40, 0x80


#: pcap link type → (bytes before the IP header, offset of the EtherType or None): Ethernet,
#: raw IP (a tunnel device's capture), Linux cooked.
LINK_LAYERS = {1: (ETHERNET, 12), 101: (0, None), 12: (0, None), 113: (16, 14)}


def _ipv4(path: Path) -> Iterator[tuple[float, dpkt.ip.IP, bytes, int]]:
    """Each IPv4 packet of an (xz-compressed) capture: (time, the decoded packet, the frame,
    where the IP header starts in it)."""
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rb") as f:
        reader = dpkt.pcap.Reader(f)
        at, ethertype = LINK_LAYERS[reader.datalink()]
        for ts, buf in reader:
            if len(buf) <= at or buf[at] >> 4 != 4 or (ethertype is not None and buf[ethertype:ethertype + 2] != b"\x08\x00"):
                continue  # not IPv4
            try:
                ip = dpkt.ip.IP(buf[at:])
            except dpkt.UnpackError:
                continue
            yield ts, ip, buf, at


def read_pcap(path: Path) -> tuple[Pkt, ...]:
    """Every IPv4 TCP, UDP and ICMP packet of an (xz-compressed) capture (read once per
    version of the file: a cell that ran again has a new capture)."""
    st = path.stat()
    return _read_pcap(path, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _read_pcap(path: Path, size: int, mtime_ns: int) -> tuple[Pkt, ...]:
    out = []
    for ts, ip, buf, at in _ipv4(path):
        src, dst = socket.inet_ntoa(ip.src), socket.inet_ntoa(ip.dst)
        l4 = ip.data
        if isinstance(l4, dpkt.tcp.TCP):
            out.append(Pkt(ts, src, dst, 6, l4.sport, l4.dport, l4.seq, l4.ack, l4.flags,
                           ip.len - ip.hl * 4 - l4.off * 4, ip.tos, ip.id, ETHERNET + ip.len,
                           bytes(buf[at + ip.hl * 4:at + ip.hl * 4 + l4.off * 4])))
        elif isinstance(l4, dpkt.udp.UDP):
            out.append(Pkt(ts, src, dst, 17, l4.sport, l4.dport, 0, 0, 0, l4.ulen - 8, ip.tos, ip.id, ETHERNET + ip.len))
        elif isinstance(l4, dpkt.icmp.ICMP) and isinstance(l4.data, dpkt.icmp.ICMP.Echo):
            out.append(Pkt(ts, src, dst, 1, l4.data.id, l4.data.seq, 0, 0, l4.type, ip.len - ip.hl * 4 - 8, ip.tos, ip.id,
                           ETHERNET + ip.len))
    return tuple(out)


def mbit(pkts: tuple[Pkt, ...] | list[Pkt], src: str, t_from: float, t_to: float, what: str = "wire",
         proto: int | None = None) -> float:
    """Mbit/s that arrived from SRC in [T_FROM, T_TO) (epoch s): whole frames (WHAT = 'wire',
    as the bottleneck's HTB counts them) or TCP/UDP payload ('payload')."""
    total = sum(p.wire if what == "wire" else p.payload for p in pkts
                if p.src == src and t_from <= p.ts < t_to and (proto is None or p.proto == proto))
    return total * 8 / (t_to - t_from) / 1e6


def connections(pkts: tuple[Pkt, ...], control_port: int = 12865) -> dict[tuple[str, int, str, int], list[Pkt]]:
    """TCP connections by (client address, port, server address, port), the netperf
    control connections aside: every packet of each, both ways, in capture order."""
    out: dict[tuple[str, int, str, int], list[Pkt]] = {}
    for p in pkts:
        if p.proto != 6 or control_port in (p.sport, p.dport):
            continue
        key = (p.src, p.sport, p.dst, p.dport) if p.flags & SYN and not p.flags & ACK else None
        if key is None:
            key = next((k for k in ((p.src, p.sport, p.dst, p.dport), (p.dst, p.dport, p.src, p.sport)) if k in out), None)
        if key is not None:
            out.setdefault(key, []).append(p)
    return out


def ss_sockets(log: Path, control_port: int = 12865) -> dict[int, set[str]]:
    """Local port → the words of its `ss -tin` info lines (congestion control, ecn, …), for
    every socket in an ss sample log but netperf's control connections."""
    out: dict[int, set[str]] = {}
    port = None
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith(("#", "%")) or not line.strip():
            continue
        if not line[0].isspace():
            m = re.match(r"^\S+\s+\d+\s+\d+\s+\S+:(\d+)\s+\S+:(\d+)", line)
            port = int(m.group(1)) if m and control_port not in (int(m.group(1)), int(m.group(2))) else None
        elif port is not None:
            out.setdefault(port, set()).update(line.split())
    return out


def arrival_bins(pkts: tuple[Pkt, ...], src: str, t0: float, start: float, end: float, width: float = 0.5) -> list[float]:
    """Whole frames from SRC that arrived in consecutive WIDTH-s bins of [START, END) of
    Flent's time axis (T0: its origin, epoch s), in Mbit/s."""
    n = round((end - start) / width)
    return [mbit(pkts, src, t0 + start + i * width, t0 + start + (i + 1) * width) for i in range(n)]


#: The flags (cell.json's calibration reasons, metrics.json's flags) of CPU time the
#: hypervisor took, and of a shaper that sent below its rate over a standing queue: the
#: machine's doing, not the testbed's. Tests that expect a clean path allow them.
STOLEN, SHAPER_SHORT = "cpu_stolen", "shaper_short"
#: ... and of a core the machine's other work kept busy (the namespaces' hosts share its cores)
BUSY = "cpu_busy"


def codes(flags: list[dict]) -> list[str]:
    """The codes of FLAGS (as JSON): what a test selects flags by, never their text."""
    return [f["code"] for f in flags]


def doubts(flags: list[dict]) -> bool:
    """FLAGS (as JSON) doubt the measurement itself (analysis: results/flags.py MISMEASURED)."""
    return any(f["kind"] in ("calibration", "measurement_error") for f in flags)


def beyond_steal(flags: list[dict]) -> list[dict]:
    """FLAGS other than the CPU steal fl saw, and than the short shaper it explains."""
    return _beyond(flags, {STOLEN})


#: The flags of the machine's load: CPU steal, a busy core
LOAD = frozenset({STOLEN, BUSY})


def loaded(flags: list[dict]) -> bool:
    """Whether FLAGS say the machine's load disturbed the cell."""
    return bool(LOAD & set(codes(flags)))


def beyond_load(flags: list[dict]) -> list[dict]:
    """FLAGS other than the machine's load (CPU steal, a busy core) and the short shaper it
    explains: what a run on a shared CI machine may show although fl measured right."""
    return _beyond(flags, set(LOAD))


def _beyond(flags: list[dict], machine: set[str]) -> list[dict]:
    loaded = bool(machine & set(codes(flags)))
    return [f for f in flags if f["code"] not in machine and not (loaded and f["code"] == SHAPER_SHORT)]


def iperf_datagrams(pcap: Path, port: int) -> list[tuple[float, int, int, int]]:
    """(time, iperf's datagram number, UDP payload bytes, ECN field) of every IPv4 UDP
    datagram to PORT in an (xz-compressed) capture, in capture order; iperf numbers its
    datagrams from 1 in the payload's first word and negates the one that ends a test."""
    out = []
    for ts, ip, _, _ in _ipv4(pcap):
        if isinstance(ip.data, dpkt.udp.UDP) and ip.data.dport == port and len(ip.data.data) >= 4:
            number = int.from_bytes(bytes(ip.data.data[:4]), "big", signed=True)
            out.append((ts, number, ip.len - ip.hl * 4 - 8, ip.tos & 3))
    return out


def bursts(datagrams: list[tuple[float, int, int, int]], gap_s: float) -> list[list[int]]:
    """The datagram numbers of each burst (a frame) of DATAGRAMS from iperf_datagrams: a
    new one after a gap longer than GAP_S; the datagram that ends the test left out."""
    out: list[list[int]] = []
    last = -1.0
    for ts, number, _, _ in datagrams:
        if number > 0:
            if ts - last > gap_s:
                out.append([])
            out[-1].append(number)
            last = ts
    return out


def arrivals(sent: Iterable[Pkt], received: Iterable[Pkt]) -> list[tuple[Pkt, float]]:
    """Each packet of SENT that RECEIVED holds, with its arrival time: matched by (source,
    port, sequence number, IP ID), so a retransmission is its own packet."""
    arrived = {(p.src, p.sport, p.seq, p.ipid): p.ts for p in received}
    return [(p, arrived[k]) for p in sent if (k := (p.src, p.sport, p.seq, p.ipid)) in arrived]


def one_way_delays(cell_dir: Path, min_payload: int = 1000) -> list[float]:
    """Each TCP data segment's time (s) from the client's capture to the server's: both
    captures run on one kernel's clock (the namespaces of one host or VM)."""
    def data(host: str) -> list[Pkt]:
        return [p for p in read_pcap(cell_dir / f"{host}.pcap.xz") if p.proto == 6 and p.payload >= min_payload]
    return [t - p.ts for p, t in arrivals(data("cli"), data("srv"))]
