"""Read and validate testbed inventories (Ansible's own parser; fl checks the values).

An inventory holds one testbed (hosts cli, mid and srv in group ``testbed``) or several:
each a child group of ``testbeds``, whose hosts say their part with ``fl_role`` (cli,
mid, srv). fl runs every testbed through an inventory of its own that it writes from
these (``testbed_inventory``): the three hosts named cli, mid and srv, the variables
written for them in the inventory file, and fl's per-testbed settings on top.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import FlError
from ..hosts import HOSTS
from .host_vars import Endpoint, HostVars, Middlebox

BACKENDS = ("netns", "ssh")
#: Inventory keys holding addresses, moved to a subnet of their own per parallel testbed.
ADDRESS_KEYS = ("fl_addr", "fl_addr_cli", "fl_addr_srv", "fl_gateway", "fl_route_to", "fl_tunnel_addr")


@dataclass(frozen=True)
class Inventory:
    """One testbed of an inventory file."""

    path: Path
    backend: str
    srv_ip: str
    hostvars: dict[str, dict[str, str]]  # cli/mid/srv: fl_* and ansible_* values, as text
    name: str = "testbed"  # its group
    written: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False)  # variables as written
    hosts: dict[str, HostVars] = field(default_factory=dict, compare=False)  # cli/mid/srv: the fl_* ones, typed

    @property
    def shared_fs(self) -> bool:
        return self.backend == "netns"

    def endpoint(self, host: str) -> Endpoint:
        """cli's or srv's link and route (checked when the inventory was read)."""
        return self.hosts[host].endpoint()

    @property
    def middlebox(self) -> Middlebox:
        return self.hosts["mid"].middlebox()

    @property
    def netperf_port(self) -> int:
        """netserver's control port (the client's value: Flent's --netperf-control-port)."""
        return self.hosts["cli"].netperf_port

    @property
    def irtt_port(self) -> int:
        return self.hosts["srv"].irtt_port

    def tunnel_ip(self, host: str) -> str:
        """HOST's address inside the cli-srv tunnel (inventory key fl_tunnel_addr)."""
        if (ip := self.endpoint(host).tunnel_ip) is None:
            raise FlError(f"{self.path}: {host}: fl_tunnel_addr is missing (the inner address "
                          "of the tunnel between cli and srv, e.g. 10.71.9.1/24 on cli)")
        return ip


def vm_settings(path: Path) -> dict[str, str]:
    """fl_vm_kernel, fl_vm_accel, … of the inventory (keys without the prefix); {} if none."""
    return prefixed_settings(path, "fl_vm_")


def prefixed_settings(path: Path, prefix: str) -> dict[str, str]:
    """The inventory's variables starting with PREFIX (as the first middlebox sees them), without it."""
    mid = load_testbeds(path, check=False)[0].hostvars["mid"]
    return {k.removeprefix(prefix): v for k, v in mid.items() if k.startswith(prefix) and v}


def load_inventory(path: Path) -> Inventory:
    """The inventory's first (usually only) testbed."""
    return load_testbeds(path)[0]


def load_testbeds(path: Path, check: bool = True) -> list[Inventory]:
    """Every testbed of an inventory file, checked (every value fl passes to commands)."""
    if not path.is_file():
        raise FlError(f"{path}: no such inventory file")
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader

    inv = InventoryManager(loader=DataLoader(), sources=[str(path)])
    group = inv.groups.get("testbeds")
    groups = sorted(group.child_groups, key=lambda g: g.name) if group else []
    if group is not None and not groups:
        raise FlError(f"{path}: group testbeds has no child groups (one per testbed)")
    out = [_testbed(path, inv, g.name, g.get_hosts()) for g in groups] if groups else \
        [_testbed(path, inv, "testbed", [h for n in HOSTS if (h := inv.get_host(n)) is not None])]
    if check:
        for tb in out:
            _check(tb)
    if len({tb.backend for tb in out}) > 1:
        raise FlError(f"{path}: all testbeds must use the same fl_backend")
    return out


