"""cell.json: what ran, how it went, and everything needed to trust, analyse or redo it.

Its `config` is the cell's fully resolved configuration exactly as it was hashed into
`config_hash` (cells/resolve.py), keys left out where a feature is not used.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Final, Literal

from pydantic import Field, JsonValue

from ..flent_tests import FLENT_LEAD_S, FLENT_TESTS, PING, FlentTest
from ..units import Duration, Rate
from .files import Contract, Sparse, Versioned
from .flags import Flag, calibration_flag

#: Bumped when cell.json's layout changes; older files are upgraded on read (UPGRADES).
CELL_VERSION: Final = 2  # and the version field's Literal below (mypy holds them equal)
Status = Literal["ok", "failed", "skipped", "interrupted"]
Direction = Literal["up", "down"]


class Coordinate(Contract):
    """A cell's value on one axis: its label (cell names, tables) and the value, typed
    per axis as cells/model.py's jsonable writes it."""

    label: str | None
    value: JsonValue


class FlowConfig(Sparse):
    direction: Direction
    """'up' (cli → srv) or 'down'."""
    cc: str
    rtt: str
    """E.g. "80ms"."""
    tos: int | None
    """TOS byte the sender sets (DSCP << 2); None = unmarked."""
    start: str | None = None
    """Delay after the first flow starts, e.g. "10s"."""
    ecn: str | None = None
    """ECN rewrite at the middlebox, '+'-joined actions."""
    receiver_cc: str | None = None
    """The receiving socket's CC when it is not the sender's (scenario key receiver_cc)."""

    @property
    def rtt_s(self) -> float:
        return Duration.parse(self.rtt).seconds

    @property
    def ccs(self) -> tuple[str, ...]:
        """The CCs the flow's two sockets run: the sender's, and the receiver's if another."""
        return (self.cc, self.receiver_cc) if self.receiver_cc else (self.cc,)

    @property
    def rtt_ms(self) -> float:
        return self.rtt_s * 1e3

    @property
    def start_s(self) -> float:
        return Duration.parse(self.start).seconds if self.start else 0.0

    @property
    def dscp(self) -> int | None:
        return None if self.tos is None else self.tos >> 2

    @property
    def ecn_actions(self) -> str:
        """The '+'-joined ECN actions, "none" for none."""
        return self.ecn or "none"


class LinkConfig(Contract):
    """The bottleneck in one direction as rendered for the cell."""

    rate: str
    """As tc gets it, e.g. "50mbit"."""
    rate_bps: float
    qdisc: str
    self_shaping: bool

    @property
    def words(self) -> list[str]:
        """The qdisc's words, as tc gets them."""
        return self.qdisc.split()


class Links(Contract):
    up: LinkConfig
    down: LinkConfig

    def of(self, direction: Direction) -> LinkConfig:
        return self.up if direction == "up" else self.down

    @property
    def max_rate_bps(self) -> float:
        """The faster direction's rate."""
        return max(self.up.rate_bps, self.down.rate_bps)


class StepConfig(Links):
    """A scheduled bottleneck change, `at` on Flent's time axis."""

    at: str

    @property
    def at_s(self) -> float:
        return Duration.parse(self.at).seconds


#: The word that starts a second netem stage, chained after the path delay's.
THEN = "then"

#: The ECN codepoints a video flow or a probe may send (scenario words) → the IP ECN field.
CODEPOINT_WORDS: Final = {"not-ect": 0, "ect1": 1, "ect0": 2}


class Marked(Contract):
    """A UDP flow's marking: its ECN codepoint (which of DualPI2's queues it takes) and DSCP."""

    codepoint: Literal["not-ect", "ect1", "ect0"]
    """The ECN codepoint of every datagram (ect1: DualPI2's L queue)."""
    dscp: int = 0
    """The DSCP of every datagram."""

    @property
    def tos(self) -> int:
        """The IP TOS byte the sender sets: DSCP and ECN field."""
        return self.dscp << 2 | CODEPOINT_WORDS[self.codepoint]

    @property
    def dscp_label(self) -> str:
        return f"-dscp{self.dscp}" if self.dscp else ""


