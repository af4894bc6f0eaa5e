"""fl's captures as numpy arrays: the header fields of every IPv4 TCP packet, of every
IPv4 ICMP echo request and reply (Flent's pings: the hosts' clocks compared, clock.py), and
of every IPv4 UDP datagram with the first word of its payload (iperf's datagram number) and
a tag of its first 36 payload bytes, which tells one datagram of a scheme from every
other: an encrypted one's (QUIC's) by bytes 20 to 36 (its first bytes and its IP id
repeat across thousands), a plain one's (uTP's) by its header's sequence numbers and
timestamps (its data may be a file of zeros).

Only the walk from one pcap record to the next is a Python loop (it reads one length
per packet); every field is then gathered for all packets at once with numpy, so a
50 Mbit/s × 180 s cell (about 750 k packets per capture) is read in seconds. fl
captures with a snap length of 128 bytes: enough for the Ethernet, IP and TCP headers.
"""
from __future__ import annotations

import functools
import lzma
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from ..results.cell_folder import COMPRESSED

#: pcap magic → (byte order of the record headers, timestamp fraction unit)
_MAGIC = {b"\xd4\xc3\xb2\xa1": ("<", 1e-6), b"\xa1\xb2\xc3\xd4": (">", 1e-6),
          b"\x4d\x3c\xb2\xa1": ("<", 1e-9), b"\xa1\xb2\x3c\x4d": (">", 1e-9)}
#: link type → (bytes before the IP header, offset of the EtherType or None)
_LINK = {1: (14, 12), 113: (16, 14), 101: (0, None), 12: (0, None)}
_IPV4, _ICMP, _TCP, _UDP = 0x0800, 1, 6, 17
ECHO_REQUEST, ECHO_REPLY = 8, 0  # ICMP types
#: The UDP payload's bytes a datagram is told apart by (its tag: within the 128-byte snap length).
TAG_BYTES = (0, 36)
_GLOBAL_HEADER, _RECORD_HEADER = 24, 16


@dataclass(frozen=True)
class Packets:
    """One capture's IPv4 TCP packets, in capture order (one array per field)."""

    ts: NDArray[np.float64]  # epoch seconds
    src: NDArray[np.uint32]  # IPv4 addresses
    dst: NDArray[np.uint32]
    sport: NDArray[np.uint32]  # port numbers
    dport: NDArray[np.uint32]
    seq: NDArray[np.int64]  # raw 32-bit sequence numbers
    ack: NDArray[np.int64]
    flags: NDArray[np.uint8]  # TCP flags
    ae: NDArray[np.uint8]  # TCP AE bit (AccECN, RFC 9768: byte 12, bit 0)
    payload: NDArray[np.int64]  # TCP payload bytes (from the IP total length)
    tos: NDArray[np.uint8]  # DSCP << 2 | ECN
    ipid: NDArray[np.int64]  # IP identification

    def __len__(self) -> int:
        return len(self.ts)

    def take(self, idx: NDArray[np.intp] | NDArray[np.bool_]) -> Packets:
        return Packets(**{k: getattr(self, k)[idx] for k in self.__dataclass_fields__})


@dataclass(frozen=True)
class Datagrams:
    """One capture's IPv4 UDP datagrams, in capture order (one array per field)."""

    ts: NDArray[np.float64]  # epoch seconds
    src: NDArray[np.uint32]
    dst: NDArray[np.uint32]
    sport: NDArray[np.uint32]
    dport: NDArray[np.uint32]
    payload: NDArray[np.int64]  # UDP payload bytes (from the IP total length)
    tos: NDArray[np.uint8]  # DSCP << 2 | ECN
    first_word: NDArray[np.int64]  # the payload's first 4 bytes, big-endian signed (iperf: datagram number); -1 if cut
    tag: NDArray[np.uint64]  # payload bytes TAG_BYTES hashed (0: cut short, or a shorter payload)

    def __len__(self) -> int:
        return len(self.ts)

    def take(self, idx: NDArray[np.intp] | NDArray[np.bool_]) -> Datagrams:
        return Datagrams(**{k: getattr(self, k)[idx] for k in self.__dataclass_fields__})


@dataclass(frozen=True)
class Echoes:
    """One capture's IPv4 ICMP echo requests and replies, in capture order."""

    ts: NDArray[np.float64]  # epoch seconds, by the capturing host's clock
    src: NDArray[np.uint32]
    dst: NDArray[np.uint32]
    kind: NDArray[np.uint8]  # ECHO_REQUEST or ECHO_REPLY
    ident: NDArray[np.int64]  # the echo's identifier and sequence number: a reply carries its request's
    seq: NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.ts)


