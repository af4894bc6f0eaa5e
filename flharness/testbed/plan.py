"""What the roles get for a run and for one cell (Ansible extra vars)."""
from __future__ import annotations

import json
import re
import secrets
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..cells import Cell
from ..flent_tests import PING
from ..hosts import HOSTS, SCHEME_PORT, UDP_PORT, VIDEO_PORT
from ..results import cell_folder
from ..results.cell_record import CellConfig, FlowConfig
from . import ecn_rules, tunnel
from .cell_scripts import Bottleneck, Capture, CellHostPlan, Tunnel, TunnelEnd, collect_script, setup_script, tunnel_down
from .commands import PARAM_HOSTS, PING_FILTER, STATE_SYSCTLS, Ports, ecn_commands, host_files, module_param_paths, ports
from .flent_script import FLENT_FILE, FlentRun, IrttClient, UdpClient, VideoClient, flent_script
from .inventory import Inventory
from .playbook_vars import CellHostVars, CellVars, HostScripts, RunVars, TestbedVars
from .scheme_scripts import SchemeSide
from .state_script import STATE_FILE, EcnPlace, HostState, state_script
from .testbed_scripts import Link, RunHost, down_script, helpers_script, up_script
from .tunnel import TunnelPlan, WgKey, outer_filter, wireguard_key

XZ_LEVEL = 1  # xz preset for captures: -1 is about 6× faster than -6 for ~20 % larger files
TIMEOUT_MARGIN = 120  # a Flent run taking this much longer than planned is killed
#: The shortest interval between samples of the middlebox's queues (fl-qdisc-sample):
#: each sample starts a tc, which costs most in an emulated VM guest.
QUEUE_INTERVAL_MIN = {"host": 0.1, "vm": 1.0}


def run_vars(cells: list[Cell], ifb: bool, nft: bool, htb_args: list[str] | None = None,
             dilation: float = 1.0, shared_fs: bool = True, vm: bool = False) -> RunVars:
    """fl_run: what the testbed must provide for all cells of this run.

    DILATION stretches timeouts measured in the testbed's clock: in a VM on QEMU's
    virtual clock, waiting for I/O (the host filesystem) skips guest time forward."""
    keys: dict[str, set[str]] = {}
    configs = [c.config for c in cells]
    for config in configs:
        for host, settings in config.sysctls.items():
            keys.setdefault(host, set()).update(settings)
    params = sorted({path for config in configs for path in module_param_paths(config)})
    return RunVars(ifb=ifb and any(c.needs_path_netem for c in configs), nft=nft,
                   udp=any(c.udp for c in configs), video=any(c.video for c in configs), tunnels=sorted({c.tunnel for c in configs if c.tunnel}),
                   sysctl_keys={h: sorted(k) for h, k in keys.items()}, htb_args=htb_args or [],
                   module_params={h: params for h in PARAM_HOSTS} if params else {},
                   wait_timeout=int(15 * dilation), dilation=dilation, shared_fs=shared_fs, stage_cells=vm,
                   xz_level=XZ_LEVEL, queue_interval_min=QUEUE_INTERVAL_MIN["vm" if vm else "host"])


def servers_argv(inv: Inventory, run_vars: RunVars, srv_dir: str) -> list[str]:
    """fl-servers' arguments (flharness/programs/fl-servers: the server's daemons, started
    with the testbed and again before each cell): the server's scratch folder SRV_DIR; the
    address they listen on, every address in runs with tunnels (built per cell, after the
    servers start); netperf's and irtt's ports (the inventory's, on srv); iperf's UDP and
    video ports where some cell has such a flow, else '-'; and netserver's wait in tenths
    of a second."""
    srv = inv.hosts["srv"]
    return [srv_dir, "0.0.0.0" if run_vars.tunnels else inv.srv_ip, str(srv.netperf_port), str(srv.irtt_port),
            str(UDP_PORT) if run_vars.udp else "-", str(VIDEO_PORT) if run_vars.video else "-",
            str(run_vars.wait_timeout * 10)]