class VideoConfig(Marked):
    """The video-like flow (scenario key `video`): unresponsive UDP client → server in
    frames, each a burst of datagrams at line rate, sent `fps` times a second at a mean
    bit rate of UDP payload `rate` (iperf 2's isochronous mode; frame sizes log-normal
    with standard deviation `sd` as a bit rate, fixed without it)."""

    rate: str
    """Mean bit rate of UDP payload (tc words)."""
    fps: int
    """Frames per second."""
    sd: str | None = None
    """Standard deviation of the frames' sizes, as a bit rate; None: every frame the same."""

    @property
    def rate_bps(self) -> float:
        return Rate.parse(self.rate).bps

    @property
    def isochronous(self) -> str:
        """iperf's --isochronous value: frames per second, mean and standard deviation (bits/s)."""
        sd = Rate.parse(self.sd).bps if self.sd else 0
        return f"{self.fps}:{self.rate_bps:.0f},{sd:.0f}"

    @property
    def label(self) -> str:
        return f"video{self.rate}-{self.fps}fps-{self.codepoint}" + (f"-sd{self.sd}" if self.sd else "") + self.dscp_label


class ProbeConfig(Marked):
    """The latency probe (scenario key `probe`): irtt's small UDP packets client → server
    and back every `interval`, marked as declared, through the queues the flows fill."""

    interval: str = "10ms"
    """Time between probe packets (tc words)."""

    @property
    def interval_s(self) -> float:
        return Duration.parse(self.interval).seconds

    @property
    def label(self) -> str:
        return f"probe-{self.codepoint}-{self.interval}{self.dscp_label}"


class SchemeConfig(Contract):
    """A congestion controller in user space that flows of the cell run (scenario/schemes.py):
    its programs' commands as its scheme file gives them (fl's placeholders still in), so a
    changed scheme file is a changed cell."""

    title: str
    implementation: str
    version: str
    transport: Literal["udp", "tcp"]
    listens: Literal["sender", "receiver"]
    """Which side listens first: the other connects when the flows start."""
    needs: list[str]
    setup: dict[str, list[list[str]]]
    """Per side, the commands run before it starts."""
    sender: list[str]
    receiver: list[str]
    stdin: dict[str, str] = {}
    """Per side, its standard input: a file, or `hold` (open and empty); /dev/null otherwise."""
    stdout: dict[str, str] = {}
    """Per side, `discard` where its standard output is not kept (in its log otherwise)."""
    env: dict[str, dict[str, str]] = {}
    """Per side, environment variables its program gets."""
    stop: str
    """The signal that ends a side."""

    @property
    def label(self) -> str:
        """What tables call it: "QUIC Cubic (ngtcp2 0.12.1)"."""
        return f"{self.title} ({self.implementation} {self.version})"

    def command(self, side: str) -> list[str]:
        return self.sender if side == "sender" else self.receiver


class NetemConfig(Contract):
    up: list[str]
    """Extra netem words per direction; `jitter` goes into netem's delay clause; the words
    after `then` are a second netem, chained after the path delay's."""
    down: list[str]

    def _stages(self, direction: Direction) -> tuple[list[str], list[str]]:
        words = self.up if direction == "up" else self.down
        return (words[:words.index(THEN)], words[words.index(THEN) + 1:]) if THEN in words else (list(words), [])

    def chained(self, direction: Direction) -> list[str]:
        """The second netem's arguments for one direction, or [] for none."""
        return self._stages(direction)[1]

    def delay_args(self, direction: Direction, delay: Duration) -> list[str]:
        """netem arguments for one direction: delay (+ jitter, distribution), then the rest."""
        words = self._stages(direction)[0]
        clause, rest = ["delay", delay.text], []
        i = 0
        while i < len(words):
            if words[i] == "jitter":
                clause.append(words[i + 1])
                if i + 2 < len(words) and words[i + 2].endswith("%"):
                    clause.append(words[i + 2])
                    i += 1
                i += 2
            elif words[i] == "distribution":
                clause += words[i:i + 2]
                i += 2
            else:
                rest.append(words[i])
                i += 1
        return clause + rest


