"""What the kernel and tools can do (probed for real), and what each cell needs of them."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import layout
from .cells import Cell
from .errors import ScenarioError
from .programs import probe
from .qdisc import kernel_module
from .results.cell_record import CcModule, LinkConfig
from .testbed import ecn_rules
from .testbed.commands import delay_plan, header_hash_queues
from .testbed.probe_reply import ProbeReply, QdiscVerdict, parse_reply

#: Tools fl cannot run a cell without, and what each is for.
REQUIRED_TOOLS = {
    "flent": "runs the tests", "netperf": "Flent's TCP flows", "netserver": "netperf's server",
    "fping": "Flent's ICMP ping", "tcpdump": "packet capture", "xz": "compresses captures",
    "tc": "qdiscs", "ip": "namespaces, links", "ss": "socket statistics", "ethtool": "offloads",
}
OPTIONAL_TOOLS = {"irtt": "UDP latency (rrul tests, scenario key probe)", "nft": "firewall counters, ECN rewrites",
                  "iperf": "competing UDP flows and video flows (scenario keys udp, video)", "wg": "WireGuard tunnels (key tunnel)"}
#: The first iperf with isochronous mode (the video flow's frames).
VIDEO_IPERF = (2, 1)
#: What the kernel needs for each kind of tunnel (scenario key tunnel).
TUNNEL_MODULES = {"wireguard": "wireguard", "fou": "fou/ipip (IP in UDP)",
                  "ipsec": "xfrm_interface/esp4 with cbc(aes), hmac(sha256)"}


@dataclass
class Capabilities:
    """A probe result: kernel release, tools, features, and verdicts for specific specs."""

    reply: ProbeReply

    @property
    def kernel(self) -> str:
        return self.reply.kernel

    @property
    def tools(self) -> dict[str, str | None]:
        return self.reply.tools

    @property
    def error(self) -> str | None:
        return self.reply.error

    def feature(self, name: str) -> bool:
        """A feature that works here (one not tried, a tunnel no cell asked for, does not)."""
        return bool(self.reply.features and getattr(self.reply.features, name))

    @property
    def tcp_rewrite(self) -> ecn_rules.TcpRewrite | None:
        """How this testbed clears a SYN's ECN flags (strip-negotiation): a tc filter
        where the kernel has pedit and csum, else nftables where its writes to the TCP
        header take effect (ecn_rules.py), else not at all."""
        works = self.reply.tcp_rewrite
        return "tc" if works.get("tc") else "nft" if works.get("nft") else None

    def missing_tools(self) -> list[str]:
        return [t for t in REQUIRED_TOOLS if not self.tools.get(t)]

    def cc_ok(self, cc: str) -> bool:
        """CC was tried (the cells' CCs, the loaded ones, fl check's list) and a socket took it."""
        return self.reply.ccs.get(cc) is True

    def cc_module(self, cc: str) -> CcModule | None:
        """A usable CC that is a loaded module: its module name, file, sha256, version
        and parameters (probe.cc_module); None when built in."""
        return self.reply.cc_modules.get(cc)

    def _cc_module_named(self, module: str) -> CcModule | None:
        return next((m for m in self.reply.cc_modules.values() if m.module == module), None)

    def _param_problem(self, module: str, params: dict[str, str]) -> str | None:
        """Why the loaded MODULE cannot take PARAMS (a scenario error), or None."""
        found = self._cc_module_named(module)
        if found is None:
            return None  # not loaded here: the cell is skipped (unsupported)
        writable = ", ".join(found.writable) or "none"
        if missing := sorted(set(params) - set(found.parameters)):
            return f"{module} has no parameter {missing[0]} (writable: {writable})"
        if fixed := sorted(set(params) - set(found.writable)):
            return f"{module}.{fixed[0]} is read-only (writable: {writable})"
        return None

    def unsupported(self, cell: Cell) -> str | None:
        """Why this kernel (or testbed) cannot run the cell, or None if it can."""
        return self._bottleneck_gap(cell) or self._path_gap(cell) or self._endpoint_gap(cell)

    def _verdict(self, tokens: tuple[str, ...] | list[str]) -> QdiscVerdict:
        """The verdict on a spec the request named (probe_request: every cell's)."""
        return self.reply.qdiscs[" ".join(tokens)]

    def _bottleneck_gap(self, cell: Cell) -> str | None:
        for link in _links(cell):
            if self._verdict(link.words).verdict == "unsupported":
                return f"kernel lacks {kernel_module(link.words[0])} (qdisc {link.qdisc})"
            if not link.self_shaping and self.reply.kinds["htb"] != "ok":
                return "kernel lacks sch_htb (the shaper)"
        return None

    def _path_gap(self, cell: Cell) -> str | None:
        config = cell.config
        if config.needs_path_netem:
            need = f"the {cell.coords['rtt'].label} RTT" if config.max_rtt_s else "netem impairments"
            for feature, what in (("netem", "sch_netem"), ("ifb", "ifb"), ("u32_mirred", "cls_u32/act_mirred")):
                if not self.feature(feature):
                    said = next((self.reply.feature_errors[f] for f in (feature, "ingress", "ifb")
                                 if f in self.reply.feature_errors), None)
                    return f"kernel lacks {what} (needed for {need})" + (f": {said}" if said else "")
        if any(f.ecn for f in config.flows) and not self.feature("nftables"):
            return "no nftables (nft) on the middlebox: needed for the per-flow ECN rewrites"
        if self.tcp_rewrite is None and any("strip-negotiation" in f.ecn_actions for f in config.flows):
            return ("kernel cannot rewrite TCP flags (strip-negotiation): it lacks act_pedit/act_csum "
                    "and refuses nftables writes to the TCP header")
        return self._tunnel_gap(cell)

    def _tunnel_gap(self, cell: Cell) -> str | None:
        kind = cell.config.tunnel
        if kind is None:
            return None
        if not self.feature(kind):
            said = self.reply.feature_errors.get(kind)
            return f"kernel lacks {TUNNEL_MODULES[kind]} (tunnel {kind})" + (f": {said}" if said else "")
        if kind == "wireguard" and not self.tools.get("wg"):
            return "no wg (wireguard-tools) on the endpoints: needed for WireGuard tunnels"
        if any(f.ecn for f in cell.config.flows) and not self.tools.get("nft"):
            return "no nft on the client: tunnelled flows get their ECN rewrites at the tunnel entrance"
        if not self.feature("cls_flow") and any(header_hash_queues(cell.config, link) for link in _links(cell)):
            return ("kernel lacks cls_flow (needed so the FQ qdisc queues tunnelled packets "
                    "by their outer headers, as a router does)")
        if kind == "wireguard" and cell.config.per_flow_rtt:
            return ("WireGuard does not copy the flows' DSCP to its outer header, so the "
                    "middlebox cannot give tunnelled flows different RTTs")
        return None

    def _endpoint_gap(self, cell: Cell) -> str | None:
        config = cell.config
        for _, flow, scheme in config.scheme_flows:
            if missing := [p for p in scheme.needs if not self.reply.programs.get(p)]:
                return (f"no {', '.join(missing)} on the hosts (scheme {flow.cc}, {scheme.label}: "
                        f"its file says where they come from)")
        for cc in sorted({c for f in config.kernel_flows for c in f.ccs}):
            if not self.cc_ok(cc):
                if refused := self.reply.cc_errors.get(cc):
                    return f"the kernel refused to load tcp_{cc} (congestion control {cc}): {refused}"
                return f"kernel lacks tcp_{cc} (congestion control {cc})"
        for host, settings in config.sysctls.items():
            for key in settings:
                if not self.reply.sysctls[key]:
                    return f"kernel has no sysctl {key} ({host})"
        for module in config.module_params or {}:
            if self._cc_module_named(module) is None:
                return f"kernel has no congestion-control module {module} loaded (module_params)"
        q = config.client_qdisc_words
        if q and self._verdict(q).verdict == "unsupported":
            return f"kernel lacks {kernel_module(q[0])} (client qdisc {' '.join(q)})"
        if config.udp and not self.tools.get("iperf"):
            return "no iperf on the testbed: needed for the competing UDP flow"
        if config.probe and not self.tools.get("irtt"):
            return "no irtt on the testbed: needed for the latency probe"
        if config.video and not at_least(self.tools.get("iperf"), VIDEO_IPERF):
            return (f"iperf {self.tools.get('iperf') or 'missing'} on the testbed: the video flow needs iperf "
                    f"{'.'.join(map(str, VIDEO_IPERF))} or later (isochronous mode)")
        return None

    def check_specs(self, cells: list[Cell], path: Path) -> None:
        """tc rejecting a qdisc's or netem's arguments, or the kernel rejecting a cell's
        sysctl values, is a scenario error, reported before any setup."""
        for cell in cells:
            for axis, tokens in _specs_of(cell):
                verdict = self._verdict(tokens)
                if verdict.verdict == "invalid":
                    raise ScenarioError(path, cell.coords[axis].key,
                                        f"tc rejects {' '.join(tokens)!r}: {verdict.message}")
            for module, params in (cell.config.module_params or {}).items():
                if (problem := self._param_problem(module, params)) is not None:
                    raise ScenarioError(path, cell.coords["module_params"].key, problem)
            for host, settings in cell.config.sysctls.items():
                tried = probe.sysctl_set_key(_pairs(settings))
                if complaint := self.reply.sysctl_sets[tried]:
                    raise ScenarioError(path, cell.coords["sysctls"].key,
                                        f"{host}: the kernel rejects {tried}: {complaint}")


def _pairs(settings: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple((k, str(v)) for k, v in settings.items())


def _links(cell: Cell) -> tuple[LinkConfig, LinkConfig]:
    return cell.config.bottleneck.up, cell.config.bottleneck.down


def _specs_of(cell: Cell) -> list[tuple[str, tuple[str, ...]]]:
    """(axis, tc tokens) of every qdisc the cell puts on the testbed."""
    out = [("qdisc", tuple(link.words)) for link in _links(cell)]
    if q := cell.config.client_qdisc_words:
        out.append(("client_qdisc", tuple(q)))
    plan = delay_plan(cell.config)
    for c in (*plan.up, *plan.down) if plan else ():
        out.append(("netem" if cell.config.netem else "rtt", ("netem", *c.netem)))
        out += [("netem", ("netem", *c.chained))] if c.chained else []
    return out


def probe_request(cells: list[Cell], catalogue: bool = False) -> probe.Request:
    """What to probe for the cells: every distinct qdisc spec, CC, sysctl and sysctl set,
    tunnel kind, and how a SYN's flags can be rewritten. CATALOGUE (fl check): besides,
    every qdisc kind, CC and tunnel fl knows, and each way of rewriting a SYN, not only
    the first that works. A run probes only what its cells need: each module the kernel
    loads for a trial costs, seconds in an emulated VM guest."""
    specs = {(tuple(link.words), link.self_shaping) for c in cells for link in _links(c)}
    specs |= {(tokens, True) for c in cells for axis, tokens in _specs_of(c) if axis != "qdisc"}
    return {
        "layout": {"shaper": layout.shaper("{dev}", "10mbit"), "root": layout.declared("{dev}", "{qdisc}", True),
                   "child": layout.declared("{dev}", "{qdisc}", False), "root_handle": layout.ROOT},
        "qdiscs": [[list(q), s] for q, s in sorted(specs)],
        "ccs": sorted({cc for c in cells for f in c.config.kernel_flows for cc in f.ccs}),
        "tunnels": sorted({c.config.tunnel for c in cells if c.config.tunnel}),
        "catalogue": catalogue,
        "sysctls": sorted({k for c in cells for settings in c.config.sysctls.values() for k in settings}),
        "sysctl_sets": [list(map(list, s)) for s in sorted({_pairs(st) for c in cells
                                                              for st in c.config.sysctls.values()})],
        "tcp_rewrite": {"nft": ecn_rules.NFT_STRIP, "nft_always": catalogue, "tc": ecn_rules.commands(
            [ecn_rules.FlowRule(1, 0, ("strip-negotiation",))], "{dev}", "mid", "tc", ingress_exists=True).tc},
        "timeouts": True,  # a testbed on QEMU's virtual clock turns them off (Testbed.probe)
        "programs": sorted({p for c in cells for _, _, s in c.config.scheme_flows for p in s.needs}),
    }


def probe_for(cells: list[Cell]) -> Capabilities:
    """This machine's kernel, probed in-process for the cells (the namespace backend)."""
    return Capabilities(parse_reply(probe.probe(probe_request(cells)), "this machine"))


def at_least(version: str | None, minimum: tuple[int, ...]) -> bool:
    """Whether a probed tool's VERSION ("2.1.8"; None: missing) is MINIMUM or later."""
    try:
        return version is not None and tuple(int(x) for x in version.split(".")[:len(minimum)]) >= minimum
    except ValueError:  # "present": a version the probe could not read
        return False
