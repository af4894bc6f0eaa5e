"""A cell's tunnel between cli and srv, rendered here: each end's ip commands (tunnel.ip,
run with `ip -batch`) and the tunnel's constants (ports, overheads, IPsec ids).

Two values are known only on the host and stand in the file as placeholders the setup
script fills as it pipes the file into ip (cell_scripts.py): the tunnel's MTU (the
underlay's, read there, minus OVERHEAD) and IPsec's keys. Keys are made per cell by fl
(testbed/plan.py: IPsec's SA keys, and each WireGuard end's key pair, so that each end
knows its peer's public key without a step between the hosts) and handed over inside
the setup scripts (the cell's hand-over), so that no log or dry run holds them (the dry
run shows plan.KEY_SHOWN; a WireGuard end's private key is in its scratch folder, mode
0600, during the cell only).
"""
from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Literal

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from ..layout import TUNNEL_DEV

End = Literal["cli", "srv"]
ENDS: tuple[End, End] = ("cli", "srv")
#: The UDP port WireGuard listens on and the FOU receiver's.
PORT = {"wireguard": 51821, "fou": 5556}
#: Bytes each kind adds to a packet (IPv4 outer header): the tunnel's MTU is the
#: underlay's minus this, so outer packets are never fragmented. ESP: 20 IP + 8 SPI and
#: sequence + 16 IV + up to 17 padding and trailer + 16 ICV.
OVERHEAD = {"wireguard": 60, "fou": 28, "ipsec": 77}
#: IPsec: the xfrm interface id and request id that mark fl's policies and states, and the
#: SPI of the SA each end sends with.
IPSEC_ID = 113
IPSEC_SPI: dict[End, str] = {"cli": "0x0f170001", "srv": "0x0f170002"}
MTU = "@MTU@"
KeyPart = Literal["auth", "enc"]
#: Bytes of each SA key fl makes: HMAC-SHA256's (256 bits) and AES-CBC's (128 bits).
KEY_BYTES: dict[KeyPart, int] = {"auth": 32, "enc": 16}


@dataclass(frozen=True)
class WgKey:
    """A WireGuard key pair, base64 as wg reads and prints keys (Curve25519: RFC 7748's X25519)."""

    private: str
    public: str


def wireguard_key() -> WgKey:
    """A fresh key pair (as `wg genkey | wg pubkey` makes one)."""
    key = X25519PrivateKey.generate()
    raw = serialization.Encoding.Raw
    private = key.private_bytes(raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    public = key.public_key().public_bytes(raw, serialization.PublicFormat.Raw)
    return WgKey(private=base64.b64encode(private).decode(), public=base64.b64encode(public).decode())


@dataclass(frozen=True)
class TunnelPlan:
    """A cell's cli-srv tunnel (plan.tunnel_plan): its kind, the bytes it adds to a packet
    (its MTU is the underlay's less this) and its keys, made per cell: for IPsec, each
    placeholder of tunnel.ip → its key (each sender's SA: authentication and encryption);
    for WireGuard, each end's key pair."""

    kind: str  # wireguard, fou or ipsec (OVERHEAD's keys)
    overhead: int
    fill: dict[str, str] = field(default_factory=dict)
    wg: dict[End, WgKey] = field(default_factory=dict)  # WireGuard: each end's key pair (made per cell)


def outer_filter(kind: str) -> str:
    """A pcap filter for the tunnel's outer packets (the middlebox's queue sampler waits
    for the test's first one)."""
    return "esp" if kind == "ipsec" else f"udp port {PORT[kind]}"


def key(sender: End, part: KeyPart) -> str:
    """The placeholder of the key of SENDER's SA (its authentication or encryption key)."""
    return f"@{part.upper()}_{sender}@"


@dataclass(frozen=True)
class EndLink:
    """One end of the tunnel as its ip commands name it: its underlay and its addresses (a
    host's whole end, for its scripts, is cell_scripts.TunnelEnd)."""

    host: End
    dev: str  # its testbed interface, the underlay
    addr: str  # its address there (outer packets)
    inner: str  # its address in the tunnel, with the prefix length


def tunnel_ip(kind: str, me: EndLink, peer: EndLink, replay_window: int) -> list[str]:
    """ME's tunnel to PEER as `ip -batch` lines (with the MTU's and keys' placeholders);
    KIND: wireguard, fou or ipsec (the scenario's tunnel key)."""
    return [*_device(kind, me, peer, replay_window), f"link set dev {TUNNEL_DEV} mtu {MTU}",
            f"addr add {me.inner} dev {TUNNEL_DEV}", f"link set dev {TUNNEL_DEV} up"]


def _device(kind: str, me: EndLink, peer: EndLink, replay_window: int) -> list[str]:
    if kind == "wireguard":
        return [f"link add dev {TUNNEL_DEV} type wireguard"]
    if kind == "fou":
        port = PORT["fou"]
        return [f"fou add port {port} ipproto 4",
                f"link add dev {TUNNEL_DEV} type ipip local {me.addr} remote {peer.addr} ttl 64 tos inherit "
                f"encap fou encap-sport auto encap-dport {port}"]
    i = IPSEC_ID
    sa = [f"xfrm state add src {src.addr} dst {dst.addr} proto esp spi {IPSEC_SPI[src.host]} reqid {i} mode tunnel "
          f"if_id {i} auth-trunc hmac(sha256) {key(src.host, 'auth')} 128 enc cbc(aes) {key(src.host, 'enc')} "
          f"replay-window {replay_window}" for src, dst in ((me, peer), (peer, me))]
    policy = [f"xfrm policy add src 0.0.0.0/0 dst 0.0.0.0/0 dir {way} if_id {i} tmpl src {src.addr} dst {dst.addr} "
              f"proto esp reqid {i} mode tunnel" for way, src, dst in (("out", me, peer), ("in", peer, me))]
    return [f"link add dev {TUNNEL_DEV} type xfrm dev {me.dev} if_id {i}", *sa, *policy]