def read(path: Path) -> Packets:
    """The IPv4 TCP packets of a pcap file (xz-compressed when its name ends in .xz). The
    last two files read are kept (a cell's two captures: its verdict and its metrics read
    them one after the other); their arrays are shared, so never write into them."""
    st = path.stat()
    return _read(path.resolve(), st.st_size, st.st_mtime_ns)[0]


def read_udp(path: Path) -> Datagrams:
    """The IPv4 UDP datagrams of a pcap file (read with its TCP packets, kept with them)."""
    st = path.stat()
    return _read(path.resolve(), st.st_size, st.st_mtime_ns)[1]


def read_echoes(path: Path) -> Echoes:
    """The ICMP echo requests and replies of a pcap file (read with its TCP packets)."""
    st = path.stat()
    return _read(path.resolve(), st.st_size, st.st_mtime_ns)[2]


def forget() -> None:
    """Drop the kept captures (benchmarks time reading them)."""
    _read.cache_clear()


@functools.lru_cache(maxsize=2)
def _read(path: Path, size: int, mtime_ns: int) -> tuple[Packets, Datagrams, Echoes]:
    if path.suffix == COMPRESSED:
        with lzma.open(path) as f:
            buf = f.read()
    else:
        buf = path.read_bytes()
    if len(buf) < _GLOBAL_HEADER or buf[:4] not in _MAGIC:
        raise ValueError(f"{path}: not a pcap file")
    order, unit = _MAGIC[buf[:4]]
    link = struct.unpack_from(order + "I", buf, 20)[0] & 0xFFFF
    if link not in _LINK:
        raise ValueError(f"{path}: link type {link} not supported")
    records, lengths = _records(buf, order)
    d = np.frombuffer(buf, np.uint8)
    link_args = (order, unit, *_LINK[link])
    return (_parse(d, records, lengths, *link_args), _parse_udp(d, records, lengths, *link_args),
            _parse_icmp(d, records, lengths, *link_args))


