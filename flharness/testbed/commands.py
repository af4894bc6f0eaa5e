"""Each host's command files for one cell, rendered here from its configuration
(CellConfig): the shapes of every tc, nft and sysctl command fl runs for a cell live in
this module (and the tc layout in layout.py). The cell role writes the files on the host
and runs them with tc -batch, nft -f and sysctl (its setup script: cell_scripts.py); tests compare
them with golden files.

mid:  reset.tc (fl's qdiscs removed), bottleneck.tc (both directions' bottleneck, the path
      delay and impairments on the IFBs, SYN rewrites by tc), ecn.nft (the per-flow ECN
      rules and fresh counters), schedule.steps with schedule-N.tc (the rate schedule);
cli:  client.tc (the client's own root qdisc), ecn-tunnel.nft / ecn-tunnel.tc (ECN
      rewrites at a tunnel's entrance);
cli, srv: tunnel.ip (the cell's tunnel: tunnel.py), module_params.conf (the cell's module
      parameters: "PATH VALUE" lines, PATH from module_param_path);
all:  sysctl.conf (the cell's sysctls for the host, key=value, in order).
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import layout
from ..hosts import HOSTS
from ..layout import TUNNEL_DEV
from ..results.cell_record import CellConfig, Direction, LinkConfig, Links
from ..scenario.features import RTT_SPLITS
from ..teardown_format import schedule_planned
from ..units import Duration
from . import ecn_rules
from .inventory import Inventory
from .playbook_vars import RunVars
from .tunnel import ENDS, EndLink, tunnel_ip

HostFiles = dict[str, str]  # file name → its text
NETEM_LIMIT = 100000  # packets: netem delay lines never drop
PARAM_HOSTS = ("cli", "srv")  # where module parameters are set: the endpoints run the CCs
#: The sysctls each host's teardown log shows (with those the cell sets).
STATE_SYSCTLS = ("net.ipv4.tcp_congestion_control", "net.ipv4.tcp_ecn", "net.ipv4.tcp_sack",
                 "net.ipv4.tcp_timestamps", "net.ipv4.tcp_window_scaling", "net.ipv4.tcp_rmem",
                 "net.ipv4.tcp_wmem", "net.core.default_qdisc", "net.ipv4.tcp_pacing_ss_ratio",
                 "net.ipv4.tcp_pacing_ca_ratio", "net.ipv4.ip_forward")
#: The test's first packet at the middlebox without a tunnel: Flent's ping's first echo request.
PING_FILTER = "icmp or (icmp6 and ip6[40] == 128)"


def module_param_path(module: str, param: str) -> str:
    """Where the kernel shows MODULE's parameter PARAM (and takes a new value)."""
    return f"/sys/module/{module}/parameters/{param}"


def module_param_paths(config: CellConfig) -> list[str]:
    return [module_param_path(m, p) for m, params in (config.module_params or {}).items() for p in params]


@dataclass(frozen=True)
class Ports:
    """The testbed's interfaces a cell's commands name."""

    mid_cli: str  # the middlebox's port facing the client (download queue, upload's ingress)
    mid_srv: str  # facing the server (upload queue)
    cli: str  # the client's interface
    tunnel: str  # the tunnel device on cli and srv
    ends: tuple[EndLink, EndLink] | None = None  # cli's and srv's, where both have a tunnel address

    @property
    def queues(self) -> dict[Direction, str]:
        """Direction → the middlebox's port whose qdisc queues it (its bottleneck): upload's
        towards srv, download's towards cli. The one place this is decided: the commands,
        the queue sampler (plan.py) and cell.json's `ports` (run/provenance_log.py) take it."""
        return {"up": self.mid_srv, "down": self.mid_cli}

    @staticmethod
    def ifb(dev: str) -> str:
        return layout.IFB_PREFIX + dev


def ports(inv: Inventory) -> Ports:
    e = {h: inv.endpoint(h) for h in ENDS}
    ends = [EndLink(h, e[h].dev, e[h].ip, inner) for h in ENDS if (inner := e[h].tunnel_addr) is not None]
    return Ports(mid_cli=inv.middlebox.cli_dev, mid_srv=inv.middlebox.srv_dev, cli=e["cli"].dev,
                 tunnel=TUNNEL_DEV, ends=(ends[0], ends[1]) if len(ends) == 2 else None)