DRY_RUN_ID = "fl-000000"  # the testbed id scripts rendered for show (the dry run, tests) name
DRY_RUN_ROOT = "/run/fl"  # and their state root


def host_dirs(testbed_id: str, state_root: str) -> dict[str, str]:
    """Each host's scratch folder on a testbed (pid files, generated scripts, sysctl baselines)."""
    return {h: f"{state_root}/{testbed_id}/{h}" for h in HOSTS}


def host_links(inv: Inventory) -> dict[str, tuple[Link, ...]]:
    """Each host's testbed interfaces with their addresses (an endpoint's one, the
    middlebox's two ports), and on the middlebox the IFB each port's path delay uses."""
    out: dict[str, tuple[Link, ...]] = {}
    mid = inv.middlebox
    for host in HOSTS:
        pairs = [(mid.cli_dev, mid.cli_addr), (mid.srv_dev, mid.srv_addr)] if host == "mid" else \
            [(inv.endpoint(host).dev, inv.endpoint(host).addr)]
        out[host] = tuple(Link(dev=dev, addr=addr, ifb=Ports.ifb(dev) if host == "mid" else None) for dev, addr in pairs)
    return out


def tunnel_end(inv: Inventory, host: tunnel.End, scratch: str) -> TunnelEnd:
    """HOST's end of the cli-srv tunnel as its scripts build and remove it (the tunnel's
    removal, WireGuard's peer): both ends' testbed addresses and the peer's inner one."""
    peer = next(h for h in tunnel.ENDS if h != host)
    me, other = inv.endpoint(host), inv.endpoint(peer)
    return TunnelEnd(host=host, peer=peer, local=me.ip, remote=other.ip, scratch=scratch, peer_inner=other.tunnel_ip)


def run_hosts(inv: Inventory, dirs: dict[str, str], run_vars: RunVars | None) -> dict[str, RunHost]:
    """Each host's part of the testbed (testbed_scripts.py): its scratch folder DIRS[host],
    links and route (the inventory's), and what the run (RUN_VARS, if any) makes it keep."""
    links = host_links(inv)
    out = {}
    for host in HOSTS:
        end = inv.endpoint(host) if host != "mid" else None
        out[host] = RunHost(
            host=host, dir=dirs[host], links=links[host],
            netns=inv.backend == "netns",
            route=(end.route_to, end.gateway) if end else None,
            sysctl_keys=tuple(run_vars.sysctl_keys.get(host, [])) if run_vars else (),
            module_params=tuple(run_vars.module_params.get(host, [])) if run_vars else (),
            ifb=bool(run_vars and run_vars.ifb), nft=bool(run_vars and run_vars.nft), up_dev=inv.middlebox.cli_dev if host == "mid" else None)
    return out


def host_scripts(inv: Inventory, dirs: dict[str, str], run_vars: RunVars | None) -> dict[str, HostScripts]:
    """fl_testbed: per host, the testbed role's three scripts (testbed_scripts.py); before
    a run has its fl_run (fl clean), only the helpers' and the removal."""
    return {host: HostScripts(helpers=helpers_script(h.dir), down=down_script(h), up=up_script(h) if run_vars else None)
            for host, h in run_hosts(inv, dirs, run_vars).items()}


def playbook_extra_vars(testbed_id: str, state_root: str, inv: Inventory, run_vars: RunVars | None) -> TestbedVars:
    """The extra vars of every playbook on a testbed (TestbedVars); the tunnel removal is
    the teardown of ssh hosts' (roles/cell/tasks/tunnel_down.yml)."""
    dirs = host_dirs(testbed_id, state_root)
    return TestbedVars(fl_testbed_id=testbed_id, fl_host_dirs=dirs, fl_run=run_vars,
                       fl_servers_argv=servers_argv(inv, run_vars, dirs["srv"]) if run_vars else None,
                       fl_tunnel_down={h: tunnel_down(tunnel_end(inv, h, dirs[h])) for h in tunnel.ENDS},
                       fl_testbed=host_scripts(inv, dirs, run_vars))


