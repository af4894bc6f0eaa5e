"""One progress line per cell, with an ETA from the cells measured so far."""
from __future__ import annotations

import sys
import time
from typing import TextIO

from ..units import human_duration


class Progress:
    def __init__(self, estimates: list[float], out: TextIO = sys.stdout) -> None:
        self.estimates = estimates  # planned seconds per cell to run
        self.done = 0
        self.spent = 0.0
        self.out = out
        self.width = len(str(len(estimates)))

    def eta(self) -> float:
        remaining = self.estimates[self.done:]
        planned_done = sum(self.estimates[:self.done])
        scale = self.spent / planned_done if planned_done else 1.0
        return sum(remaining) * scale

    def start(self, name: str) -> None:
        n = f"{self.done + 1:>{self.width}}/{len(self.estimates)}"
        self._print(f"[{n}] {name} … (run ETA {human_duration(self.eta())})")

    def finish(self, name: str, status: str, seconds: float, detail: str = "") -> None:
        self.done += 1
        self.spent += seconds
        n = f"{self.done:>{self.width}}/{len(self.estimates)}"
        extra = f"  {detail}" if detail else ""
        self._print(f"[{n}] {status:<7} {name} ({human_duration(seconds)}){extra}")

    def _print(self, line: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {line}", file=self.out, flush=True)
