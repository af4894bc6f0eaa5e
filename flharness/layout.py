"""The tc layout of a bottleneck port and of the path delay, defined once: the command
renderer (testbed/commands.py) builds it, the probe tries qdiscs in it, and the analysis
finds the declared qdisc by its handle (analysis/queue.py, qdisc_stats.py).

A port's bottleneck is either an htb root (ROOT) with one class (CLASS) at the link's
rate, holding the declared qdisc (CHILD), or the declared qdisc itself at the root where
it shapes by itself (cake bandwidth …, tbf). The path delay is netem on an IFB fed by the
port's ingress (INGRESS): one netem at the IFB's root, or, for flows with RTTs of their
own, an htb root with a class per RTT (DELAY_CLASS + i) holding a netem (DELAY_NETEM + i).
A second netem stage (the L4S Tests' bursty links) is the child of each delay netem
(CHAINED_NETEM + i).
"""
from __future__ import annotations

ROOT = "1:"  # the root qdisc of a port (htb, or a self-shaping qdisc) and of an IFB
CLASS = "1:1"  # the htb class at the link's rate
CHILD = "10:"  # the declared qdisc under the htb class
INGRESS = "ffff:"  # a port's ingress qdisc (the path delay's redirect, ECN rewrites)
DELAY_CLASS = 10  # an IFB's htb class for the i-th RTT is 1:(10 + i)
DELAY_NETEM = 20  # its netem's handle is (20 + i):
CHAINED_NETEM = 30  # a second netem chained under the i-th delay netem: (30 + i):
DELAY_RATE = "100gbit"  # the delay classes never limit the rate
REDIRECT_PRIO = 10  # the filter that sends a port's ingress to its IFB (ECN filters go before it)
IFB_PREFIX = "ifb4"  # an IFB is named after its port: ifb4mid.l
TUNNEL_DEV = "fl-tun"  # the tunnel device on cli and srv in tunnelled cells
NFT_TABLE = "inet fl"  # fl's nftables table on the middlebox (ECN rewrites, ECN counters)
NFT_TUNNEL_TABLE = "inet fl_tunnel"  # the client's, for ECN rewrites at a tunnel's entrance


def declared_handle(self_shaping: bool) -> str:
    """Where the scenario's qdisc sits: the root when it shapes by itself, else under htb."""
    return ROOT if self_shaping else CHILD


def shaper(dev: str, rate: str, extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    """tc batch lines: the htb root and its class at RATE (EXTRA: more class arguments)."""
    return [f"qdisc add dev {dev} root handle {ROOT} htb default {CLASS.split(':')[1]}", htb_class(dev, rate, extra)]


def htb_class(dev: str, rate: str, extra: list[str] | tuple[str, ...] = (), verb: str = "add") -> str:
    """The tc batch line of the htb class at RATE (VERB change: a rate schedule's step)."""
    tail = f" {' '.join(extra)}" if extra else ""
    return f"class {verb} dev {dev} parent {ROOT} classid {CLASS} htb rate {rate} ceil {rate}{tail}"


def declared(dev: str, qdisc: str, self_shaping: bool, verb: str = "add") -> str:
    """The tc batch line that puts QDISC (tc words) in its place on DEV."""
    where = f"root handle {ROOT}" if self_shaping else f"parent {CLASS} handle {CHILD}"
    return f"qdisc {verb} dev {dev} {where} {qdisc}"
