"""One host's inventory variables, typed: every `fl_*` key an inventory may set, checked
when the inventory is read (testbed/inventory.py), so that a typo or a bad value is an
error naming the file, host and key before anything runs. Which keys a host of each part
(cli, mid, srv) needs is inventory.py's `_check`; the playbooks read the same keys
(tests/unit/test_host_vars.py fails on a key they read that this model lacks)."""
from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

IFNAME_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,11}\Z")  # 15 minus the 'ifb4' prefix of its IFB


def _ifname(value: str) -> str:
    if not IFNAME_RE.match(value):
        raise ValueError("not an interface name (1-11 characters: letters, digits, _ . : -)")
    return value


def _parsed_by(parse: Callable[[str], object], kind: str) -> Callable[[str], str]:
    """A validator keeping a value PARSE accepts, else saying it is not a KIND."""
    def check(value: str) -> str:
        try:
            parse(value)
        except ValueError:
            raise ValueError(f"not an IPv4/IPv6 {kind}") from None
        return value
    return check


IfName = Annotated[str, AfterValidator(_ifname)]
Interface = Annotated[str, AfterValidator(_parsed_by(ipaddress.ip_interface, "address/prefix"))]
Network = Annotated[str, AfterValidator(_parsed_by(ipaddress.ip_network, "network"))]
Port = Annotated[int, Field(gt=0, lt=65536)]


class HostVars(BaseModel):
    """A host's `fl_*` variables as the inventory writes them (group vars merged)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fl_backend: Literal["netns", "ssh"] | None = None  # how fl reaches the hosts: namespaces here, or ssh
    fl_role: Literal["cli", "mid", "srv"] | None = None  # its part, where its name is not that
    fl_inventory_host: str | None = None  # its name in the inventory file (fl sets it)
    fl_netperf_port: Port | None = None  # netserver's control port
    fl_irtt_port: Port | None = None  # irtt's server port
    fl_netns: str | None = None  # namespace testbeds: its namespace (a template of the testbed id)
    fl_testbed_id: str | None = None  # namespace testbeds: fl sets it
    fl_if: IfName | None = None  # an endpoint's testbed interface
    fl_addr: Interface | None = None  # and its address/prefix
    fl_route_to: Network | None = None  # the other endpoint's network
    fl_gateway: Interface | None = None  # through the middlebox's address
    fl_tunnel_addr: Interface | None = None  # an endpoint's address inside the cli-srv tunnel
    fl_if_cli: IfName | None = None  # the middlebox's port facing the client
    fl_addr_cli: Interface | None = None
    fl_if_srv: IfName | None = None  # and the one facing the server
    fl_addr_srv: Interface | None = None
    fl_vm_kernel: str | None = None  # --vm's defaults (docs/testbeds.md)
    fl_vm_accel: str | None = None
    fl_vm_clock: str | None = None
    fl_vm_cpus: str | None = None
    fl_vm_memory: str | None = None
    fl_vm_append: str | None = None
    fl_push_dest: str | None = None  # fl push's defaults (docs/metrics.md)
    fl_push_url: str | None = None
    fl_push_rsh: str | None = None

    def _need(self, key: str) -> str:
        value = getattr(self, key)
        if value is None:  # inventory._check requires every key a host's part needs
            raise ValueError(f"{key} is missing")
        return str(value)

    @property
    def netperf_port(self) -> int:
        return int(self._need("fl_netperf_port"))

    @property
    def irtt_port(self) -> int:
        return int(self._need("fl_irtt_port"))

    def endpoint(self) -> Endpoint:
        """An endpoint's (cli's, srv's) link and route."""
        return Endpoint(dev=self._need("fl_if"), addr=self._need("fl_addr"), route_to=self._need("fl_route_to"),
                        gateway=self._need("fl_gateway"), tunnel_addr=self.fl_tunnel_addr)

    def middlebox(self) -> Middlebox:
        return Middlebox(cli_dev=self._need("fl_if_cli"), cli_addr=self._need("fl_addr_cli"),
                         srv_dev=self._need("fl_if_srv"), srv_addr=self._need("fl_addr_srv"))


@dataclass(frozen=True)
class Endpoint:
    """An endpoint's testbed interface, address/prefix, and route to the other's network."""

    dev: str
    addr: str
    route_to: str
    gateway: str
    tunnel_addr: str | None  # its address/prefix inside the cli-srv tunnel, if the inventory gives one

    @property
    def ip(self) -> str:
        return self.addr.split("/")[0]

    @property
    def tunnel_ip(self) -> str | None:
        return self.tunnel_addr.split("/")[0] if self.tunnel_addr else None


@dataclass(frozen=True)
class Middlebox:
    """The middlebox's two ports: toward the client, toward the server."""

    cli_dev: str
    cli_addr: str
    srv_dev: str
    srv_addr: str