def host_files(config: CellConfig, ports: Ports, settings: RunVars, tcp_rewrite: ecn_rules.TcpRewrite | None,
               ) -> dict[str, HostFiles]:
    """Every host's command files for CELL."""
    files: dict[str, HostFiles] = {h: {} for h in HOSTS}
    for host, sysctls in config.sysctls.items():
        files[host]["sysctl.conf"] = _lines(f"{k}={v}" for k, v in sysctls.items())
    if config.module_params:
        for host in PARAM_HOSTS:
            files[host]["module_params.conf"] = _lines(f"{module_param_path(m, p)} {v}"
                                                       for m, params in config.module_params.items()
                                                       for p, v in params.items())
    ecn = ecn_commands(config, ports, tcp_rewrite)
    at_mid = ecn if config.tunnel is None else None
    files["mid"] |= {"reset.tc": _lines(reset(ports, settings)), "bottleneck.tc": _lines(bottleneck(config, ports, settings, at_mid))}
    if settings.nft:
        files["mid"]["ecn.nft"] = _lines([f"flush chain {layout.NFT_TABLE} ecn_rewrite",
                                          *(f"add rule {layout.NFT_TABLE} ecn_rewrite {r}" for r in (at_mid.nft if at_mid else [])),
                                          f"reset counters table {layout.NFT_TABLE}"])
    files["mid"] |= schedule_files(config, ports, settings)
    if config.client_qdisc:
        files["cli"]["client.tc"] = _lines([f"qdisc add dev {ports.cli} root {config.client_qdisc}"])
    if ecn is not None and config.tunnel is not None:
        files["cli"] |= tunnel_ecn(ecn)
    if config.tunnel is not None and ports.ends is not None:  # without, cell_vars has said which address is missing
        cli, srv = ports.ends
        for me, peer in ((cli, srv), (srv, cli)):
            files[me.host]["tunnel.ip"] = _lines(tunnel_ip(config.tunnel, me, peer, config.replay_window or 0))
    return {h: f for h, f in files.items() if f}


def _lines(lines: object) -> str:
    return "".join(f"{line}\n" for line in lines)  # type: ignore[attr-defined]


def reset(ports: Ports, settings: RunVars) -> list[str]:
    """Remove fl's qdiscs from the middlebox's ports (what is not there is no error: -force)."""
    out = []
    for dev in (ports.mid_cli, ports.mid_srv):
        out += [f"qdisc del dev {dev} root", f"qdisc del dev {dev} ingress"]
        if settings.ifb:
            out.append(f"qdisc del dev {ports.ifb(dev)} root")
    return out


def bottleneck(config: CellConfig, ports: Ports, settings: RunVars, ecn: ecn_rules.EcnCommands | None) -> list[str]:
    """Upload's bottleneck on the port towards srv, download's towards cli, then the path
    delay of each way on the IFB of the port it enters by, then tc's ECN rewrites."""
    links, queues = config.bottleneck, ports.queues
    out = shape(queues["up"], links.up, settings, header_hash_queues(config, links.up))
    out += shape(queues["down"], links.down, settings, header_hash_queues(config, links.down))
    if (plan := delay_plan(config)) is not None:
        out += path_delay(ports.mid_cli, ports.ifb(ports.mid_cli), plan, "up")
        out += path_delay(ports.mid_srv, ports.ifb(ports.mid_srv), plan, "down")
    return out + (ecn.tc if ecn else [])


def shape(dev: str, link: LinkConfig, settings: RunVars, hash_queues: int | None = None) -> list[str]:
    """A port's bottleneck (layout.py); in tunnel cells an FQ qdisc hashes outer headers."""
    out = [] if link.self_shaping else layout.shaper(dev, link.rate, settings.htb_args)
    out.append(layout.declared(dev, link.qdisc, link.self_shaping))
    if hash_queues:
        out.append(f"filter add dev {dev} parent {layout.declared_handle(link.self_shaping)} handle 1 protocol all "
                   f"prio 1 flow hash keys src,dst,proto,proto-src,proto-dst divisor {hash_queues}")
    return out