class CellConfig(Sparse):
    """The cell's fully resolved configuration (cells/resolve.py); features left at their
    defaults are left out, so a new feature never changes the hash of cells without it."""

    format: int
    """Bumped when the meaning of a configuration changes."""
    test: str
    """The Flent test."""
    length: int
    """Seconds (Flent -l)."""
    step_size: float
    """Flent's sampling interval, seconds."""
    repetition: int
    flows: list[FlowConfig]
    bottleneck: Links
    sysctls: dict[str, dict[str, str]]
    """Per host (cli, mid, srv): the sysctls set for the cell."""
    module_params: dict[str, dict[str, str]] | None = None
    """Per congestion-control module (tcp_prague): the parameters set for the cell on cli and srv."""
    netem: NetemConfig | None = None
    rtt_split: str | None = None
    rate_schedule: list[StepConfig] | None = None
    tunnel: str | None = None
    replay_window: int | None = None
    client_qdisc: str | None = None
    udp: str | None = None
    """Rate of the competing UDP flow."""
    video: VideoConfig | None = None
    """The video-like flow."""
    probe: ProbeConfig | None = None
    """The latency probe."""
    lead: int | None = None
    """Flent's lead-in and lead-out (-d), seconds, when not its default."""
    schemes: dict[str, SchemeConfig] | None = None
    """The schemes (user-space congestion controllers) that flows whose cc names one run."""

    def scheme(self, flow: FlowConfig) -> SchemeConfig | None:
        """The scheme FLOW runs, or None for a kernel congestion control's flow."""
        return (self.schemes or {}).get(flow.cc)

    @property
    def kernel_flows(self) -> list[FlowConfig]:
        """The flows of kernel congestion controls: Flent's (netperf's), in order."""
        return [f for f in self.flows if self.scheme(f) is None]

    @property
    def scheme_flows(self) -> list[tuple[int, FlowConfig, SchemeConfig]]:
        """The flows schemes run: (flow number from 1, flow, scheme)."""
        return [(i, f, s) for i, f in enumerate(self.flows, 1) if (s := self.scheme(f)) is not None]

    @property
    def kernel_test(self) -> FlentTest:
        """The Flent test that runs the kernel flows: the scenario's, or with schemes beside
        them tcp_nup/tcp_ndown for those alone (a scheme's flows go up; cells/resolve.py
        refuses kernel flows both ways beside one), or PING where schemes run every flow."""
        kernel = self.kernel_flows
        if len(kernel) == len(self.flows):
            return self.flent_test
        if not kernel:
            return PING
        return FLENT_TESTS["tcp_nup" if kernel[0].direction == "up" else "tcp_ndown"]

    @property
    def lead_s(self) -> int:
        """Seconds Flent's ping runs alone before the flows start and after they end."""
        return self.lead or FLENT_LEAD_S

    @property
    def flent_s(self) -> int:
        """Seconds of Flent's run: the lead-in, the test and the lead-out."""
        return self.length + 2 * self.lead_s

    @property
    def flent_test(self) -> FlentTest:
        return FLENT_TESTS[self.test]

    @property
    def split(self) -> str:
        """Where the path delay goes: even, up or down."""
        return self.rtt_split or "even"

    @property
    def steps(self) -> list[StepConfig]:
        return self.rate_schedule or []

    @property
    def client_qdisc_words(self) -> list[str]:
        """The client's root qdisc as tc gets it, [] for none."""
        return self.client_qdisc.split() if self.client_qdisc else []

    @property
    def udp_rate(self) -> Rate | None:
        return Rate.parse(self.udp) if self.udp else None

    @property
    def per_flow_rtt(self) -> bool:
        return len({f.rtt for f in self.flows}) > 1

    @property
    def max_rtt_s(self) -> float:
        return max((f.rtt_s for f in self.flows), default=0.0)

    @property
    def needs_path_netem(self) -> bool:
        """A path delay or impairment: netem on the middlebox's IFBs."""
        return self.max_rtt_s > 0 or self.netem is not None


