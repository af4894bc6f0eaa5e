"""Each testbed host's scripts for the whole run, rendered here from typed values
(RunHost, built in plan.run_hosts): helpers_script (fl's helper programs copied into the
host's scratch folder), up_script (its links, addresses, offloads, forwarding, route,
IFBs and nftables table, with what it changes noted first for the teardown) and
down_script (stop fl's processes by PID; on hosts that are not namespaces, undo every
change). The testbed role runs them as they are (fl_testbed[inventory_hostname]).

Every value from an inventory reaches the shell quoted (shlex.quote); interface names,
which nftables rules hold in double quotes, are validated by inventory.py.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass

from ..layout import NFT_TABLE
from ..programs import helpers

q = shlex.quote


@dataclass(frozen=True)
class Link:
    """One of a host's testbed interfaces."""

    dev: str
    addr: str  # its address, with the prefix length
    ifb: str | None  # the middlebox's: the IFB its path delay uses


@dataclass(frozen=True)
class RunHost:
    """What one host's testbed scripts do."""

    host: str
    dir: str  # its scratch folder
    links: tuple[Link, ...]
    netns: bool  # a network namespace of this machine (deleted whole afterwards)
    route: tuple[str, str] | None  # (network, gateway): the route to the far end's network
    sysctl_keys: tuple[str, ...] = ()  # the sysctls some cell sets (saved, restored)
    module_params: tuple[str, ...] = ()  # the module parameter files some cell sets
    ifb: bool = False  # the run has IFBs for path delay (the middlebox's)
    nft: bool = False  # the run has fl's nftables table (the middlebox's)
    up_dev: str | None = None  # the middlebox: its port towards cli (upload enters there)