def ecn_place(cell: Cell, inv: Inventory, tcp_rewrite: ecn_rules.TcpRewrite | None) -> EcnPlace | None:
    """Where the cell's per-flow ECN rewrites happen (their commands: commands.py): at the
    middlebox on packets from cli, or in tunnelled cells at the client's tunnel entrance;
    whether tc filters do some (the teardown log shows their counters)."""
    made = ecn_commands(cell.config, ports(inv), tcp_rewrite)
    if made is None:
        return None
    tunnelled = cell.config.tunnel is not None
    return EcnPlace(at="cli" if tunnelled else "mid", dev=ports(inv).tunnel if tunnelled else ports(inv).mid_cli,
                   tc=bool(made.tc))


def tunnel_plan(cell: Cell, inv: Inventory, keys: bool = True) -> TunnelPlan | None:
    """The cli-srv tunnel of a cell (its commands: each end's tunnel.ip, tunnel.py). Its
    keys are made here, per cell (IPsec's SA keys; each WireGuard end's key pair), and reach
    the hosts only inside their setup scripts (the cell's hand-over). Without KEYS (the dry
    run) each key is KEY_SHOWN instead."""
    kind = cell.config.tunnel
    if kind is None:
        return None
    for host in ("cli", "srv"):
        inv.tunnel_ip(host)  # both ends have an inner address
    fill = {tunnel.key(h, part): "0x" + secrets.token_hex(size) if keys else KEY_SHOWN for h in tunnel.ENDS
            for part, size in tunnel.KEY_BYTES.items()} if kind == "ipsec" else {}
    wg = {h: wireguard_key() if keys else WgKey(private=KEY_SHOWN, public=f"{h.upper()}-PUBLIC-KEY")
          for h in tunnel.ENDS} if kind == "wireguard" else {}
    return TunnelPlan(kind=kind, overhead=tunnel.OVERHEAD[kind], fill=fill, wg=wg)


def netperf_cc(flow: FlowConfig) -> str:
    """A flow's CC as Flent hands it to netperf's -K (local[,remote]: netperf is the
    sender of an upload, netserver of a download); a receiver of its own quoted, so
    Flent's list splitting keeps the pair whole."""
    if not flow.receiver_cc:
        return flow.cc
    local, remote = (flow.cc, flow.receiver_cc) if flow.direction == "up" else (flow.receiver_cc, flow.cc)
    return f'"{local},{remote}"'


#: Flent as the client runs it: the same program without the imports a recording does not
#: use (flharness/programs/fl-flent, in the client's scratch folder, on flent.sh's PATH:
#: flent_script.py).
FLENT = "fl-flent"


