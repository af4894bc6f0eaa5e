"""How long cells take on a kind of testbed, as measured on this machine: every run adds
its finished cells' wall times (cell.json's started and ended) to the cache's pace.json,
and `fl list` and `fl run`'s ETA estimate from them.

A cell's cost is counted in units of its Flent run (lead-in, test, lead-out), scaled on an
emulated VM by the packets it moves: under TCG the guest's work grows about linearly with
the link rate (measured on two TCG VMs sharing two cores: 50 Mbit/s cells 3.4-5.5 × their
Flent run, a flow at 5 Mbit/s about 1 ×). The pace of a kind of testbed is the median of
its cells' wall time over their units, one testbed per core (more testbeds than cores
share them); without measurements, DEFAULTS.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ..cells import Cell
from ..image.store import cache_root
from ..results.cell_record import CellRecord
from ..units import human_duration

LOG = logging.getLogger(__name__)
PACE_FILE = "pace.json"
KEEP = 400  # measured cells kept, the newest
KNEE_MBPS = 8.0  # an emulated cell's cost grows by its Flent run for every this many Mbit/s
#: Wall seconds per unit before any run measured them (a VM's boot aside): namespaces run
#: in real time plus setup; TCG's 0.6 is this machine's of 2026-11-27 (above).
DEFAULTS = {"host": 1.05, "ssh": 1.1, "vm-kvm": 1.2, "vm-tcg": 0.6}
#: Until this machine has measured a kind, its estimate is a range: the paces measured on
#: machines (and days) so far. TCG's from 0.6 (2026-11-27, a fast day) to 2.44 (2026-12-02,
#: two VMs of the l4s image at 50 Mbit/s: 29 min for a 90 s cell), a fresh box's 1.3 between.
GUESSES = {"host": (1.0, 1.3), "ssh": (1.0, 1.5), "vm-kvm": (1.1, 1.8), "vm-tcg": (0.6, 2.5)}
BOOT_S = {"vm-kvm": 15.0, "vm-tcg": 60.0}  # a VM's boot, before its first cell


@dataclass(frozen=True)
class Sample:
    kind: str
    units: float
    wall: float
    share: float  # testbeds per core, at least 1: how much the run's testbeds shared the CPU
    when: float


def kind_of(vm_accel: str | None, backend: str) -> str:
    """The kind of testbed a pace is kept for: host, ssh, vm-kvm or vm-tcg."""
    return f"vm-{vm_accel}" if vm_accel else ("ssh" if backend == "ssh" else "host")


def units(cell: Cell, kind: str) -> float:
    """A cell's cost in seconds of its Flent run, scaled by its link rate under emulation."""
    flent = float(cell.config.flent_s)
    if kind != "vm-tcg":
        return flent
    return flent * (1 + cell.config.bottleneck.max_rate_bps / 1e6 / KNEE_MBPS)


def share(testbeds: int, kind: str) -> float:
    """How much TESTBEDS of KIND stretch each other's wall time: TCG guests need a core
    each (on the virtual clock more of them than cores take longer; elsewhere cells run
    in real time, and a shared core shows as cpu_busy flags instead)."""
    cores = os.cpu_count() or 1
    return max(1.0, testbeds / cores) if kind == "vm-tcg" else 1.0


def _file() -> Path:
    return cache_root() / PACE_FILE


def load() -> list[Sample]:
    try:
        return [Sample(**s) for s in json.loads(_file().read_text())]
    except (OSError, ValueError, TypeError):
        return []


def record(done: list[tuple[Cell, CellRecord]], kind: str, testbeds: int) -> None:
    """Add the finished cells of a run (ok, with both times) to the measurements."""
    new = [Sample(kind, units(c, kind), rec.ended - rec.started, share(testbeds, kind), rec.ended)
           for c, rec in done if rec.status == "ok" and rec.started and rec.ended]
    if not new:
        return
    kept = (load() + new)[-KEEP:]
    try:
        _file().parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=_file().parent, prefix=".pace-", delete=False) as tmp:
            tmp.write(json.dumps([asdict(s) for s in kept]))  # a run beside this one may lose its
        Path(tmp.name).replace(_file())                       # samples, never the file
    except OSError as e:
        LOG.debug("pace not kept: %s", e)


@dataclass(frozen=True)
class Pace:
    kind: str
    factor: float  # wall seconds per unit, one testbed per core
    measured: int  # cells it comes from (0: DEFAULTS)
    since: float | None  # the oldest of them

    def cell_s(self, cell: Cell, testbeds: int = 1) -> float:
        return self.factor * units(cell, self.kind) * share(testbeds, self.kind)

    def run_s(self, cells: list[Cell], testbeds: int) -> float:
        """Wall seconds for CELLS on TESTBEDS at once (the longest first, as fl runs them)."""
        if not cells:
            return 0.0
        n = max(1, min(testbeds, len(cells)))
        total = sum(self.cell_s(c, n) for c in cells) / n
        return BOOT_S.get(self.kind, 0.0) + max(total, max(self.cell_s(c, n) for c in cells))

    @property
    def guess(self) -> tuple[float, float] | None:
        """Unmeasured here: the range of paces measured elsewhere, as factors of this one."""
        return None if self.measured else (GUESSES[self.kind][0] / self.factor, GUESSES[self.kind][1] / self.factor)

    def estimate(self, cells: list[Cell], testbeds: int) -> str:
        """How long CELLS take on TESTBEDS, in words: "~1h05m", or a range where this
        machine has not measured the kind yet ("1h05m to 4h12m, a guess")."""
        if self.measured or not cells:
            return f"~{human_duration(self.run_s(cells, testbeds))}"
        low, high = (dataclasses.replace(self, factor=f).run_s(cells, testbeds) for f in GUESSES[self.kind])
        return f"{human_duration(low)}–{human_duration(high)} (a guess)"

    def describe(self) -> str:
        if not self.measured:
            low, high = GUESSES[self.kind]
            return (f"{self.kind} pace not measured here yet: the guess spans the {low:g} to {high:g} "
                    "measured elsewhere; the first run's cells measure it")
        day = time.strftime("%Y-%m-%d", time.gmtime(self.since or 0))
        return f"{self.kind} pace {self.factor:.2f}, from {self.measured} cells measured here since {day}"


def pace(kind: str, samples: list[Sample] | None = None) -> Pace:
    mine = [s for s in (load() if samples is None else samples) if s.kind == kind and s.units > 0]
    if not mine:
        return Pace(kind, DEFAULTS[kind], 0, None)
    return Pace(kind, statistics.median(s.wall / (s.units * s.share) for s in mine), len(mine),
                min(s.when for s in mine))
