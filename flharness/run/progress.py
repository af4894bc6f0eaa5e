"""One progress line per cell started and finished, with the run's ETA (all testbeds)."""
from __future__ import annotations

import sys
import time
from typing import TextIO

from ..cells import Cell
from ..units import human_duration
from .evaluate import Verdict


class Progress:
    def __init__(self, estimates: list[float], testbeds: int = 1, out: TextIO = sys.stdout,
                 guess: tuple[float, float] | None = None) -> None:
        self.estimates = estimates  # planned seconds per cell to run
        self.testbeds = testbeds
        self.guess = guess  # the estimates' range as factors of them, while no pace was measured here
        self.started = 0
        self.done = 0
        self.spent = 0.0  # seconds the finished cells took
        self.out = out
        self.width = len(str(len(estimates)))

    def eta(self) -> float:
        """Seconds left: the cells not finished, at the pace measured so far, over the testbeds."""
        remaining = self.estimates[self.done:]
        planned_done = sum(self.estimates[:self.done])
        scale = self.spent / planned_done if planned_done else 1.0
        return sum(remaining) * scale / self.testbeds

    def start(self, name: str, testbed: str = "") -> None:
        self.started += 1
        n = f"{self.started:>{self.width}}/{len(self.estimates)}"
        eta = human_duration(self.eta())
        if self.guess and not self.done:  # nothing measured yet: the range, said as a guess
            eta = " to ".join(human_duration(self.eta() * f) for f in self.guess) + ", a guess"
        self._print(f"[{n}]{self._on(testbed)} {name} … (run ETA {eta})")

    def finish(self, name: str, status: str, seconds: float, detail: str = "", testbed: str = "") -> None:
        self.done += 1
        self.spent += seconds
        n = f"{self.done:>{self.width}}/{len(self.estimates)}"
        extra = f"  {detail}" if detail else ""
        self._print(f"[{n}]{self._on(testbed)} {status:<7} {name} ({human_duration(seconds)}){extra}")

    def again(self, name: str, seconds: float, detail: str, testbed: str = "") -> None:
        """A cell that is run once more: one more to start and finish, the same estimate."""
        self.estimates.append(seconds)
        self._print(f"[{'':>{self.width}} {'':>{self.width}}]{self._on(testbed)} {'again':<7} {name} "
                    f"({human_duration(seconds)})  {detail}")

    @staticmethod
    def _on(testbed: str) -> str:
        return f" {testbed}:" if testbed else ""

    def _print(self, line: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {line}", file=self.out, flush=True)


def progress_detail(cell: Cell, verdict: Verdict) -> str:
    if verdict.status != "ok":
        return verdict.reason[:200]
    util = verdict.utilisation.get("up")
    rates = " then ".join([cell.config.bottleneck.up.rate, *(step.up.rate for step in cell.config.steps)])
    parts = [f"goodput {util:.1%} of {rates}'s payload capacity"] if util is not None else []
    parts += [f"⚑ {r.text}" for r in verdict.checks.calibration.reasons] if verdict.checks.calibration else []
    if verdict.analysis_error:
        parts.append(f"analysis failed: {verdict.analysis_error}")
    parts += [f"{name} began {delay:g} s late" for name, delay in verdict.checks.late_start_s.items()]
    return "; ".join(parts)
