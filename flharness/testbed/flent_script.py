"""The client's Flent script (flent.sh), rendered here once per cell from its typed values
(FlentRun, built in plan.py): Flent with the command line fl built for the cell
(plan.flent_argv, wrapped in timeout(1) off QEMU's virtual clock), the side flows
beside it and the client's socket sampler.

The setup script writes it with the client's other command files ($dir/cmd/flent.sh,
cell_scripts.py's setup.sh); the cell role's task of phase flent runs it
(roles/cell/tasks/main.yml). It runs in the client's cell folder ("$dir" here), with
the client's scratch folder on its PATH: fl's helpers, and Flent as fl-flent
(flharness/programs/fl-flent: the same Flent, without the imports a recording does not use).

With a competing UDP flow or a video flow, iperf starts with the TCP flows (Flent's
lead-in after the capture timestamp of its ping's first request, when Flent started its
runners: its own start-up time varies) and lasts the test, its datagrams sized to the
MTU of the device towards the server (the tunnel's in tunnel cells: none is fragmented).
The video flow is iperf's isochronous mode: frames at a frame rate. A latency probe
(irtt, its packets marked as declared) starts with them too. The client's ss sampler
runs with Flent (cell_scripts.py's capture start says why). flent.log starts with Flent's exit
status and keeps the command line; the script never fails, so the captures are always
stopped afterwards.
"""
from __future__ import annotations

import ipaddress
import shlex
from dataclasses import dataclass

from ..frames import UDP_HEADERS
from ..results import cell_folder
from . import scheme_scripts
from .scheme_scripts import SchemeSide

FLENT_FILE = "flent.sh"  # its name among the client's command files


@dataclass(frozen=True)
class UdpClient:
    """The competing UDP flow's iperf client."""

    port: int  # the server's iperf UDP server for it (hosts.UDP_PORT)
    bps: int  # its bit rate


@dataclass(frozen=True)
class VideoClient:
    """The video flow's iperf client (isochronous mode)."""

    port: int  # the server's iperf UDP server for it (hosts.VIDEO_PORT)
    isochronous: str  # iperf's --isochronous value: frames per second, mean and standard deviation (bits/s)
    tos: int  # the IP TOS byte of its datagrams (DSCP and ECN field)


@dataclass(frozen=True)
class IrttClient:
    """The latency probe's irtt client."""

    port: int  # the server's irtt (the inventory's fl_irtt_port)
    interval: str  # irtt's -i (Go's duration words: 10ms, 500us)
    tos: int  # the IP TOS byte of its packets (irtt's --dscp takes the whole byte)


@dataclass(frozen=True)
class FlentRun:
    """What the client's Flent script runs for one cell."""

    cell_dir: str  # the client's cell folder: Flent runs there, the logs go there
    scratch: str  # the client's scratch folder: fl's helpers (on PATH) and their pid files
    flent: tuple[str, ...]  # Flent's argv (plan.flent_argv)
    target: str  # the server address every tool talks to (inside the tunnel, if any)
    capture_dev: str  # the client's device its ss sampler watches
    sample_sockets: bool  # the client's sockets are sampled (plan.samplers)
    lead_s: int  # seconds Flent's ping runs alone before the flows start
    length: int  # the test's seconds: the side flows last as long
    udp: UdpClient | None = None
    video: VideoClient | None = None
    probe: IrttClient | None = None
    schemes: tuple[SchemeSide, ...] = ()  # its sides of the cell's scheme flows: the senders


def _ipv6(address: str) -> bool:
    return ipaddress.ip_address(address).version == 6