def flent_argv(cell: Cell, inv: Inventory, out_dir: Path | str, time_limit: bool = True) -> list[str]:
    """The Flent command for a cell; every coordinate also goes in as a test parameter.
    Not Flent's extended metadata (-x): fl records each host's state itself (setup.log,
    teardown.log), and -x's programs cost 3-4 s of CPU per cell in an emulated guest
    (measured under TCG: a 2 s tcp_1up took 12.3 s with -x, 7.8 s without).
    TIME_LIMIT: wrapped in timeout(1). Not on QEMU's virtual clock: an idle guest's time
    leaps to its next timer (hours while a guest waits on the host's disk), so a limit in
    guest time can kill Flent as it starts; the host's wall-clock watchdog bounds the cell."""
    params: dict[str, str] = {}
    config = cell.config
    test, flows = config.kernel_test, config.kernel_flows  # schemes' flows run beside Flent's
    ccs = [netperf_cc(f) for f in flows]
    if test.per_flow:  # tcp_Nup ignores tcp_cong_control: set each flow's CC
        params["cc_algos"] = ",".join(ccs)
    elif ccs:
        params["tcp_cong_control"] = ccs[0]
    if any(f.tos is not None for f in flows):
        params["markings"] = ",".join(f"0x{f.tos or 0:02x}" for f in flows)
    if test.streams_param:
        params[test.streams_param] = str(len(flows))
    if any(f.start_s for f in flows):
        params["stream_delays"] = ",".join(f"{f.start_s:g}" for f in flows)
    params.update({"fl_scenario": cell.scenario, "fl_cell": cell.name, "fl_config_hash": cell.config_hash})
    params.update({f"fl_{axis}": p.label for axis, p in cell.coords.items()})
    note = json.dumps({"fl": {"scenario": cell.scenario, "cell": cell.name,
                              "config_hash": cell.config_hash, "coordinates": cell.coordinates()}})
    limit = int(config.flent_s + TIMEOUT_MARGIN)
    ping = test is PING  # its ping alone, the whole run: ping.conf has no lead-in of its own
    argv = (["timeout", "-k", "15", str(limit)] if time_limit else []) + [FLENT, test.name,
            "-H", target(cell, inv), "-l", str(config.flent_s if ping else config.length), "-s", f"{config.step_size:g}",
            "--netperf-control-port", str(inv.netperf_port),
            *([] if ping else ["--socket-stats"]), "-D", str(out_dir), "-t", cell.name, "-n", note]
    if config.lead is not None and not ping:  # Flent's own default otherwise
        argv += ["-d", str(config.lead)]
    for key, value in params.items():
        argv += ["--test-parameter", test_parameter(key, value)]
    return argv


def test_parameter(key: str, value: str) -> str:
    """KEY=VALUE as Flent reads it: its key=value parser unquotes twice (shlex, splitting
    on ';' then '='), so a value whose quotes must reach the test's own list splitting
    (a flow's 'local,remote' CCs) is quoted twice."""
    return f"{key}={value}" if '"' not in value else shlex.quote(f"{key}={shlex.quote(value)}")


def cell_vars(cell: Cell, inv: Inventory, cell_dir: Path, time_limit: bool = True, *,
              tcp_rewrite: ecn_rules.TcpRewrite | None, run_vars: RunVars, scratch: dict[str, str],
              keys: bool = True) -> CellVars:
    """fl_cell: everything the roles need for one cell (passed as Ansible extra vars), its
    commands as each host's files (commands.py; each host's state script, state_script.py;
    the client's Flent script, flent_script.py). TIME_LIMIT: Flent's (flent_argv);
    TCP_REWRITE: how the testbed clears a SYN's ECN flags (Capabilities.tcp_rewrite);
    RUN_VARS: the run's fl_run; SCRATCH: each host's scratch folder on the testbed (host_dirs);
    KEYS: IPsec's keys made (tunnel_plan; the dry run shows none)."""
    tunnel_of = tunnel_plan(cell, inv, keys)
    config = cell.config
    ecn, places = ecn_place(cell, inv, tcp_rewrite), cell_hosts(cell, inv, str(cell_dir), run_vars, scratch)
    state_sysctls = {h: list(dict.fromkeys([*STATE_SYSCTLS, *config.sysctls.get(h, {})])) for h in HOSTS}
    files = host_files(config, ports(inv), run_vars, tcp_rewrite)
    for host, script in state_scripts(cell, inv, run_vars, ecn, state_sysctls).items():
        files[host] = {**files.get(host, {}), STATE_FILE: script}
    files["cli"] = {**files.get("cli", {}), FLENT_FILE: flent_script(flent_run(cell, inv, places["cli"], scratch["cli"], time_limit))}
    made = {h: cell_host_plan(cell, inv, h, place, run_vars, scratch, files.get(h, {}), tunnel_of, str(cell_dir))
            for h, place in places.items()}
    return CellVars(name=cell.name, dir=str(cell_dir), tunnel=tunnel_of.kind if tunnel_of else None,
                    hosts={h: CellHostVars(cell_dir=places[h].cell_dir, setup=setup_script(made[h]), collect=collect_script(made[h]))
                           for h in places},
                    files=files)


