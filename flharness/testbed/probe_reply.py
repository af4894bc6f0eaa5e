"""The kernel probe's reply (probe.py's Reply) as the controller reads it: pydantic
models, every key required and none unknown, so a host whose probe answered something
else is one error naming the host, not a default read as an answer."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import FlError
from ..results.cell_record import CcModule


class _Reply(BaseModel):
    model_config = ConfigDict(extra="forbid")


class QdiscVerdict(_Reply):
    verdict: Literal["ok", "unsupported", "invalid"]
    message: str | None = None
    """tc's complaint, with unsupported and invalid."""


class Features(_Reply):
    """What every testbed uses, always tried; cls_flow and the tunnel kinds only when a
    run's cells have tunnels (or fl check): None, not tried."""

    ifb: bool
    ingress: bool
    u32_mirred: bool
    netem: bool
    nftables: bool
    veth: bool
    accecn: bool
    cls_flow: bool | None = None
    wireguard: bool | None = None
    fou: bool | None = None
    ipsec: bool | None = None


class HostFacts(_Reply):
    kernel: str
    tools: dict[str, str | None]


class ProbeReply(_Reply):
    """probe.py's Reply as the controller reads it: every key required, none unknown."""

    kernel: str
    root: bool
    tools: dict[str, str | None]
    error: str | None
    features: Features | None
    """None where the probe could not run (error)."""
    kinds: dict[str, str]
    qdiscs: dict[str, QdiscVerdict]
    ccs: dict[str, bool]
    cc_modules: dict[str, CcModule]
    sysctls: dict[str, bool]
    sysctl_defaults: dict[str, str]
    sysctl_sets: dict[str, str]
    tcp_rewrite: dict[Literal["tc", "nft"], bool]
    feature_errors: dict[str, str] = {}
    """A feature found missing → what failed (the command and the kernel's complaint)."""
    programs: dict[str, bool] = {}
    """Each of the schemes' programs asked for: on the host's PATH."""
    cc_errors: dict[str, str] = {}
    """A congestion control whose module the kernel has but would not load → why (modprobe's
    complaint and the kernel's lines about it: a parameter out of its range)."""
    hosts: dict[str, HostFacts] = {}
    """Per host of a testbed of separate hosts (merge_hosts): what must agree across testbeds."""


def parse_reply(data: object, host: str) -> ProbeReply:
    """HOST's probe reply, checked: a missing, unknown or mistyped key is an error naming the host."""
    if isinstance(data, dict) and data.get("features") == {}:
        data = {**data, "features": None}  # the probe stopped before trying any
    try:
        return ProbeReply.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(the reply)"
        raise FlError(f"the kernel probe's reply from {host} is not what fl asked for: {where}: {first['msg']}") from None