def path_delay(dev: str, ifb: str, plan: DelayPlan, direction: Direction) -> list[str]:
    """netem on IFB for traffic entering by DEV: one for all flows, or one class per RTT
    chosen by the flows' TOS marks; then DEV's ingress redirected to IFB."""
    classes = plan.classes(direction)
    if plan.shared:
        out = [f"qdisc add dev {ifb} root handle {layout.ROOT} netem {' '.join(classes[0].netem)}"]
        out += _chained(ifb, layout.ROOT, layout.CHAINED_NETEM, classes[0])
    else:
        out = [f"qdisc add dev {ifb} root handle {layout.ROOT} htb default {layout.DELAY_CLASS + plan.default}"]
        for i, c in enumerate(classes):
            out += [f"class add dev {ifb} parent {layout.ROOT} classid 1:{layout.DELAY_CLASS + i} htb rate {layout.DELAY_RATE}",
                    f"qdisc add dev {ifb} parent 1:{layout.DELAY_CLASS + i} handle {layout.DELAY_NETEM + i}: "
                    f"netem {' '.join(c.netem)}"]
            out += _chained(ifb, f"{layout.DELAY_NETEM + i}:", layout.CHAINED_NETEM + i, c)
        out += [f"filter add dev {ifb} parent {layout.ROOT} protocol ip prio 1 u32 match ip tos {f.tos} 0xfc "
                f"flowid 1:{layout.DELAY_CLASS + f.index}" for f in plan.filters]
    return out + [f"qdisc add dev {dev} handle {layout.INGRESS} ingress",
                  f"filter add dev {dev} parent {layout.INGRESS} protocol all prio {layout.REDIRECT_PRIO} u32 match u32 0 0 "
                  f"action mirred egress redirect dev {ifb}"]


@dataclass(frozen=True)
class DelayClass:
    """One RTT's netem, one way: its arguments, and a second netem under it (chained
    impairments, e.g. slotting), or none."""

    netem: tuple[str, ...]
    chained: tuple[str, ...] = ()


@dataclass(frozen=True)
class TosFilter:
    """Packets whose TOS (DSCP bits) is TOS take delay class INDEX."""

    tos: str
    index: int


@dataclass(frozen=True)
class DelayPlan:
    """The path's delay classes per way, how packets choose one, and the class of
    unmarked traffic; SHARED: one class for all (no filters)."""

    up: tuple[DelayClass, ...]
    down: tuple[DelayClass, ...]
    filters: tuple[TosFilter, ...]
    default: int
    shared: bool

    def classes(self, direction: Direction) -> tuple[DelayClass, ...]:
        return self.up if direction == "up" else self.down


def delay_plan(config: CellConfig) -> DelayPlan | None:
    """netem on the middlebox's ingress IFBs: each flow's RTT split between the two ways
    (half each, or all on one way: rtt_split), plus the cell's netem impairments per
    direction ('up' = traffic from cli).

    One class when all flows share an RTT; otherwise one class per distinct RTT,
    chosen by the flows' TOS marks; unmarked traffic (ping) follows flow 1.
    """
    if not config.needs_path_netem:
        return None
    rtts = list(dict.fromkeys(f.rtt for f in config.flows))  # distinct, in flow order
    filters = tuple(TosFilter(f"0x{f.tos:02x}", rtts.index(f.rtt))
                    for f in config.flows if f.tos is not None) if len(rtts) > 1 else ()
    shares = dict(zip(("up", "down"), RTT_SPLITS[config.split]))

    def netem(direction: Direction, rtt: str) -> DelayClass:
        one_way = Duration.of_seconds(Duration.parse(rtt).seconds * shares[direction])
        args = config.netem.delay_args(direction, one_way) if config.netem else ["delay", one_way.text]
        chained = config.netem.chained(direction) if config.netem else []
        return DelayClass((*args, "limit", str(NETEM_LIMIT)), tuple(chained))

    return DelayPlan(up=tuple(netem("up", r) for r in rtts), down=tuple(netem("down", r) for r in rtts),
                     filters=filters, default=rtts.index(config.flows[0].rtt), shared=len(rtts) == 1)