def _records(buf: bytes, order: str) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Offsets of the record headers and the captured length of each packet."""
    length_at = struct.Struct(order + "I").unpack_from
    offsets, lengths = [], []
    off, end = _GLOBAL_HEADER, len(buf) - _RECORD_HEADER
    while off <= end:
        n = length_at(buf, off + 8)[0]
        if off + _RECORD_HEADER + n > len(buf):
            break  # a capture cut off mid-record
        offsets.append(off)
        lengths.append(n)
        off += _RECORD_HEADER + n
    return np.array(offsets, np.int64), np.array(lengths, np.int64)


def _be(d: NDArray[np.uint8], at: NDArray[np.int64], size: int) -> NDArray[np.int64]:
    """Big-endian unsigned integers of SIZE bytes at the offsets AT."""
    out = np.zeros(len(at), np.int64)
    for i in range(size):
        out = (out << 8) | d[at + i]
    return out


def _header_u32(d: NDArray[np.uint8], at: NDArray[np.int64], order: str) -> NDArray[np.int64]:
    return _be(d, at, 4) if order == ">" else _le32(d, at)


def _le32(d: NDArray[np.uint8], at: NDArray[np.int64]) -> NDArray[np.int64]:
    out = np.zeros(len(at), np.int64)
    for i in reversed(range(4)):
        out = (out << 8) | d[at + i]
    return out


def _ipv4(d: NDArray[np.uint8], records: NDArray[np.int64], lengths: NDArray[np.int64], link_len: int,
          ethertype_at: int | None, proto: int, header: int) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """The records of IPv4 packets of protocol PROTO captured with at least HEADER bytes of
    it: their record offsets, IP header offsets and the ends of what was captured."""
    data = records + _RECORD_HEADER
    ok = lengths >= link_len + 20 + header
    if ethertype_at is not None:
        ok &= _be(d, np.where(ok, data + ethertype_at, 0), 2) == _IPV4
    ip = data + link_len
    ok &= (d[np.where(ok, ip, 0)] >> 4) == 4
    ok &= d[np.where(ok, ip + 9, 0)] == proto
    ihl = (d[np.where(ok, ip, 0)] & 15).astype(np.int64) * 4
    ok &= lengths >= link_len + ihl + header
    return records[ok], ip[ok], (data + lengths)[ok]


def _stamps(d: NDArray[np.uint8], records: NDArray[np.int64], order: str, unit: float) -> NDArray[np.float64]:
    ts = _header_u32(d, records, order) + _header_u32(d, records + 4, order) * unit
    return ts.astype(np.float64)


def _parse(d: NDArray[np.uint8], records: NDArray[np.int64], lengths: NDArray[np.int64], order: str, unit: float,
           link_len: int, ethertype_at: int | None) -> Packets:
    records, ip, _ = _ipv4(d, records, lengths, link_len, ethertype_at, _TCP, 20)
    ihl = (d[ip] & 15).astype(np.int64) * 4
    tcp = ip + ihl
    doff = (d[tcp + 12] >> 4).astype(np.int64) * 4
    return Packets(
        ts=_stamps(d, records, order, unit), src=_be(d, ip + 12, 4).astype(np.uint32), dst=_be(d, ip + 16, 4).astype(np.uint32),
        sport=_be(d, tcp, 2).astype(np.uint32), dport=_be(d, tcp + 2, 2).astype(np.uint32),
        seq=_be(d, tcp + 4, 4), ack=_be(d, tcp + 8, 4), flags=d[tcp + 13].copy(), ae=d[tcp + 12] & 1,
        payload=_be(d, ip + 2, 2) - ihl - doff, tos=d[ip + 1].copy(), ipid=_be(d, ip + 4, 2))


def _parse_udp(d: NDArray[np.uint8], records: NDArray[np.int64], lengths: NDArray[np.int64], order: str, unit: float,
               link_len: int, ethertype_at: int | None) -> Datagrams:
    records, ip, end = _ipv4(d, records, lengths, link_len, ethertype_at, _UDP, 8)
    ihl = (d[ip] & 15).astype(np.int64) * 4
    udp = ip + ihl
    word = np.where(end >= udp + 12, udp + 8, 0)
    first = _be(d, word, 4)
    lo, hi = TAG_BYTES
    whole = (end >= udp + 8 + hi) & (_be(d, ip + 2, 2) - ihl - 8 >= hi)
    at = np.where(whole, udp + 8 + lo, 0)
    tag = np.zeros(len(at), np.uint64)
    with np.errstate(over="ignore"):
        for i in range(lo, hi, 4):  # each 4-byte word mixed in
            tag = (tag * _MIX[0]) ^ _be(d, at + i - lo, 4).astype(np.uint64)
        tag ^= tag >> np.uint64(29)
    tag[tag == 0] = 1  # 0 means no tag
    return Datagrams(
        ts=_stamps(d, records, order, unit), src=_be(d, ip + 12, 4).astype(np.uint32),
        dst=_be(d, ip + 16, 4).astype(np.uint32), sport=_be(d, udp, 2).astype(np.uint32),
        dport=_be(d, udp + 2, 2).astype(np.uint32), payload=_be(d, ip + 2, 2) - ihl - 8, tos=d[ip + 1].copy(),
        first_word=np.where(end >= udp + 12, np.where(first >= 2**31, first - 2**32, first), -1),
        tag=np.where(whole, tag, np.uint64(0)))


def _parse_icmp(d: NDArray[np.uint8], records: NDArray[np.int64], lengths: NDArray[np.int64], order: str, unit: float,
                link_len: int, ethertype_at: int | None) -> Echoes:
    records, ip, _ = _ipv4(d, records, lengths, link_len, ethertype_at, _ICMP, 8)
    icmp = ip + (d[ip] & 15).astype(np.int64) * 4
    echo = np.isin(d[icmp], (ECHO_REQUEST, ECHO_REPLY)) & (d[icmp + 1] == 0)
    records, ip, icmp = records[echo], ip[echo], icmp[echo]
    return Echoes(ts=_stamps(d, records, order, unit), src=_be(d, ip + 12, 4).astype(np.uint32),
                  dst=_be(d, ip + 16, 4).astype(np.uint32), kind=d[icmp].copy(),
                  ident=_be(d, icmp + 4, 2), seq=_be(d, icmp + 6, 2))


_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F))


def identity(pk: Packets, idx: NDArray[np.intp] | NDArray[np.bool_] | None = None) -> NDArray[np.uint64]:
    """One number per packet (at IDX, default all) that the same packet carries in every
    capture along its path: its source address and port, sequence and ACK numbers and IP
    id, hashed into 64 bits (ECN bits, flags and TTL, which the path may change, left out)."""
    sel = slice(None) if idx is None else idx
    with np.errstate(over="ignore"):
        key: NDArray[np.uint64] = (pk.seq[sel].astype(np.uint64) | (pk.ipid[sel].astype(np.uint64) << np.uint64(32))
                                   | (pk.sport[sel].astype(np.uint64) << np.uint64(48)))
        key ^= pk.ack[sel].astype(np.uint64) * _MIX[0]
        key ^= pk.src[sel].astype(np.uint64) * _MIX[1]
    return key