def flent_run(cell: Cell, inv: Inventory, cli: HostPlace, scratch: str, time_limit: bool) -> FlentRun:
    """What the client's Flent script runs for CELL (flent_script.py): Flent in the client's
    cell folder (CLI.cell_dir), its helpers from its scratch folder SCRATCH, and the cell's
    side flows, each to its server's port: iperf's as fl starts them (hosts.py), irtt's as
    the inventory gives it (fl_irtt_port, on srv)."""
    config = cell.config
    assert cli.capture_dev is not None  # an endpoint's (cell_hosts)
    udp, video, probe = config.udp_rate, config.video, config.probe
    return FlentRun(cell_dir=cli.cell_dir, scratch=scratch, flent=tuple(flent_argv(cell, inv, ".", time_limit)),
                    target=target(cell, inv), capture_dev=cli.capture_dev, sample_sockets="cli" in samplers(config),
                    lead_s=config.lead_s, length=config.length,
                    udp=UdpClient(port=UDP_PORT, bps=int(udp.bps)) if udp else None,
                    video=VideoClient(port=VIDEO_PORT, isochronous=video.isochronous, tos=video.tos) if video else None,
                    probe=IrttClient(port=inv.irtt_port, interval=probe.interval,
                                    tos=probe.tos) if probe else None,
                    schemes=scheme_sides(cell, inv, "cli", cli, scratch))


#: The file a scheme's sender sends ({file}: its folder's, sparse), at least this big.
SCHEME_FILE, SCHEME_FILE_MIN = "data", 1_000_000


def scheme_sides(cell: Cell, inv: Inventory, host: str, place: HostPlace, scratch: str) -> tuple[SchemeSide, ...]:
    """HOST's sides of the cell's scheme flows (scheme_scripts.py), every placeholder of
    their scheme's commands filled in: the client runs each flow's sender, the server its
    receiver; the side that listens starts in the setup, the other with the flows."""
    config = cell.config
    side: Literal["sender", "receiver"] = "sender" if host == "cli" else "receiver"
    client = inv.tunnel_ip("cli") if config.tunnel is not None else inv.endpoint("cli").ip
    out = []
    for n, flow, scheme in config.scheme_flows:
        folder = f"{scratch}/scheme-{n}"
        size = max(SCHEME_FILE_MIN, int(2 * config.bottleneck.of(flow.direction).rate_bps / 8 * config.length))
        values = {"peer": target(cell, inv) if side == "sender" else client, "port": str(SCHEME_PORT + n),
                  "length": str(config.length), "dir": folder, "file": f"{folder}/{SCHEME_FILE}",
                  "file_name": SCHEME_FILE, "bytes": str(size)}
        start: Literal["setup", "lead", "first_ping"] = "setup" if scheme.listens == side else (
            "lead" if side == "sender" else "first_ping")
        out.append(SchemeSide(flow=n, scheme=flow.cc, side=side, scratch=scratch, folder=folder,
                              log=f"{place.cell_dir}/{cell_folder.scheme_log(n, side)}",
                              status=f"{place.cell_dir}/{cell_folder.scheme_events(n, side)}",
                              setup=tuple(fill(argv, values) for argv in scheme.setup.get(side, [])),
                              argv=_with_env(scheme.env.get(side, {}), fill(scheme.command(side), values), values),
                              start=start, stop=scheme.stop,
                              stdin=fill([scheme.stdin.get(side, "/dev/null")], values)[0],
                              stdout="/dev/null" if scheme.stdout.get(side) == "discard" else "-",
                              file_bytes=size if side == "sender" else None,
                              file=values["file"] if side == "sender" else None, first_ping_dev=place.capture_dev))
    return tuple(out)


def _with_env(env: dict[str, str], argv: tuple[str, ...], values: dict[str, str]) -> tuple[str, ...]:
    """ARGV run with ENV's variables (env(1) first: every word still one shell word)."""
    if not env:
        return argv
    return ("env", *(f"{k}={v}" for k, v in zip(env, fill(list(env.values()), values))), *argv)