def flent_script(r: FlentRun) -> str:
    """The client's Flent script, line by line."""
    q = shlex.quote

    def helper(name: str) -> str:  # a file in the client's scratch folder, as one word
        return q(f"{r.scratch}/{name}")

    side = r.udp or r.video or r.probe or r.schemes  # side flows start with the TCP flows: wait for them
    command = shlex.join(r.flent)
    out = ["# fl's Flent run on the client for one cell, with its side flows and socket sampler:",
           "# rendered by flharness/testbed/flent_script.py. Never fails (flent.log starts with",
           "# Flent's exit status), so the captures are always stopped afterwards.",
           f"dir={q(r.cell_dir)}",
           'cd "$dir" || exit 0',
           f"PATH={q(r.scratch)}:$PATH"]
    if side:
        # The device towards the server and its MTU (the datagrams' size); the capture
        # timestamp of Flent's ping's first request (fl-first-ping), from which the
        # flows' start is counted.
        out += [f"dev=$(ip -o route get {q(r.target)} | sed -n 's/.* dev \\([^ ]*\\).*/\\1/p')",
                *(['mtu=$(cat "/sys/class/net/$dev/mtu" 2>/dev/null || echo 1500)'] if r.udp or r.video else []),
                f"first={helper('first_ping')}",
                'rm -f "$first"',
                f"{helper('fl-start')} {helper('first-ping.pid')} \"$first\" {helper('fl-first-ping')} \"$dev\" request"]
    if r.sample_sockets:
        out.append(f"{helper('fl-start')} {helper('ss-sample.pid')} \"$dir/{cell_folder.ss_log('cli')}\" {helper('fl-ss-sample')} "
                   f"{q(r.target)} {q(r.capture_dev)}")
    out += [f'PYTHONUNBUFFERED=1 {command} > "$dir/flent.out" 2>&1 &',
            "flent=$!"]
    if side:
        out += ['until [ -s "$first" ] || ! kill -0 $flent 2>/dev/null; do sleep 0.05; done',
                f"{helper('fl-stop')} {helper('first-ping.pid')}",
                'read -r t0 < "$first"',
                f'fl-wait-from "$t0" {int(r.lead_s)}']
        # A datagram of the MTU less the IP and UDP headers towards the target fills one packet.
        datagram = f"$((mtu - {UDP_HEADERS[6 if _ipv6(r.target) else 4]}))"
        if r.udp:
            out += [f"iperf -u -c {q(r.target)} -p {int(r.udp.port)} -b {int(r.udp.bps)} \\",
                    f'  -l {datagram} -t {int(r.length)} -i 1 > "$dir/{cell_folder.UDP_LOG}" 2>&1 &',
                    "udp=$!"]
        if r.video:
            out += [f"iperf -u -c {q(r.target)} -p {int(r.video.port)} --isochronous={q(r.video.isochronous)} \\",
                    f'  -S {int(r.video.tos)} -l {datagram} -t {int(r.length)} -i 1 > "$dir/{cell_folder.VIDEO_LOG}" 2>&1 &',
                    "video=$!"]
        if r.probe:
            server = f"[{r.target}]" if _ipv6(r.target) else r.target
            out += [f"irtt client -Q -i {q(r.probe.interval)} -d {int(r.length)}s --dscp={int(r.probe.tos)} \\",
                    f'  -o "$dir/{cell_folder.PROBE}" {q(f"{server}:{int(r.probe.port)}")} > "$dir/{cell_folder.PROBE_LOG}" 2>&1 &',
                    "probe=$!"]
        out += scheme_scripts.flent_lines(r.schemes, r.lead_s, r.lead_s + r.length)
    out += ["wait $flent",
            "rc=$?",
            *scheme_scripts.after_flent_lines(r.schemes)]
    if r.sample_sockets:
        out.append(f"{helper('fl-stop')} {helper('ss-sample.pid')}")
    for name, flow in (("udp", r.udp), ("video", r.video)):
        if flow:
            out.append(f"kill ${name} 2>/dev/null; wait ${name} 2>/dev/null")
    if r.probe:
        out += ["# irtt writes its JSON when it ends (it should have: its test ended with Flent's)",
                "i=0",
                "while kill -0 $probe 2>/dev/null && [ $i -lt 10 ]; do i=$((i + 1)); sleep 1; done",
                "kill $probe 2>/dev/null; wait $probe 2>/dev/null"]
    out += [f'{{ echo "{cell_folder.FLENT_EXIT}$rc"',
            f"  echo {q(f'# command: {command}')}",
            f'  cat "$dir/flent.out"; }} > "$dir/{cell_folder.FLENT_LOG}"',
            'rm -f "$dir/flent.out"',
            "exit 0"]
    return "".join(f"{line}\n" for line in out)
