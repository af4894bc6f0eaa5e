"""The machine's own CPU accounts over a span (/proc/stat, read by the test, not by fl):
the oracle that fl's cpu_stolen flag is held against. On a machine whose hypervisor
takes a quarter of the CPU for minutes (CI has met such hours) the shaper's timers run
late and no rate or delay is the declared path's. fl's contract there is to say so: a
test of physics that steal distorts asserts the physics, or that fl flagged the steal and
the machine's accounts confirm it (a warning in pytest's summary tells which held)."""
from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

from resultlib import STOLEN, codes

#: The machine's steal over a span above which fl's cpu_stolen flag (a core over 5 % in
#: a cell's test) is confirmed: the span also holds the quieter setup between the tests.
EVIDENT = 0.02


class MachineLoad(UserWarning):
    """A check left to fl's flag: the machine's CPU steal distorted what it judges."""


def _ticks() -> list[int]:
    """/proc/stat's all-CPU counters: user nice system idle iowait irq softirq steal."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:9]]


class Steal:
    """The share of the machine's CPU time the hypervisor took from creation to stop()."""

    def __init__(self) -> None:
        self._start, self.share = _ticks(), 0.0

    def stop(self) -> Steal:
        spent = [b - a for a, b in zip(self._start, _ticks(), strict=True)]
        self.share = spent[7] / max(sum(spent), 1)
        return self

    def explains(self, flags: list[dict], what: str) -> bool:
        """Whether FLAGS (as JSON) hold fl's cpu_stolen flag, confirmed by the machine's
        accounts, to explain WHAT (a warning says so). Fails if the accounts contradict it."""
        if STOLEN not in codes(flags):
            return False
        assert self.share >= EVIDENT, f"fl flagged CPU steal, the machine's accounts show {self.share:.1%}"
        warnings.warn(MachineLoad(f"{what}: the hypervisor took {self.share:.0%} of the machine's CPU during "
                                  "the run, and fl flagged the cells cpu_stolen"), stacklevel=2)
        return True

    @contextlib.contextmanager
    def judged(self, flags: list[dict], what: str) -> Iterator[None]:
        """Assertions on physics that CPU steal distorts: one that fails stands only when
        FLAGS (as JSON) hold no cpu_stolen flag that the machine's accounts confirm."""
        try:
            yield
        except AssertionError as e:
            if not self.explains(flags, f"{what}: {str(e).splitlines()[0][:300]}"):
                raise
