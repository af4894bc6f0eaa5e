"""cell.json: what ran, how it went, and everything needed to trust, analyse or redo it.

Its `config` is the cell's fully resolved configuration exactly as it was hashed into
`config_hash` (cells/build.py), keys left out where a feature is not used.
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue

from ..units import Duration
from .files import Contract, Sparse, Versioned

#: Bumped when cell.json's layout changes; files of another version are not read.
CELL_VERSION = 1
Status = Literal["ok", "failed", "skipped", "interrupted"]
Direction = Literal["up", "down"]


class Coordinate(Contract):
    """A cell's value on one axis: its label (cell names, tables) and the value, typed
    per axis as cells/model.py's jsonable writes it."""

    label: str | None
    value: JsonValue


class FlowConfig(Sparse):
    direction: Direction  # 'up' (cli → srv) or 'down'
    cc: str
    rtt: str  # e.g. "80ms"
    tos: int | None  # TOS byte the sender sets (DSCP << 2); None = unmarked
    start: str | None = None  # delay after the first flow starts, e.g. "10s"
    ecn: str | None = None  # ECN rewrite at the middlebox, '+'-joined actions

    @property
    def rtt_ms(self) -> float:
        return Duration.parse(self.rtt).ms

    @property
    def start_s(self) -> float:
        return Duration.parse(self.start).seconds if self.start else 0.0


class LinkConfig(Contract):
    """The bottleneck in one direction as rendered for the cell."""

    rate: str
    rate_bps: float
    qdisc: str
    self_shaping: bool


class Links(Contract):
    up: LinkConfig
    down: LinkConfig

    def of(self, direction: Direction) -> LinkConfig:
        return self.up if direction == "up" else self.down


class StepConfig(Links):
    """A scheduled bottleneck change, `at` on Flent's time axis."""

    at: str

    @property
    def at_s(self) -> float:
        return Duration.parse(self.at).seconds


class NetemConfig(Contract):
    up: list[str]  # extra netem words per direction
    down: list[str]


class CellConfig(Sparse):
    format: int
    test: str
    length: int
    step_size: float
    repetition: int
    flows: list[FlowConfig]
    bottleneck: Links
    sysctls: dict[str, dict[str, str]]
    netem: NetemConfig | None = None
    rtt_split: str | None = None
    rate_schedule: list[StepConfig] | None = None
    tunnel: str | None = None
    replay_window: int | None = None
    client_qdisc: str | None = None
    udp: str | None = None  # rate of the competing UDP flow


class Backend(Sparse):
    """Where the cell ran: how the testbed's hosts are reached, the VM if any (VmConfig's
    describe()), and which of the run's testbeds it was."""

    kind: Literal["host", "vm"]
    testbed: Literal["netns", "ssh"]
    inventory: str
    clock: Literal["real", "virtual"]
    kernel: str | None = None  # VM: kernel image, its release, accelerator, vCPUs, memory
    release: str | None = None
    accel: str | None = None
    cpus: int | None = None
    memory: str | None = None
    image: str | None = None  # VM: root image name, its path
    root: str | None = None
    testbed_id: str | None = None
    testbed_label: str | None = None  # only when the run has several testbeds

    @property
    def shared_clock(self) -> bool:
        """Both captures carry one clock (namespaces on one machine, or in one VM)."""
        return self.testbed != "ssh"

    def on_testbed(self, testbed_id: str, label: str) -> Backend:
        return self.model_copy(update={"testbed_id": testbed_id} | ({"testbed_label": label} if label else {}))


class Endpoints(Contract):
    """What the analysis needs of the testbed the cell ran on (its inventory's values)."""

    server: str  # the address Flent talks to (inside the tunnel, if any): it tells directions apart
    netperf_port: int  # netperf's control port (fl_netperf_port): its connections are not flows


class CcCheck(Contract):
    declared: list[str]
    observed: list[str]  # from the senders' socket statistics
    ok: bool


class Effect(Contract):
    """A declared feature seen (or not) to take effect in the cell (run/effects/): what
    was checked against what fl did not configure itself (captures, the kernel's counters,
    the schedule's log, values read back after the test)."""

    feature: str  # e.g. "flow 2: strip-negotiation", "netem loss up", "rate schedule"
    evidence: str  # what was seen, with numbers
    ok: bool


class Calibration(Contract):
    """Did the path behave as declared? (run/calibration.py)"""

    base_rtt_ms: float | None
    declared_rtt_ms: float
    capture_drops: dict[str, int]  # per host
    cpu_saturated: dict[str, float]  # "host cpuN" → share of the test it was saturated
    offloads_on: list[str]
    effects: list[Effect] = []  # every declared feature's effect (run/effects/)
    reasons: list[str]
    ok: bool


class Checks(Sparse):
    """The checks of a finished cell (run/evaluate.py); a cell that never finished has none."""

    flent_exit: int | None = None
    failed_runners: int = 0  # Flent's count of runners that failed
    netperf_mbit: dict[str, float | None] = {}  # per Flent series: the sender's count, did it move data
    late_start_s: dict[str, float] = {}  # per Flent series whose data began late
    cc: CcCheck | None = None
    calibration: Calibration | None = None


class FlSource(Contract):
    version: str = ""
    commit: str | None = None
    dirty: bool | None = None


class CellRecord(Versioned):
    WHAT = "cell record"

    version: Literal[CELL_VERSION] = CELL_VERSION
    scenario: str
    cell: str
    config_hash: str
    status: Status
    reason: str = ""
    coordinates: dict[str, Coordinate] = {}
    swept: list[str] = []
    config: CellConfig
    backend: Backend
    endpoints: Endpoints | None = None  # None for a cell that never reached a testbed (skipped)
    started: float | None = None
    ended: float | None = None
    kernel: str = ""
    tools: dict[str, str | None] = {}
    fl: FlSource = FlSource()
    files: list[str] = []
    checks: Checks = Field(default_factory=Checks)
    phases: dict[str, float] = {}  # seconds per Ansible task of the cell's playbook

    @property
    def duration(self) -> float | None:
        return self.ended - self.started if self.started and self.ended else None

    def label(self, axis: str) -> str | None:
        """The cell's label on AXIS; None when the scenario has no such axis."""
        coordinate = self.coordinates.get(axis)
        return coordinate.label if coordinate else None
