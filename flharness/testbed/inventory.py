"""Read and validate the testbed inventory (Ansible's own parser; fl checks the values)."""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import FlError

HOSTS = ("cli", "mid", "srv")
IFNAME_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,11}$")  # 15 minus the 'ifb4' prefix of its IFB
BACKENDS = ("netns", "ssh")


@dataclass(frozen=True)
class Inventory:
    path: Path
    backend: str
    srv_ip: str
    hostvars: dict[str, dict[str, str]]

    @property
    def shared_fs(self) -> bool:
        return self.backend == "netns"

    def tunnel_ip(self, host: str) -> str:
        """HOST's address inside the cli-srv tunnel (inventory key fl_tunnel_addr)."""
        if "fl_tunnel_addr" not in self.hostvars[host]:
            raise FlError(f"{self.path}: {host}: fl_tunnel_addr is missing (the inner address "
                          "of the tunnel between cli and srv, e.g. 10.71.9.1/24 on cli)")
        return self.hostvars[host]["fl_tunnel_addr"].split("/")[0]


def vm_settings(path: Path) -> dict[str, str]:
    """fl_vm_kernel, fl_vm_accel, … of the inventory (keys without the prefix); {} if none."""
    return prefixed_settings(path, "fl_vm_")


def prefixed_settings(path: Path, prefix: str) -> dict[str, str]:
    """The inventory's variables starting with PREFIX (as the middlebox sees them), without it."""
    if not path.is_file():
        raise FlError(f"{path}: no such inventory file")
    mid = _hostvars(path).get("mid", {})
    return {k.removeprefix(prefix): v for k, v in mid.items() if k.startswith(prefix) and v}


def _hostvars(path: Path) -> dict[str, dict[str, str]]:
    """Variables of cli, mid and srv as Ansible resolves them (groups and hosts merged)."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    loader = DataLoader()
    inv = InventoryManager(loader=loader, sources=[str(path)])
    variables = VariableManager(loader=loader, inventory=inv)
    out: dict[str, dict[str, str]] = {}
    for name in HOSTS:
        if (host := inv.get_host(name)) is not None:
            out[name] = {k: str(v) for k, v in variables.get_vars(host=host).items()
                         if k.startswith(("fl_", "ansible_"))}
    return out


def load_inventory(path: Path) -> Inventory:
    """Parse with Ansible's InventoryManager, then check every value fl passes to commands."""
    if not path.is_file():
        raise FlError(f"{path}: no such inventory file")
    hostvars = _hostvars(path)
    for name in HOSTS:
        if name not in hostvars:
            raise FlError(f"{path}: host {name!r} is missing (fl needs cli, mid and srv)")
    _check(path, hostvars)
    backend = hostvars["mid"].get("fl_backend", "")
    srv_ip = hostvars["srv"]["fl_addr"].split("/")[0]
    return Inventory(path, backend, srv_ip, hostvars)


def _check(path: Path, hv: dict[str, dict[str, str]]) -> None:
    def need(host: str, key: str) -> str:
        if key not in hv[host]:
            raise FlError(f"{path}: {host}: {key} is missing")
        return hv[host][key]

    def iface(host: str, key: str) -> None:
        if not IFNAME_RE.match(need(host, key)):
            raise FlError(f"{path}: {host}: {key}={hv[host][key]!r} is not an interface name "
                          "(1-11 characters: letters, digits, _ . : -)")

    def address(host: str, key: str, network: bool = False) -> None:
        try:
            (ipaddress.ip_network if network else ipaddress.ip_interface)(need(host, key))
        except ValueError:
            raise FlError(f"{path}: {host}: {key}={hv[host][key]!r} is not an IPv4/IPv6 "
                          f"{'network' if network else 'address/prefix'}") from None

    for host in HOSTS:
        backend = need(host, "fl_backend")
        if backend not in BACKENDS:
            raise FlError(f"{path}: {host}: fl_backend={backend!r} must be one of {', '.join(BACKENDS)}")
        for key in ("fl_netperf_port", "fl_irtt_port"):
            if not need(host, key).isdigit() or not 0 < int(hv[host][key]) < 65536:
                raise FlError(f"{path}: {host}: {key} must be a port number")
    for host in ("cli", "srv"):
        iface(host, "fl_if")
        address(host, "fl_addr")
        address(host, "fl_gateway")
        address(host, "fl_route_to", network=True)
        if "fl_tunnel_addr" in hv[host]:
            address(host, "fl_tunnel_addr")
    for side in ("cli", "srv"):
        iface("mid", f"fl_if_{side}")
        address("mid", f"fl_addr_{side}")
    if len({hv[h]["fl_backend"] for h in HOSTS}) != 1:
        raise FlError(f"{path}: cli, mid and srv must use the same fl_backend")