def fill(argv: list[str], values: dict[str, str]) -> tuple[str, ...]:
    """A scheme's command with fl's placeholders ({peer}, {port} …) filled in."""
    return tuple(re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), word) for word in argv)


def cell_host_plan(cell: Cell, inv: Inventory, host: str, place: HostPlace, run_vars: RunVars, scratch: dict[str, str],
              files: dict[str, str], tunnel_of: TunnelPlan | None, results: str) -> CellHostPlan:
    """What HOST's setup and collect scripts do for CELL (cell_scripts.py): PLACE, where it
    writes the cell's files and captures (cell_hosts); FILES, its command files;
    TUNNEL_OF, the cell's tunnel (tunnel_plan); RESULTS, the cell's results folder."""
    config = cell.config
    bottleneck = capture = built = None
    if host == "mid":
        p = ports(inv)
        bottleneck = Bottleneck(summary=summary(cell), devs=tuple(bottleneck_devs(inv, run_vars.ifb)), schedule=bool(config.steps),
                                port_cli=p.mid_cli, queue_interval=max(config.step_size, run_vars.queue_interval_min),
                                queue_up=p.queues["up"], queue_down=p.queues["down"],
                                queue_filter=outer_filter(config.tunnel) if config.tunnel else PING_FILTER,
                                queue_log=f"{place.cell_dir}/{cell_folder.QUEUE_LOG}")
    elif host in tunnel.ENDS and place.capture_dev is not None:
        capture = Capture(dev=place.capture_dev, pcap=f"{place.cell_dir}/{cell_folder.capture(host, compressed=False)}",
                          ss_log=f"{place.cell_dir}/{cell_folder.ss_log(host)}" if host == "srv" and host in samplers(config) else None,
                          target=target(cell, inv), xz_level=None if run_vars.shared_fs else run_vars.xz_level)
        if tunnel_of is not None:
            end = tunnel_end(inv, "cli" if host == "cli" else "srv", scratch[host])
            built = Tunnel(kind=tunnel_of.kind, overhead=tunnel_of.overhead, underlay=inv.endpoint(host).dev, end=end,
                           fill=tunnel_of.fill,
                           wg_private=tunnel_of.wg[end.host].private if tunnel_of.wg else None,
                           wg_peer_public=tunnel_of.wg[end.peer].public if tunnel_of.wg else None)
    return CellHostPlan(host=host, cell=cell.name, scenario=cell.scenario, scratch=scratch[host], files=files,
                    cell_dir=place.cell_dir, staged=place.staged, moves_to=results if place.moves else None,
                    wait_timeout=run_vars.wait_timeout, client_if=inv.endpoint(host).dev if host == "cli" else None,
                    servers=tuple(servers_argv(inv, run_vars, scratch["srv"])) if host == "srv" else None,
                    endpoint=host in tunnel.ENDS, tunnel=built, capture=capture, bottleneck=bottleneck,
                    schemes=scheme_sides(cell, inv, host, place, scratch[host]) if host in tunnel.ENDS else (),
                    lead_s=config.lead_s)


def state_scripts(cell: Cell, inv: Inventory, run_vars: RunVars, ecn: EcnPlace | None,
                  sysctls: dict[str, list[str]]) -> dict[str, str]:
    """Each host's state script for CELL (state_script.py): its teardown log's part."""
    links = host_links(inv)
    return {h: state_script(HostState(host=h, devs=state_devs(cell, inv, run_vars, h), links=[link.dev for link in links[h]],
                                      nft=run_vars.nft, ecn=ecn, tunnel=cell.config.tunnel,
                                      module_params=run_vars.module_params.get(h, []), sysctls=sysctls[h]))
            for h in HOSTS}


def bottleneck_devs(inv: Inventory, ifb: bool) -> list[str]:
    """The middlebox's interfaces whose qdiscs fl owns: its ports, and their IFBs if IFB."""
    p = ports(inv)
    devs = [p.mid_cli, p.mid_srv]
    return devs + ([Ports.ifb(d) for d in devs] if ifb else [])