class Backend(Sparse):
    """Where the cell ran: how the testbed's hosts are reached, the VM if any (VmConfig's
    describe()), and which of the run's testbeds it was."""

    kind: Literal["host", "vm"]
    testbed: Literal["netns", "ssh"]
    inventory: str
    clock: Literal["real", "virtual"]
    kernel: str | None = None
    """VM: kernel image, its release, accelerator, vCPUs, memory."""
    release: str | None = None
    accel: str | None = None
    cpus: int | None = None
    memory: str | None = None
    append: str | None = None
    """VM: kernel command line words added (--vm-append)."""
    image: str | None = None
    """VM: root image name, its path."""
    root: str | None = None
    testbed_id: str | None = None
    testbed_label: str | None = None
    """Only when the run has several testbeds."""

    @property
    def shared_clock(self) -> bool:
        """Both captures carry one clock (namespaces on one machine, or in one VM)."""
        return self.testbed != "ssh"

    def on_testbed(self, testbed_id: str, label: str) -> Backend:
        return self.model_copy(update={"testbed_id": testbed_id} | ({"testbed_label": label} if label else {}))


class Endpoints(Contract):
    """What the analysis needs of the testbed the cell ran on (its inventory's values)."""

    server: str
    """The address Flent talks to (inside the tunnel, if any): it tells directions apart."""
    netperf_port: int
    """Netperf's control port (fl_netperf_port): its connections are not flows."""


class BottleneckPorts(Contract):
    """The middlebox's ports whose qdiscs are the cell's bottleneck, by the direction each
    queues, as the cell's commands named them (testbed/commands.py, from the inventory's
    fl_if_srv and fl_if_cli): the analysis finds each direction's queue samples and qdisc
    totals by them."""

    up: str
    """The port towards srv: it queues the upload."""
    down: str
    """The port towards cli: it queues the download."""

    def by_direction(self) -> dict[Direction, str]:
        return {"up": self.up, "down": self.down}


class CcCheck(Contract):
    declared: list[str]
    observed: list[str]
    """From the senders' socket statistics."""
    ok: bool


class Effect(Contract):
    """A declared feature seen (or not) to take effect in the cell (run/effects/): what
    was checked against what fl did not configure itself (captures, the kernel's counters,
    the schedule's log, values read back after the test)."""

    feature: str
    """E.g. "flow 2: strip-negotiation", "netem loss up", "rate schedule"."""
    evidence: str
    """What was seen, with numbers."""
    ok: bool


class Calibration(Contract):
    """Did the path behave as declared? (run/calibration.py)"""

    base_rtt_ms: float | None
    declared_rtt_ms: float
    capture_drops: dict[str, int]
    """Per host."""
    cpu_saturated: dict[str, float]
    """Per 'host cpuN': the share of the test it was saturated."""
    cpu_stolen: dict[str, float] = {}
    """Per 'host cpuN': the share of its time in the test the hypervisor took (steal)."""
    offloads_on: list[str]
    effects: list[Effect] = []
    """Every declared feature's effect (run/effects/)."""
    reasons: list[Flag]
    """Each way the path did not behave as declared (kind calibration)."""
    ok: bool


