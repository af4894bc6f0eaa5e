"""What a cell is: flows, the bottleneck per direction, path features, its coordinates."""
from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from ..flent_tests import FlentTest
from ..results.cell_record import CellConfig
from ..scenario.features import Netem
from ..scenario.values import LinkRate, Point, QdiscSpec
from ..units import Duration, Rate

#: DSCPs with no standard meaning (odd, not LE), so no qdisc gives a flow special
#: treatment; flow i is marked with the i-th when flows must be told apart on the path.
FLOW_DSCPS = (19, 35, 51, 3, 5, 7, 9, 11, 13, 15, 17, 21, 23, 25, 27, 29, 31, 33, 37, 39)


@dataclass(frozen=True)
class Flow:
    index: int  # 1-based, as in Flent's "TCP upload::1"
    direction: str  # 'up' (cli → srv) or 'down'
    cc: str
    rtt: Duration
    tos: int | None  # TOS byte set by the sender (DSCP << 2), None = unmarked
    start: Duration = Duration.of_seconds(0)  # noqa: RUF009 - immutable (frozen); after the other flows start (Flent stream_delays)
    ecn: str = "none"  # ECN rewrite at the middlebox, '+'-joined actions

    @property
    def dscp(self) -> int | None:
        return None if self.tos is None else self.tos >> 2


@dataclass(frozen=True)
class Link:
    """The bottleneck in one direction: a rate and the qdisc that holds the queue."""

    rate: Rate
    qdisc: tuple[str, ...]
    self_shaping: bool

    def as_json(self) -> dict[str, Any]:
        return {"rate": self.rate.text, "rate_bps": self.rate.bps, "qdisc": " ".join(self.qdisc),
                "self_shaping": self.self_shaping}


@dataclass(frozen=True)
class Step:
    """A scheduled bottleneck change, `at` seconds on Flent's time axis."""

    at: Duration
    up: Link
    down: Link


@dataclass(frozen=True)
class PathSetup:
    """Everything between the endpoints besides the bottleneck itself."""

    netem: Netem | None = None
    schedule: tuple[Step, ...] = ()
    tunnel: str = "none"
    replay_window: int = 32
    rtt_split: str = "even"  # where the path delay goes: even, up or down (RTT_SPLITS)


@dataclass(frozen=True)
class Endpoints:
    sysctls: dict[str, dict[str, str]] = field(default_factory=dict)
    client_qdisc: tuple[str, ...] | None = None
    udp: Rate | None = None  # a competing unresponsive UDP flow cli → srv


@dataclass(frozen=True)
class Cell:
    scenario: str
    name: str
    repetition: int
    coords: dict[str, Point]  # every axis, fixed ones included
    swept: tuple[str, ...]
    test: FlentTest
    length: int
    step_size: float
    flows: tuple[Flow, ...]
    up: Link
    down: Link
    path: PathSetup
    ends: Endpoints
    config: CellConfig  # the fully resolved configuration, as hashed and recorded
    config_hash: str

    @property
    def sysctls(self) -> dict[str, dict[str, str]]:
        return self.ends.sysctls

    @property
    def per_flow_rtt(self) -> bool:
        return len({f.rtt for f in self.flows}) > 1

    @property
    def max_rtt(self) -> Duration:
        return max((f.rtt for f in self.flows), default=Duration.of_seconds(0))

    @property
    def needs_path_netem(self) -> bool:
        return self.max_rtt.seconds > 0 or self.path.netem is not None

    def coordinates(self) -> dict[str, Any]:
        """Typed coordinates for cell.json and Flent metadata: label and value per axis."""
        out = {axis: {"label": p.label, "value": jsonable(p.value)} for axis, p in self.coords.items()}
        out["repetition"] = {"label": f"r{self.repetition}", "value": self.repetition}
        return out


def jsonable(value: Any) -> Any:
    """Typed values as JSON: rates and durations with their numbers."""
    if isinstance(value, LinkRate):
        return {"up": value.up.text, "down": value.down.text, "up_bps": value.up.bps, "down_bps": value.down.bps}
    if isinstance(value, QdiscSpec):
        return {"spec": value.template, "shaper": value.shaper}
    if isinstance(value, FlentTest):
        return value.name
    if isinstance(value, Duration):
        return {"text": value.text, "ms": value.ms}
    if isinstance(value, Rate):
        return {"text": value.text, "bps": value.bps}
    if isinstance(value, (tuple, list)):
        return [jsonable(v) for v in value]
    if is_dataclass(value):
        return {f.name: jsonable(getattr(value, f.name)) for f in fields(value)}
    return value
