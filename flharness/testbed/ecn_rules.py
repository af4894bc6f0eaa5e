"""The commands that make a cell's per-flow ECN actions (flharness/ecn.py) happen.

Packets from the client are told apart by their DSCP (each flow's own). Rewrites of the
IP ECN field are nftables rules. Clearing a SYN's AE, CWR and ECE (strip-negotiation)
rewrites the TCP header, which nftables cannot do everywhere: Linux 7.x refuses any
nftables write to the TCP header's byte 12 (data offset, where AE lives), and nftables
writes the flags byte only as part of the 16-bit word starting there (to fix the
checksum), so the rule matches and silently changes nothing. fl therefore clears them
with a tc filter (u32 match, pedit, then csum recomputing the TCP checksum) wherever
the kernel has act_pedit and act_csum, and with an nftables rule only on kernels that
lack them and let nftables write the TCP header (the probe tries both for real:
programs/probe.py). Every rule counts what it matched (the teardown log), and the cell's
verdict checks the result in the captures (run/effects.py).

At the middlebox the rules act on packets arriving from the client (nftables' forward
hook; tc on the client port's ingress, before the path delay's redirect to its IFB); in
tunnelled cells at the client's tunnel entrance (nftables' output hook; tc on the tunnel
device's egress), since a tunnel copies the ECN field to its outer header but need not
copy the DSCP.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..ecn import ACTIONS, CONTROL_FLAGS, CWR, ECE, SYN, rule_comment, tc_cookie
from ..results.cell_record import FlowConfig

#: nftables statements (match, then rewrite) of the actions on the IP ECN field.
NFT_IP = {
    "bleach": "ip ecn set not-ect",
    "ect1": "ip ecn ect0 ip ecn set ect1",
    "ect0": "ip ecn ect1 ip ecn set ect0",
    "force-ect1": "tcp flags & syn != syn ip ecn != ce ip ecn set ect1",
    "ce-bleach": "ip ecn ce ip ecn set ect0",
}
#: strip-negotiation as nftables statements, where the kernel lets nftables write the TCP
#: header: a SYN (no other control flag) gets its reserved bits (AE) and ECE/CWR cleared.
NFT_STRIP = "tcp flags & (fin | syn | rst | psh | ack | urg) == syn tcp reserved set 0 tcp flags set syn"
TCP_AT = 20  # the TCP header's offset in an IPv4 packet without options (the u32 filter requires IHL 5)
STRIP_PRIO = 1  # tc filter priority: before the path delay's redirect (prio 10, layout.REDIRECT_PRIO)
TcpRewrite = Literal["tc", "nft"]


@dataclass(frozen=True)
class FlowRule:
    flow: int  # 1-based flow index
    dscp: int
    actions: tuple[str, ...]


@dataclass(frozen=True)
class EcnCommands:
    """nftables rule bodies (for `add rule TABLE CHAIN …`) and tc batch lines."""

    nft: list[str]
    tc: list[str]


def commands(rules: list[FlowRule], dev: str, at: Literal["mid", "cli"], tcp_rewrite: TcpRewrite | None,
             ingress_exists: bool = False) -> EcnCommands:
    """The ECN rules on DEV: the middlebox's port facing the client (AT mid: nftables'
    iifname, tc on its ingress, whose ingress qdisc the path delay may have added,
    INGRESS_EXISTS) or the client's tunnel device (AT cli: oifname, tc on its egress)."""
    nft, tc = [], []
    match_dev = f'{"iifname" if at == "mid" else "oifname"} "{dev}"'
    for r in rules:
        for action in r.actions:
            if action in NFT_IP or tcp_rewrite == "nft":
                statement = NFT_IP.get(action, NFT_STRIP)
                nft.append(f'{match_dev} ip dscp {r.dscp} {statement} counter comment "{rule_comment(r.flow, action)}"')
            elif tcp_rewrite == "tc":
                tc.append(_tc_strip(dev, at, r))
            else:
                raise ValueError(f"no way to rewrite TCP headers for {action} (the probe found neither)")
    if tc:
        hook = ["qdisc add dev " + dev + (" handle ffff: ingress" if at == "mid" else " clsact")]
        tc = ([] if ingress_exists and at == "mid" else hook) + tc
    return EcnCommands(nft, tc)


def _tc_strip(dev: str, at: str, r: FlowRule) -> str:
    """A u32 filter for the flow's SYNs (IHL 5, its DSCP, TCP, SYN the only control flag):
    pedit clears AE (byte 12, bit 0) and CWR/ECE (byte 13), csum fixes the TCP checksum,
    and classification continues (to the path delay's redirect)."""
    parent = "parent ffff:" if at == "mid" else "egress"
    flags = TCP_AT + 13
    return (f"filter add dev {dev} {parent} protocol ip prio {STRIP_PRIO} u32"
            f" match u8 0x45 0xff at 0 match ip dsfield 0x{r.dscp << 2:02x} 0xfc match ip protocol 6 0xff"
            f" match u8 0x{SYN:02x} 0x{CONTROL_FLAGS:02x} at {flags}"
            f" action pedit munge offset {TCP_AT + 12} u8 set 0 retain 0x01"
            f" munge offset {flags} u8 set 0 retain 0x{ECE | CWR:02x} pipe"
            f" action csum tcp continue cookie {tc_cookie(r.flow)}")


def flow_rules(flows: list[tuple[int, int | None, str]]) -> list[FlowRule]:
    """(index, DSCP, '+'-joined actions) per flow → the flows that have actions."""
    out = []
    for index, dscp, ecn in flows:
        actions = tuple(a for a in ecn.split("+") if a != "none")
        if actions and dscp is not None:
            unknown = [a for a in actions if a not in ACTIONS]
            if unknown:
                raise ValueError(f"unknown ECN action(s) {unknown}")
            out.append(FlowRule(index, dscp, actions))
    return out


def cell_rules(flows: list[FlowConfig]) -> list[FlowRule]:
    """The rules of a cell's flows (numbered from 1, as Flent numbers them)."""
    return flow_rules([(i, f.dscp, f.ecn_actions) for i, f in enumerate(flows, 1)])

