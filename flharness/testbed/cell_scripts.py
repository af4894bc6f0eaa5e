"""Each host's two scripts of a cell, rendered here once per cell from typed values
(CellHostPlan, built in plan.py): setup.sh, which writes the host's command files
(commands.py, state_script.py, flent_script.py) to its scratch folder's cmd/ and runs
them, and collect.sh, which stops what the cell started and records the host's state.
The cell role's tasks of phases setup and collect run them as they are
(fl_cell.hosts[inventory_hostname].setup and .collect, roles/cell/tasks/main.yml): what
differs by host (the middlebox's bottleneck, rate schedule and queue sampler; the
endpoints' captures, tunnel and sysctls; staging) is decided here, not in a template.

setup.sh stops at the first failing command; collect.sh never fails, so every step runs,
and keeps what it printed in collect.log (the role prints it again where Ansible lost it).
Every value from a scenario or an inventory reaches the shell quoted (shlex.quote) or as
an int. The tunnel's removal (tunnel_down) is also the testbed teardown's for ssh hosts
(roles/cell/tasks/tunnel_down.yml, through plan.playbook_extra_vars).
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from ..layout import NFT_TUNNEL_TABLE, TUNNEL_DEV
from ..results import cell_folder
from ..teardown_format import (
    SCHEDULE_LOG,
    SCHEDULE_LOG_SHOW,
    SCHEDULE_OUT,
    SCHEDULE_OUT_SHOW,
    TCP_COUNTERS_FILE,
    TCP_COUNTERS_SHOW,
    XFRM_STAT_FILE,
    command_header,
    tcp_counters_function,
)
from . import scheme_scripts
from .scheme_scripts import SchemeSide
from .tunnel import IPSEC_ID, IPSEC_SPI, MTU, PORT, End

q = shlex.quote
SNAPLEN = 128  # bytes tcpdump keeps of each packet: the headers (tunnelled ones too)
WG_KEY_FILE = "wg.key"  # in the host's scratch folder: its WireGuard private key for the cell
KEYS_END = "FL_KEYS"  # ends the here-document that hands IPsec's keys to sed


@dataclass(frozen=True)
class TunnelEnd:
    """A host's end of the cell's tunnel (tunnel.py: its ip commands are the host's tunnel.ip)."""

    host: End
    peer: End
    local: str  # this end's testbed address (outer packets)
    remote: str  # the other end's
    scratch: str  # the host's scratch folder (its WireGuard key, IPsec's counters)
    peer_inner: str | None = None  # the other end's address in the tunnel (WireGuard's allowed IPs)


@dataclass(frozen=True)
class Tunnel:
    """The cell's tunnel as one end builds it."""

    kind: str  # wireguard, fou or ipsec
    overhead: int  # bytes it adds to a packet: its MTU is the underlay's less this
    underlay: str  # the host's testbed interface
    end: TunnelEnd
    fill: dict[str, str] = field(default_factory=dict)  # IPsec: placeholder in tunnel.ip → its key
    wg_private: str | None = None  # WireGuard: this end's private key
    wg_peer_public: str | None = None  # and its peer's public key


@dataclass(frozen=True)
class Capture:
    """An endpoint's capture for the whole test, and the server's socket sampler."""

    dev: str  # the device tcpdump watches (the tunnel's in tunnelled cells)
    pcap: str
    ss_log: str | None  # srv, when its sockets are sampled: the sampler's log
    target: str  # the server address the sampler watches (inside the tunnel, if any)
    xz_level: int | None  # compress the capture here (hosts without the results folder: fl fetches it)


@dataclass(frozen=True)
class Bottleneck:
    """The middlebox's part: its bottleneck, rate schedule and queue sampler."""

    summary: str  # one line for the setup log
    devs: tuple[str, ...]  # the interfaces whose qdiscs fl owns (shown after setup)
    schedule: bool  # the rate changes during the test (fl-schedule)
    port_cli: str  # the port towards cli: fl-schedule's and the sampler's capture device
    queue_interval: float
    queue_up: str  # the ports whose qdiscs the sampler reads, by the direction each queues
    queue_down: str
    queue_filter: str  # pcap filter for the test's first packet (the sampler waits for it)
    queue_log: str


@dataclass(frozen=True)
class CellHostPlan:
    """What one host's setup and collect scripts do for one cell."""

    host: str
    cell: str
    scenario: str
    scratch: str  # the host's scratch folder ("$dir": helpers, pid files, cmd/)
    files: dict[str, str]  # its command files: name → text
    cell_dir: str  # where it writes the cell's files
    staged: bool  # cell_dir is its own folder, emptied before the test
    moves_to: str | None  # after the test it moves its staged files here (a VM guest)
    wait_timeout: int  # seconds to wait for tcpdump to listen
    client_if: str | None = None  # cli: its interface, whose root qdisc the cell sets
    servers: tuple[str, ...] | None = None  # srv: fl-servers' arguments (plan.servers_argv)
    endpoint: bool = False  # cli, srv: module parameters and TCP metrics
    tunnel: Tunnel | None = None
    capture: Capture | None = None
    bottleneck: Bottleneck | None = None
    schemes: tuple[SchemeSide, ...] = ()  # cli, srv: its sides of the cell's scheme flows (scheme_scripts.py)
    lead_s: int = 0  # Flent's lead-in: a side that starts with the flows waits it out


def _text(lines: list[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


def file_line(name: str, text: str) -> str:
    """The setup script's line that writes command file NAME with TEXT into $cmd."""
    return f"printf '%s' {q(text)} > \"$cmd/\"{q(name)}"


def setup_script(h: CellHostPlan) -> str:
    """HOST's setup script: the command files written, then run (stops at the first failure)."""
    out = [f"# fl cell {h.cell} ({h.scenario}) on {h.host}: its whole",
           "# configuration in one script; rendered by flharness/testbed/cell_scripts.py.",
           "# The commands themselves are the cell's command files, rendered",
           "# by flharness/testbed/commands.py (and the state script collect.sh sources, by",
           "# state_script.py) and written to $cmd here; the script runs them. Stops",
           "# at the first failing command.",
           "exec 2>&1",
           "set -e",
           f"dir={q(h.scratch)}",
           'cmd="$dir/cmd"',
           'run() { echo "+ $*"; "$@"; }',
           "# batch FILE PROGRAM...: print the lines of $cmd/FILE, then run PROGRAM on them (its errors",
           "# are printed, its output is not).",
           'batch() { name=$1; shift; while IFS= read -r l; do echo "+ $1 $l"; done < "$cmd/$name"; "$@" "$cmd/$name" >/dev/null; }',
           'rm -rf "$cmd"',
           'mkdir "$cmd"']
    for name, text in h.files.items():
        out += ["# shellcheck disable=SC2016  # the file's text as it is (a script's own $ included)", file_line(name, text)]
    out += _sysctls_and_endpoint(h)
    if h.tunnel:
        out += _tunnel_up(h.tunnel)
    if h.bottleneck:
        out += _bottleneck(h, h.bottleneck)
    if h.capture:
        out += _capture_start(h, h.capture)
    out += scheme_scripts.setup_lines(h.schemes, h.lead_s)
    return _text(out)


def _sysctls_and_endpoint(h: CellHostPlan) -> list[str]:
    out = ["# Sysctls: those some cell of the run sets go back to their baseline, then this cell's",
           "# own are applied in the order written (sysctl.conf), so nothing carries over between cells.",
           'while IFS= read -r line; do sysctl -qw "$line"; done < "$dir/sysctl-cells"',
           'if [ -f "$cmd/sysctl.conf" ]; then',
           '  while IFS= read -r line; do run sysctl -qw "$line"; done < "$cmd/sysctl.conf"',
           "fi"]
    if h.endpoint:
        out += ["# Module parameters: those some cell of the run sets go back to their values when the",
                "# testbed came up, then this cell's own are written (module_params.conf: \"PATH VALUE\").",
                'while read -r path value; do echo "$value" > "$path"; done < "$dir/params-cells"',
                'if [ -f "$cmd/module_params.conf" ]; then',
                '  while read -r path value; do echo "+ echo $value > $path"; echo "$value" > "$path"; done < "$cmd/module_params.conf"',
                "fi",
                "# Cached TCP metrics (ssthresh, RTT) of earlier cells are forgotten.",
                "ip tcp_metrics flush all 2>/dev/null || true",
                "echo '+ ip tcp_metrics flush all'",
                "# The namespace's TCP counters before this cell's flows (the teardown log: their growth).",
                tcp_counters_function(),
                f'{TCP_COUNTERS_SHOW} > "$dir/{TCP_COUNTERS_FILE}"']
    if h.client_if is not None:
        out += ["# The client's own root qdisc: the cell's (client.tc: e.g. fq for pacing, s12) or the default.",
                f"tc qdisc del dev {q(h.client_if)} root 2>/dev/null || true",
                'if [ -f "$cmd/client.tc" ]; then batch client.tc tc -batch; fi']
    if h.servers is not None:
        out += ["# The server's daemons: one that died during an earlier cell is started again (fl-servers).",
                '"$dir/fl-servers" ' + " ".join(q(a) for a in h.servers)]
    return [*out, ""]


def tunnel_down(end: TunnelEnd) -> str:
    """The removal of fl's tunnel from END's host, of any kind; never fails."""
    return _text(_tunnel_down(end))


def _tunnel_down(end: TunnelEnd) -> list[str]:
    return ["# Remove fl's tunnel, of any kind (only what fl made: its device, FOU port, IPsec SAs",
            "# and policies, which carry fl's if_id; names and ids: flharness/testbed/tunnel.py);",
            "# whatever is not there is skipped.",
            f"ip link del dev {q(TUNNEL_DEV)} 2>/dev/null || true",
            f"ip fou del port {int(PORT['fou'])} 2>/dev/null || true",
            "for way in out in; do",
            f"    ip xfrm policy delete src 0.0.0.0/0 dst 0.0.0.0/0 dir $way if_id {int(IPSEC_ID)} 2>/dev/null || true",
            "done",
            f"ip xfrm state delete src {q(end.local)} dst {q(end.remote)} proto esp spi {q(IPSEC_SPI[end.host])} 2>/dev/null || true",
            f"ip xfrm state delete src {q(end.remote)} dst {q(end.local)} proto esp spi {q(IPSEC_SPI[end.peer])} 2>/dev/null || true",
            f"nft delete table {NFT_TUNNEL_TABLE} 2>/dev/null || true",
            f"rm -f {q(f'{end.scratch}/{WG_KEY_FILE}')} {q(f'{end.scratch}/{XFRM_STAT_FILE}')}"]


def _tunnel_up(t: Tunnel) -> list[str]:
    dev = q(TUNNEL_DEV)
    mtu = q(f"s/{MTU}/")
    out = ["# The cell's tunnel between cli and srv (a leftover one is removed first): its ip",
           "# commands are the cell's tunnel.ip (flharness/testbed/tunnel.py), run with the MTU (the",
           "# underlay's less the tunnel's overhead) and IPsec's keys in place of their placeholders;",
           "# printed with the MTU only, so the keys are in no file and no log.",
           *_tunnel_down(t.end),
           f"mtu=$(( $(cat /sys/class/net/{q(t.underlay)}/mtu) - {int(t.overhead)} ))"]
    if t.kind == "ipsec":
        out.append(f'cat /proc/net/xfrm_stat > "$dir/{XFRM_STAT_FILE}"  # the namespace\'s counters before this cell\'s SAs')
    elif t.kind == "fou":
        out.append("modprobe -q fou 2>/dev/null || true  # FOU's netlink family does not load it on demand")
    out.append(f'sed {mtu}"$mtu/" "$cmd/tunnel.ip" | while IFS= read -r l; do echo "+ ip $l"; done')
    if t.fill:  # the keys on sed's input (a here-document), not its command line
        assert all(re.fullmatch(r"[\w@-]+", p + v) for p, v in t.fill.items()), "placeholders and keys are words"
        out += [f'sed -e {mtu}"$mtu/" -f /dev/stdin "$cmd/tunnel.ip" <<\'{KEYS_END}\' | ip -batch - >/dev/null',
                *(f"s/{placeholder}/{value}/" for placeholder, value in t.fill.items()), KEYS_END]
    else:
        out.append(f'sed -e {mtu}"$mtu/" "$cmd/tunnel.ip" | ip -batch - >/dev/null')
    if t.kind == "wireguard":
        assert t.wg_private and t.wg_peer_public and t.end.peer_inner, "a WireGuard end needs its keys and its peer's address"
        key, port = q(f"{t.end.scratch}/{WG_KEY_FILE}"), int(PORT["wireguard"])
        out += ["# This end's private key (made by fl for the cell, never printed) and its peer.",
                f"(umask 077; printf '%s\\n' {q(t.wg_private)} > {key})",
                f"run wg set {dev} listen-port {port} private-key {key} peer {q(t.wg_peer_public)} "
                f"allowed-ips {q(t.end.peer_inner + '/32')} endpoint {q(f'{t.end.remote}:{port}')}"]
    return [*out,
            "# offloads off, so captures show wire-size packets",
            f"ethtool -K {dev} tso off gso off gro off 2>/dev/null || true",
            "# Per-flow ECN rewrites at the tunnel entrance (the outer header inherits the ECN field):",
            "# the client's ecn-tunnel.nft and ecn-tunnel.tc (flharness/testbed/commands.py)",
            'if [ -f "$cmd/ecn-tunnel.nft" ]; then batch ecn-tunnel.nft nft -f; fi',
            'if [ -f "$cmd/ecn-tunnel.tc" ]; then batch ecn-tunnel.tc tc -batch; fi']


def _cell_dir(h: CellHostPlan) -> list[str]:
    fresh = [f"rm -rf {q(h.cell_dir)}  # the host's own folder for the cell: the last cell's files are gone"]
    return [*(fresh if h.staged else []), f"mkdir -p {q(h.cell_dir)}"]


def _bottleneck(h: CellHostPlan, b: Bottleneck) -> list[str]:
    out = ["# The bottleneck (mid): fl's qdiscs removed from its interfaces (reset.tc: what is not",
           "# there is no error), then both directions' bottleneck, the path delay and impairments on",
           "# the IFBs, and tc's ECN rewrites in one `tc -batch` (bottleneck.tc), the per-flow ECN",
           "# rules and fresh counters in one `nft -f` (ecn.nft): every program started costs, most",
           "# in an emulated VM guest. Each batch line is printed before it runs.",
           'tc -force -batch "$cmd/reset.tc" >/dev/null 2>&1 || true',
           f"echo {q('# ' + b.summary)}",
           "batch bottleneck.tc tc -batch",
           'if [ -f "$cmd/ecn.nft" ]; then batch ecn.nft nft -f; fi',
           "# The resulting qdiscs and classes, one tc per interface."]
    for dev in b.devs:
        out += [f"echo {q(f'$ tc -d qdisc show dev {dev}; tc -d class show dev {dev}')}",
                f"printf '%s\\n' {q(f'qdisc show dev {dev}')} {q(f'class show dev {dev}')} | tc -d -b -"]
    if b.schedule:
        out += ["# The rate schedule: a process that waits for Flent's start, then steps the rate (fl-schedule).",
                f'"$dir/fl-start" "$dir/schedule.pid" "$dir/{SCHEDULE_OUT}" "$dir/fl-schedule" "$cmd" {q(b.port_cli)} '
                f'"$dir/{SCHEDULE_LOG}"']
    up, down = cell_folder.queue_device("up", b.queue_up), cell_folder.queue_device("down", b.queue_down)
    shown = f"+ fl-qdisc-sample {b.queue_interval} {b.port_cli} {q(b.queue_filter)} {up} {down} > {b.queue_log}"
    return [*out,
            "# The bottleneck queues over time (mid.qdisc.log): every qdisc on the ports towards srv",
            "# (upload) and towards cli (download), as fl named them (commands.Ports.queues, which",
            "# cell.json records), sampled by fl-qdisc-sample from the test's first packet (the",
            f"# tunnel's outer packets in tunnelled cells) every {b.queue_interval} s: the",
            "# scenario's step, or more where each sample costs (VMs).",
            *_cell_dir(h),
            f"echo {q(shown)}",
            f'"$dir/fl-start" "$dir/qdisc-sample.pid" {q(b.queue_log)} "$dir/fl-qdisc-sample" {q(str(b.queue_interval))} '
            f"{q(b.port_cli)} {q(b.queue_filter)} {q(up)} {q(down)}"]


def _capture_start(h: CellHostPlan, c: Capture) -> list[str]:
    out = ["# tcpdump on the endpoint's interface for the whole test (headers only). The ss sampler",
           "# (each sending flow's congestion control and TCP state once a second) runs on the",
           "# hosts that send: on the client only while Flent runs (its flent.sh), on the server",
           "# from here. Started early it would sample an idle testbed between cells, which costs",
           "# a VM guest on the virtual clock most (idle time goes by at once there).",
           *_cell_dir(h),
           ': > "$dir/tcpdump.log"',
           f"echo {q(f'+ tcpdump -i {c.dev} -n -s {SNAPLEN} -w {c.pcap}')}",
           f'"$dir/fl-start" "$dir/tcpdump.pid" "$dir/tcpdump.log" tcpdump -i {q(c.dev)} -n -s {int(SNAPLEN)} -w {q(c.pcap)}']
    if c.ss_log is not None:
        out += [f"echo {q(f'+ fl-ss-sample {c.target} > {c.ss_log}')}",
                f'"$dir/fl-start" "$dir/ss-sample.pid" {q(c.ss_log)} "$dir/fl-ss-sample" {q(c.target)} {q(c.dev)}']
    return [*out,
            "# Wait until tcpdump listens (shell built-ins only: each command costs in an emulated guest).",
            "listening() { while IFS= read -r line; do case $line in *'listening on'*) return 0 ;; esac; done < \"$dir/tcpdump.log\"; return 1; }",
            "i=0",
            "until listening; do",
            f'  i=$((i + 1)); [ $i -le {int(h.wait_timeout) * 100} ] || {{ cat "$dir/tcpdump.log"; exit 1; }}',
            "  sleep 0.01",
            "done"]


def collect_script(h: CellHostPlan) -> str:
    """HOST's collection script: never fails, so every step runs."""
    b, c = h.bottleneck, h.capture
    out = [f"# fl cell {h.cell} on {h.host} after the test: stop what the cell",
           "# started, record the host's state (teardown.log), remove the cell's tunnel. Rendered",
           "# by flharness/testbed/cell_scripts.py; never fails, so every step runs. What it",
           "# prints is also kept in collect.log, for the task that prints it again where it was",
           "# lost (roles/cell/tasks/main.yml).",
           "exec 2>&1",
           f"dir={q(h.scratch)}",
           "{",
           *scheme_scripts.collect_lines(h.schemes)]
    if b and b.schedule:
        out.append('"$dir/fl-stop" "$dir/schedule.pid"  # steps not yet taken are cancelled')
    if b:
        out.append('"$dir/fl-stop" "$dir/qdisc-sample.pid"  # the queue samples end')
    if c:
        out += ["# Captures and socket samples end; tcpdump's own count of what it saw and dropped.",
                '"$dir/fl-stop" "$dir/tcpdump.pid" "$dir/ss-sample.pid"',
                "echo '$ tcpdump statistics'",
                "while IFS= read -r line; do case $line in [0-9]*' packets '*) echo \"$line\" ;; esac; done < \"$dir/tcpdump.log\"",
                "echo"]
        if c.xz_level is not None:
            out += ["# Compressed here, before the fetch (on a shared filesystem fl compresses it itself,",
                    "# while the next cell runs).",
                    f"[ -f {q(c.pcap)} ] && xz -T1 -{int(c.xz_level)} -f {q(c.pcap)}"]
        out.append("")
    out += ["# The host's state (teardown.log): its state script, rendered by fl",
            "# (flharness/testbed/state_script.py) and written with the cell's command files (setup.sh).",
            'if [ -f "$dir/cmd/state.sh" ]; then',
            "  # shellcheck source=/dev/null",
            '  . "$dir/cmd/state.sh"',
            "else",
            '  echo "(no state script: the cell\'s setup did not write it)"',
            "fi",
            ""]
    if b and b.schedule:
        log, said = f'"$dir/{SCHEDULE_LOG}"', f'"$dir/{SCHEDULE_OUT}"'  # fixed names: nothing to quote
        out += [f"echo {q(command_header(SCHEDULE_LOG_SHOW, 'the rate schedule as applied'))}",
                f"cat {log} 2>/dev/null",
                f"if [ -s {said} ]; then echo {q(command_header(SCHEDULE_OUT_SHOW, 'what the schedule printed'))}; "
                f"cat {said}; fi",
                f"rm -f {log} {said}"]
    if h.moves_to is not None:
        out += ["# The cell's files, staged during the test, into the results folder.",
                f"mv {q(h.cell_dir)}/* {q(h.moves_to)}/ && rmdir {q(h.cell_dir)}"]
    if h.tunnel:
        out += _tunnel_down(h.tunnel.end)
    out += ['} > "$dir/collect.log" 2>&1',
            'cat "$dir/collect.log"',
            "exit 0"]
    return _text(out)