#: What the dry run shows in place of a key (IPsec's, a WireGuard private key: tunnel_plan).
KEY_SHOWN = "KEY-MADE-PER-CELL"


@dataclass(frozen=True)
class HostPlace:
    """Where one host of a cell writes and captures (cell_hosts)."""

    cell_dir: str  # where it writes the cell's files: the results folder where it shares the controller's, else its scratch folder's cell/
    staged: bool  # it writes them into its own folder (cell_dir, emptied before the test): a VM guest, or a host without the controller's filesystem
    moves: bool  # after the test it moves its staged files into the results folder (a VM guest); staged otherwise, fl fetches them (fetch.yml)
    capture_dev: str | None  # cli, srv: the interface tcpdump and the ss sampler watch (the tunnel device in tunnelled cells); None on mid

    def __post_init__(self) -> None:
        if self.moves and not self.staged:
            raise ValueError("a host moves only the files it staged")


def cell_hosts(cell: Cell, inv: Inventory, cell_dir: str, run_vars: RunVars, scratch: dict[str, str]) -> dict[str, HostPlace]:
    """Per host, where it works in CELL (HostPlace): where it writes the cell's files
    (staging), and the device it captures on."""
    staged, moves = staging(run_vars)
    tunnelled, tun = cell.config.tunnel is not None, ports(inv).tunnel
    links = host_links(inv)
    return {host: HostPlace(cell_dir=f"{scratch[host]}/cell" if staged else cell_dir, staged=staged, moves=moves,
                               capture_dev=(tun if tunnelled else links[host][0].dev) if host in tunnel.ENDS else None)
            for host in HOSTS}


def staging(run_vars: RunVars) -> tuple[bool, bool]:
    """Whether a host stages a cell's files in its scratch folder, and whether it then moves
    them into the results folder itself. A host that shares the controller's filesystem
    (namespaces on this machine) writes them straight into the cell's folder; a VM guest,
    which shares it too, stages them (run_vars.stage_cells) and moves them after the test:
    host I/O during a test would make its timing depend on the host's; an ssh host stages
    them for fl to fetch (roles/cell/tasks/fetch.yml)."""
    staged = run_vars.stage_cells or not run_vars.shared_fs
    return staged, staged and run_vars.shared_fs


def state_devs(cell: Cell, inv: Inventory, run_vars: RunVars, host: str) -> list[str]:
    """The interfaces whose qdiscs and link counters HOST's state script shows: its links,
    on mid their IFBs too (where the run has them), on cli and srv the tunnel device
    (tunnelled cells)."""
    devs = [link.dev for link in host_links(inv)[host]]
    if host == "mid" and run_vars.ifb:
        return devs + [Ports.ifb(d) for d in devs]
    return devs + ([ports(inv).tunnel] if cell.config.tunnel is not None and host in tunnel.ENDS else [])


def samplers(config: CellConfig) -> list[str]:
    """The hosts whose sockets are sampled: those that send, and those that receive a flow
    whose receiver runs a CC of its own (its check reads them)."""
    flows = config.kernel_flows  # a scheme's sockets are its programs' (UDP, or TCP of their own choosing)
    senders = {{"up": "cli", "down": "srv"}[f.direction] for f in flows}
    return sorted(senders | {{"up": "srv", "down": "cli"}[f.direction] for f in flows if f.receiver_cc})


def summary(cell: Cell) -> str:
    """One line for the setup log: each direction's bottleneck, and the path."""
    links = cell.config.bottleneck
    up, down = (f"{link.rate}, {link.qdisc}" for link in (links.up, links.down))
    return f"upload: {up}; download: {down}" + ("" if cell.config.needs_path_netem else "; no added path delay or impairment")


def target(cell: Cell, inv: Inventory) -> str:
    """The server address Flent, iperf and the ss sampler talk to (inside the tunnel, if any)."""
    return inv.tunnel_ip("srv") if cell.config.tunnel is not None else inv.srv_ip
