"""Each host's state script (state.sh), rendered here once per cell from its typed
values: what the host shows after the test for its teardown log (qdisc, class and link
statistics of fl's interfaces, their offloads, firewall and tunnel counters, module
parameters, TCP metrics, sysctls). Which commands a host runs is decided here, and every
command's header line ("$ COMMAND") is teardown_format's, which the analysis parses.

The setup script writes the file with the cell's other command files ($dir/cmd/state.sh,
cell_scripts.py's setup.sh); the collection script sources it
(collect.sh), so it reads the host's scratch folder as "$dir" (xfrm_stat.up, written
by setup.sh as the tunnel came up).
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Literal

from .. import layout
from ..hosts import ENDPOINTS
from ..teardown_format import (
    COMMAND_PREFIX,
    MODULE_PARAMS,
    QDISC_JSON,
    TCP_COUNTERS_SHOW,
    TCP_COUNTERS_UP,
    TCP_METRICS,
    UNAME,
    XFRM_POLICY,
    XFRM_STAT,
    XFRM_STAT_UP,
    XFRM_STATE,
    command_header,
    device_stats,
    tcp_counters_function,
)

STATE_FILE = "state.sh"  # its name among the host's command files
#: A command run by the script's show(): its header line (printed by the shell: "$ " and
#: its words), its output, an empty line.
SHOW = 'show() { echo "' + COMMAND_PREFIX.replace("$", "\\$") + '$*"; "$@"; echo; }'
OFFLOADS_NOTE = "segmentation and receive offloads"
#: The offloads the teardown log reads back (testbed_scripts.up_script turned them off).
OFFLOADS = ("tcp-segmentation-offload", "generic-segmentation-offload", "generic-receive-offload")


@dataclass(frozen=True)
class EcnPlace:
    """Where a cell's per-flow ECN rewrites happen (plan.ecn_place)."""

    at: Literal["cli", "mid"]  # the middlebox, or the client's tunnel entrance in tunnelled cells
    dev: str  # the device whose filters rewrite
    tc: bool  # tc filters do some of them (the teardown shows their counters)


@dataclass(frozen=True)
class HostState:
    """What one host's state script shows."""

    host: str
    devs: list[str]  # whose qdiscs, classes and link counters (plan.state_devs)
    links: list[str]  # its testbed interfaces (their offloads)
    nft: bool  # the run has fl's nftables table (the middlebox shows it)
    ecn: EcnPlace | None  # the cell's ECN rewrites
    tunnel: str | None  # the cell's tunnel kind
    module_params: list[str]  # the parameter files the run sets on this host
    sysctls: list[str]  # the sysctls it shows


def echo_header(command: str, note: str = "") -> str:
    """A shell line printing COMMAND's header line, for commands the script runs otherwise
    than with show()."""
    return "echo " + shlex.quote(command_header(command, note))


def state_script(s: HostState) -> str:
    """The host's state script, line by line as its teardown log is to show it."""
    q = shlex.quote
    out = ["# The host's state after the test (teardown.log): qdisc, class and link statistics of",
           "# fl's interfaces, their offloads, firewall and tunnel counters, TCP metrics, TCP sysctls.",
           "exec 2>&1",
           "export WG_COLOR_MODE=never  # Ansible runs this on a terminal: plain text in the log",
           SHOW,
           f'{echo_header(UNAME)}; read -r release < /proc/sys/kernel/osrelease; echo "$release"; echo',
           "# One tc per interface (its qdiscs, then its classes: each line names its kind) and one",
           "# ip for all links: every command costs, most in an emulated guest."]
    for dev in s.devs:
        out += [echo_header(device_stats(dev)),
                f"printf '%s\\n' {q(f'qdisc show dev {dev}')} {q(f'class show dev {dev}')} | tc -s -d -b -",
                "echo"]
    out += ["# The same qdiscs' statistics as tc's JSON, which the analysis reads (one tc for the host)",
            f"show {QDISC_JSON}",
            echo_header("; ".join(f"ip -s link show dev {dev}" for dev in s.devs)),
            "printf '%s\\n' " + "".join(f"{q(f'link show dev {dev}')} " for dev in s.devs) + "| ip -s -b -",
            "echo",
            "# Offloads read back (testbed_scripts.up_script turned them off: the bottleneck must see",
            '# wire-size packets), one line "DEV NAME: STATE" each.',
            echo_header("ethtool -k " + " ".join(s.links), OFFLOADS_NOTE),
            "offloads() {",
            '  ethtool -k "$1" | while IFS= read -r line; do',
            "    case $line in " + "|".join(f"{o}:*" for o in OFFLOADS) + ') echo "$1 $line" ;; esac',
            "  done",
            "}",
            *(f"offloads {q(dev)}" for dev in s.links),
            "echo"]
    if s.host == "mid" and s.nft:
        out.append(f"show nft list table {layout.NFT_TABLE}")
    if s.ecn and s.ecn.tc and s.host == s.ecn.at:
        out += ["# The ECN rewrites' tc filters (ecn_rules.py): each names its flow by its actions' cookie",
                f"show tc -s filter show dev {q(s.ecn.dev)} {'ingress' if s.ecn.at == 'mid' else 'egress'}"]
    if s.tunnel and s.host in ("cli", "srv"):
        out += _tunnel(s.tunnel)
        if s.host == "cli" and s.ecn and s.ecn.at == "cli":
            out.append(f"show nft list table {layout.NFT_TUNNEL_TABLE}")
    if s.module_params:
        out.append(f"show {MODULE_PARAMS} " + " ".join(map(q, s.module_params)))
    if s.host in ENDPOINTS:
        out += ["# The namespace's TCP counters (retransmissions, timeouts) as setup.sh found them, and now",
                "# shellcheck disable=SC2317 # called by show",
                tcp_counters_function(),
                f'(cd "$dir" && show {TCP_COUNTERS_UP})',
                f"show {TCP_COUNTERS_SHOW}"]
    out += [f"show {TCP_METRICS}",
            "show sysctl -e " + " ".join(map(q, s.sysctls))]
    return "".join(f"{line}\n" for line in out)


def _tunnel(kind: str) -> list[str]:
    """The tunnel's own counters on an end."""
    if kind == "wireguard":
        return [f"show wg show {shlex.quote(layout.TUNNEL_DEV)}"]
    if kind == "fou":
        return ["show ip fou show"]
    if kind == "ipsec":
        return ["# SA counters and replay state (keys replaced by <key>), and the kernel's own XFRM",
                "# counters (XfrmInStateSeqError: packets the anti-replay check dropped), counted over the",
                "# namespace's life: as the tunnel came up (setup.sh) and now",
                f"{echo_header(XFRM_STATE)}; {XFRM_STATE} | sed -E 's/0x[0-9a-f]{{16,}}/<key>/g'; echo",
                f"show {XFRM_POLICY}",
                f'(cd "$dir" && show {XFRM_STAT_UP})',
                f"show {XFRM_STAT}"]
    return []