def _testbed(path: Path, inv: Any, name: str, hosts: list[Any]) -> Inventory:
    from ansible.inventory.helpers import get_group_vars
    from ansible.utils.vars import combine_vars

    by_role: dict[str, dict[str, Any]] = {}
    for host in hosts:
        written = _plain(combine_vars(get_group_vars(host.get_groups()), host.vars))
        role = str(written.get("fl_role", host.name))
        if role not in HOSTS:
            raise FlError(f"{path}: {name}: host {host.name}: fl_role={role!r} must be one of cli, mid, srv")
        if role in by_role:
            raise FlError(f"{path}: {name}: two hosts are its {role}")
        by_role[role] = written | {"fl_role": role, "fl_inventory_host": host.name}
    for role in HOSTS:
        if role not in by_role:
            raise FlError(f"{path}: {name}: host {role!r} is missing (fl needs cli, mid and srv)")
    return _inventory(path, name, by_role)


def _inventory(path: Path, name: str, written: dict[str, dict[str, Any]]) -> Inventory:
    """A testbed of WRITTEN, each host's variables as written: fl's and Ansible's as text,
    fl's also typed (a key fl does not know, or a value of the wrong kind, is an error)."""
    hostvars = {h: {k: str(v) for k, v in hv.items() if k.startswith(("fl_", "ansible_"))} for h, hv in written.items()}
    hosts = {}
    for h, hv in hostvars.items():
        try:
            hosts[h] = HostVars.model_validate({k: v for k, v in hv.items() if k.startswith("fl_")})
        except ValidationError as e:
            err = e.errors()[0]
            key, value = ".".join(str(x) for x in err["loc"]), hv.get(str(err["loc"][0]))
            said = " is not a variable fl knows (a typo?)" if err["type"] == "extra_forbidden" else \
                f"={value!r}: {err['msg'].removeprefix('Value error, ')}"
            raise FlError(f"{path}: " + (f"{name}: " if name != "testbed" else "") + f"{h}: {key}{said}") from None
    srv_ip = hostvars["srv"].get("fl_addr", "").split("/")[0]
    return Inventory(path, hostvars["mid"].get("fl_backend", ""), srv_ip, hostvars, name, written, hosts)


def _plain(value: Any) -> Any:
    """Ansible's tagged values as plain Python ones (for fl's own inventory files)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return kind(value)
    return value if value is None else str(value)


def _check(tb: Inventory) -> None:
    """Each host has what its part needs (the values' kinds: HostVars), all on one backend."""
    path = f"{tb.path}" + (f": {tb.name}" if tb.name != "testbed" else "")

    def need(host: str, *keys: str) -> None:
        for key in keys:
            if getattr(tb.hosts[host], key) is None:
                raise FlError(f"{path}: {host}: {key} is missing")

    for host in HOSTS:
        need(host, "fl_backend", "fl_netperf_port", "fl_irtt_port")
    for host in ("cli", "srv"):
        need(host, "fl_if", "fl_addr", "fl_gateway", "fl_route_to")
    need("mid", "fl_if_cli", "fl_addr_cli", "fl_if_srv", "fl_addr_srv")
    if len({tb.hosts[h].fl_backend for h in HOSTS}) != 1:
        raise FlError(f"{path}: cli, mid and srv must use the same fl_backend")


def moved(tb: Inventory, index: int) -> Inventory:
    """The same namespace testbed on subnets of its own (the INDEX-th of a parallel run):
    every address 16 × INDEX /24s further (10.71.1.1 → 10.71.17.1 for the second)."""
    if index == 0:
        return tb
    written = {h: {k: _shift(v, index) if k in ADDRESS_KEYS else v for k, v in hv.items()}
               for h, hv in tb.written.items()}
    return _inventory(tb.path, f"{tb.name}-{index + 1}", written)


def _shift(text: Any, index: int) -> str:
    address, _, prefix = str(text).partition("/")
    ip = ipaddress.ip_address(address)
    step = 16 << 8 if ip.version == 4 else 1 << 68
    return f"{ip + index * step}" + (f"/{prefix}" if prefix else "")


def testbed_inventory(tb: Inventory, host_settings: dict[str, Any] | None = None,
                      nsroot: dict[str, Any] | None = None) -> dict[str, Any]:
    """The inventory fl runs a testbed with (YAML): cli, mid and srv in group testbed, in
    that order (the cell role's run-once tasks lead with cli), with HOST_SETTINGS over
    their own variables; NSROOT, where a namespace testbed's namespaces are made (this
    machine, or a VM guest), in group nsroot."""
    hosts = {h: {k: v for k, v in tb.written[h].items() if k != "fl_inventory_host"} | (host_settings or {})
             for h in HOSTS}
    groups: dict[str, Any] = {"testbed": {"hosts": hosts}}
    if nsroot is not None:
        groups["nsroot"] = {"hosts": {"nsroot": nsroot}}
    return {"all": {"children": groups}}