#: FQ qdiscs that pick a flow queue by the skb's hash, with their default queue count.
#: On one machine an encapsulated packet keeps its inner flow's hash (WireGuard keeps
#: it on purpose), so in tunnel cells fl makes them hash the packet's own (outer)
#: headers with a cls_flow filter, as a router does.
HASHED_FQ = {"fq_codel": 1024, "fq_pie": 1024}


def header_hash_queues(config: CellConfig, link: LinkConfig) -> int | None:
    """The flow queues a tunnel cell's FQ qdisc hashes outer headers into, else None."""
    words = link.words
    if config.tunnel is None or not words or words[0] not in HASHED_FQ:
        return None
    given = words[words.index("flows") + 1] if "flows" in words[:-1] else ""
    return int(given) if given.isdigit() else HASHED_FQ[words[0]]  # tc rejects a non-number


def _chained(ifb: str, netem: str, handle: int, delay_class: DelayClass) -> list[str]:
    """The second netem stage under the delay netem NETEM (its only child), if any."""
    chained = delay_class.chained
    return [f"qdisc add dev {ifb} parent {netem.rstrip(':')}:1 handle {handle}: netem {' '.join(chained)}"] if chained else []


def ecn_commands(config: CellConfig, ports: Ports, tcp_rewrite: ecn_rules.TcpRewrite | None) -> ecn_rules.EcnCommands | None:
    """The cell's per-flow ECN rewrites (ecn_rules.py): at the middlebox on packets from the
    client, or in tunnelled cells at the client's tunnel entrance."""
    rules = ecn_rules.cell_rules(config.flows)
    if not rules:
        return None
    if config.tunnel is not None:
        return ecn_rules.commands(rules, ports.tunnel, "cli", tcp_rewrite)
    return ecn_rules.commands(rules, ports.mid_cli, "mid", tcp_rewrite, ingress_exists=delay_plan(config) is not None)


def tunnel_ecn(ecn: ecn_rules.EcnCommands) -> HostFiles:
    """The client's rules at its tunnel entrance: a table of their own, on the output hook."""
    out = {}
    if ecn.nft:
        out["ecn-tunnel.nft"] = _lines([f"add table {layout.NFT_TUNNEL_TABLE}",
                                        f"add chain {layout.NFT_TUNNEL_TABLE} ecn_rewrite {{ type filter hook output priority mangle; "
                                        "policy accept; }",
                                        *(f"add rule {layout.NFT_TUNNEL_TABLE} ecn_rewrite {r}" for r in ecn.nft)])
    if ecn.tc:
        out["ecn-tunnel.tc"] = _lines(ecn.tc)
    return out


def schedule_files(config: CellConfig, ports: Ports, settings: RunVars) -> HostFiles:
    """The rate schedule: schedule-N.tc, the N-th step's batch, and schedule.steps, one line
    per step: microseconds after Flent's start, its batch file, its record (schedule_planned)."""
    out, steps = {}, []
    before: Links = config.bottleneck
    queues = ports.queues
    for i, step in enumerate(config.steps, 1):
        out[f"schedule-{i}.tc"] = _lines(change(queues["up"], step.up, before.up, settings)
                                         + change(queues["down"], step.down, before.down, settings))
        planned = schedule_planned(i, step.at_s, f"{step.up.rate} {step.up.qdisc}", f"{step.down.rate} {step.down.qdisc}")
        steps.append(f"{round(step.at_s * 1e6)} schedule-{i}.tc {planned}")
        before = step
    if steps:
        out["schedule.steps"] = _lines(steps)
    return out


def change(dev: str, link: LinkConfig, before: LinkConfig, settings: RunVars) -> list[str]:
    """A port's bottleneck changed in place from BEFORE: its htb class's rate, and its qdisc
    where the step changes the qdisc's words; or the self-shaping qdisc (the kind must
    stay). A qdisc whose words stay is left alone: some (dualpi2) refuse a change without
    options, and the change of the others would do nothing."""
    if link.self_shaping:
        return [layout.declared(dev, link.qdisc, True, verb="change")]
    out = [layout.htb_class(dev, link.rate, settings.htb_args, verb="change")]
    return out + ([layout.declared(dev, link.qdisc, False, verb="change")] if link.qdisc != before.qdisc else [])