class Checks(Sparse):
    """The checks of a finished cell (run/evaluate.py); a cell that never finished has none."""

    flent_exit: int | None = None
    failed_runners: int = 0
    """Flent's count of runners that failed."""
    netperf_mbit: dict[str, float | None] = {}
    """Per Flent series: the sender's count, did it move data."""
    late_start_s: dict[str, float] = {}
    """Per Flent series whose data began late."""
    cc: CcCheck | None = None
    calibration: Calibration | None = None


class CcModule(Contract):
    """A congestion control the cell used that is a kernel module, as the testbed's client
    had it loaded: which implementation ran, and with which parameters."""

    module: str
    """E.g. "tcp_prague"."""
    file: str | None
    """The module's file on the testbed (modinfo)."""
    sha256: str | None
    version: str | None
    srcversion: str | None
    parameters: dict[str, str]
    """/sys/module/MODULE/parameters/: as read when the run began, with the cell's own
    (config.module_params) in place."""
    writable: list[str] = []
    """The parameters a cell may set (module_params)."""


class FlSource(Contract):
    version: str = ""
    commit: str | None = None
    dirty: bool | None = None


class CellRecord(Versioned):
    """cell.json: what ran, how it went, and everything needed to trust, analyse or redo it."""

    WHAT = "cell record"
    UPGRADES: ClassVar[dict[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {1: lambda data: _reasons_as_flags(data)}

    version: Literal[2] = CELL_VERSION
    scenario: str
    """The scenario's name (its folder in the run)."""
    cell: str
    """The cell's name (its folder), from its coordinates."""
    config_hash: str
    """Hash of `config`: a rerun skips a cell done with the same hash."""
    status: Status
    reason: str = ""
    """Why the cell failed, was skipped or interrupted."""
    coordinates: dict[str, Coordinate] = {}
    """Per axis (every axis, fixed ones included, and the repetition): label and value."""
    swept: list[str] = []
    """The axes the scenario sweeps."""
    config: CellConfig
    """The fully resolved configuration, exactly as hashed."""
    backend: Backend
    endpoints: Endpoints | None = None
    """None for a cell that never reached a testbed (skipped)."""
    ports: BottleneckPorts | None = None
    """None for a cell that never reached a testbed, and in cells recorded before fl recorded
    them (the analysis reads those cells' ports from their queue samples' header)."""
    started: float | None = None
    """Epoch seconds on the machine fl runs on (never a VM guest's clock)."""
    ended: float | None = None
    kernel: str = ""
    """The testbed's kernel release."""
    tools: dict[str, str | None] = {}
    """Versions of the tools on the testbed (flent, netperf, tc, …)."""
    cc_modules: dict[str, CcModule] = {}
    """Per congestion control of the cell's flows that is a module (tcp_prague, …)."""
    fl: FlSource = FlSource()
    """The fl that ran the cell: version, commit, uncommitted changes."""
    files: list[str] = []
    """The cell's files when it was committed."""
    checks: Checks = Field(default_factory=Checks)
    phases: dict[str, float] = {}
    """Seconds per phase of the cell, keyed by flharness/phases.py's Phase values: hand_over,
    setup, flent, collect, fetch, check, other. Cells recorded before fl marked phases
    have seconds per Ansible task, keyed by its name ("cell : Run Flent", …)."""

    @property
    def duration(self) -> float | None:
        return self.ended - self.started if self.started and self.ended else None

    def label(self, axis: str) -> str | None:
        """The cell's label on AXIS; None when the scenario has no such axis."""
        coordinate = self.coordinates.get(axis)
        return coordinate.label if coordinate else None


def _reasons_as_flags(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 → 2: the calibration's reasons were texts; they are flags (results/flags.py)."""
    calibration = (data.get("checks") or {}).get("calibration")
    if not calibration:
        return data
    reasons = [calibration_flag("unclassified", r).model_dump() if isinstance(r, str) else r
               for r in calibration.get("reasons", [])]
    return {**data, "checks": {**data["checks"], "calibration": {**calibration, "reasons": reasons}}}