def _text(lines: list[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


def helpers_script(host_dir: str) -> str:
    """Every helper program written into HOST_DIR, executable by root only."""
    out = ["set -e", "umask 077", f"mkdir -p {q(host_dir)}"]
    for helper in helpers():
        target = q(f"{host_dir}/{helper.name}")
        out += [f"printf '%s\\n' {q(helper.read_text().rstrip())} > {target}", f"chmod 0755 {target}"]
    return _text(out)


def nft_table(links: tuple[Link, ...], up_dev: str) -> str:
    """fl's own table on the middlebox: per-flow ECN rewrites of the cell (chain
    ecn_rewrite, filled per cell: commands.py), then forwarded packets counted per
    direction and ECN codepoint (after the rewrites, before the bottleneck qdisc)."""
    out = ["# fl's own table on the middlebox: per-flow ECN rewrites of the cell (chain ecn_rewrite,",
           "# filled per cell), then forwarded packets counted per direction and ECN",
           "# codepoint (after the rewrites, before the bottleneck qdisc). Counters are reset per cell.",
           f"table {NFT_TABLE} {{",
           "    chain ecn_rewrite {",
           "        type filter hook forward priority mangle; policy accept;",
           "    }",
           "    chain forward {",
           "        type filter hook forward priority 0; policy accept;"]
    for link in links:
        way = "up" if link.dev == up_dev else "down"
        out += [f'        iifname "{link.dev}" counter comment "{way}: all"',
                *(f'        iifname "{link.dev}" ip ecn {match} counter comment "{way}: {name}"'
                  for match, name in (("not-ect", "Not-ECT"), ("ect1", "ECT(1)"), ("ect0", "ECT(0)"), ("ce", "CE")))]
    return _text([*out, "    }", "}"])


def up_script(h: RunHost) -> str:
    """HOST's configuration for the run (stops at the first failure)."""
    out = [f"# fl testbed, host {h.host}; rendered by flharness/testbed/testbed_scripts.py.",
           "set -e",
           f"dir={q(h.dir)}",
           "# sysctls fl may change: cells' keys (restored before each cell) and all (restored at the end)",
           ': > "$dir/sysctl-cells"',
           *(f"printf '%s=%s\\n' {q(k)} \"$(sysctl -n {q(k)})\" >> \"$dir/sysctl-cells\"" for k in h.sysctl_keys),
           'cp "$dir/sysctl-cells" "$dir/sysctl-restore"',
           '# module parameters some cell sets ("PATH VALUE"): restored before each cell and at the end',
           ': > "$dir/params-cells"',
           *(f"[ ! -e {q(p)} ] || printf '%s %s\\n' {q(p)} \"$(cat {q(p)})\" >> \"$dir/params-cells\""
             for p in h.module_params)]
    if h.host == "mid":
        out.append("printf 'net.ipv4.ip_forward=%s\\n' \"$(sysctl -n net.ipv4.ip_forward)\" >> \"$dir/sysctl-restore\"")
    out += ["ip link set dev lo up"] if h.netns else _as_found(h)
    for link in h.links:
        out += [f"ip addr replace {q(link.addr)} dev {q(link.dev)}",
                f"ip link set dev {q(link.dev)} up",
                "# offloads off, so the bottleneck sees wire-size packets",
                f"ethtool -K {q(link.dev)} tso off gso off gro off"]
    if h.host == "mid":
        out.append("sysctl -qw net.ipv4.ip_forward=1")
        for link in h.links if h.ifb else ():
            assert link.ifb is not None
            out += [f"ip link add name {q(link.ifb)} type ifb", f"ip link set dev {q(link.ifb)} up"]
        if h.nft:
            assert h.up_dev is not None
            out.append(f"printf '%s\\n' {q(nft_table(h.links, h.up_dev))} | nft -f -")
    if h.route:
        out.append(f"ip route replace {q(h.route[0])} via {q(h.route[1])}")
    return _text(out)


def _as_found(h: RunHost) -> list[str]:
    """What fl changes on a host's links, noted as found (down_script restores it): per
    link "DEV STATE TSO GSO GRO", the addresses fl adds, the route it replaces."""
    out = ["# what fl changes on a host's links, as found (down_script restores it): per link",
           '# "DEV STATE TSO GSO GRO", and the addresses fl adds',
           "offload() { ethtool -k \"$1\" | awk -F': ' -v k=\"$2\" '$1 == k { split($2, w, \" \"); print w[1] }'; }",
           ': > "$dir/links-restore"',
           ': > "$dir/addrs-added"']
    for link in h.links:
        out += [f"dev={q(link.dev)}",
                "admin=down",
                "ip -o link show dev \"$dev\" | grep -q '[<,]UP[,>]' && admin=up",
                "printf '%s %s %s %s %s\\n' \"$dev\" \"$admin\" \\",
                '    "$(offload "$dev" tcp-segmentation-offload)" "$(offload "$dev" generic-segmentation-offload)" \\',
                '    "$(offload "$dev" generic-receive-offload)" >> "$dir/links-restore"',
                f"ip -o addr show dev \"$dev\" | awk '{{ print $4 }}' | grep -qxF {q(link.addr)} ||",
                f"    printf '%s %s\\n' \"$dev\" {q(link.addr)} >> \"$dir/addrs-added\""]
    if h.route:
        out.append(f"ip route save to {q(h.route[0])} > \"$dir/route-restore\"")
    return out


def down_script(h: RunHost) -> str:
    """Undo what fl did on HOST; never fails: it must run to the end. Namespaces are deleted
    afterwards; other hosts get fl's qdiscs, IFBs and nftables table removed, and their
    sysctls, route, addresses and links as fl found them."""
    out = [f"# Undo what fl did on host {h.host}. Namespaces are simply deleted",
           "# afterwards; on physical hosts fl removes its qdiscs, IFBs and nftables table and",
           "# restores the sysctls it changed. Never fails: it must run to the end.",
           f"dir={q(h.dir)}",
           '[ -x "$dir/fl-stop" ] && "$dir/fl-stop" "$dir"/*.pid',
           "# Module parameters are the kernel's, namespaces or not: back to their values at the start.",
           '[ -f "$dir/params-cells" ] && while read -r path value; do echo "$value" > "$path"; done < "$dir/params-cells"']
    if not h.netns:
        out += _restore(h)
    return _text([*out, 'rm -rf "$dir"', 'rmdir "$(dirname "$dir")" 2>/dev/null', "exit 0"])


def _restore(h: RunHost) -> list[str]:
    out = []
    for link in h.links:
        out += [f"tc qdisc del dev {q(link.dev)} root 2>/dev/null", f"tc qdisc del dev {q(link.dev)} ingress 2>/dev/null"]
        if h.host == "mid" and link.ifb is not None:
            out.append(f"ip link del {q(link.ifb)} 2>/dev/null")
    if h.host == "mid":
        out.append(f"nft delete table {NFT_TABLE} 2>/dev/null")
    out += ['[ -f "$dir/sysctl-restore" ] && while IFS= read -r line; do sysctl -qw "$line"; done < "$dir/sysctl-restore"',
            "# the links as fl found them: route, addresses, offloads, up or down"]
    if h.route:
        out += ['if [ -f "$dir/route-restore" ]; then',
                f"    ip route del {q(h.route[0])} via {q(h.route[1])} 2>/dev/null",
                '    [ ! -s "$dir/route-restore" ] || ip route restore < "$dir/route-restore"',
                "fi"]
    return [*out,
            '[ -f "$dir/addrs-added" ] && while read -r dev addr; do ip addr del "$addr" dev "$dev"; done < "$dir/addrs-added"',
            '[ -f "$dir/links-restore" ] && while read -r dev state tso gso gro; do',
            '    ethtool -K "$dev" tso "$tso" gso "$gso" gro "$gro" 2>/dev/null',
            '    [ "$state" != down ] || ip link set dev "$dev" down',
            'done < "$dir/links-restore"']
