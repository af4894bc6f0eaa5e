"""Flags: what a reader must know about a cell's numbers, as data. Consumers (compare,
expectations, the index, the dataset, tests) select flags by kind and code; the text is
for people and may be reworded freely."""
from __future__ import annotations

from typing import Literal

from .files import Contract

FlagKind = Literal["measurement_error", "calibration", "finding", "incomplete"]
#: The kinds that doubt the measurement itself: a repetition so flagged is left out of
#: comparisons and expectations (the path did not behave as declared, or a figure is impossible).
MISMEASURED: frozenset[FlagKind] = frozenset({"measurement_error", "calibration"})
FlagCode = Literal[
    # measurement_error: a figure beyond the physics
    "goodput_over_capacity", "steady_over_capacity",
    # calibration: the path did not behave as declared (run/calibration.py, analysis/metrics.py)
    "base_rtt", "capture_drops", "cpu_busy", "cpu_stolen", "offloads", "unrecorded", "netem_limit",
    "effect_missing", "link_unfilled", "shaper_short", "unclassified", "scheme_cpu_bound",
    # finding: a result worth attention
    "starved", "late_start",
    # incomplete: a figure that could not be computed
    "udp_unreported", "video_unreported", "probe_unreported", "steady_window_empty",
]
#: How each kind is introduced where flags are shown as text.
LABELS: dict[FlagKind, str] = {"measurement_error": "measurement error", "calibration": "calibration",
                               "finding": "", "incomplete": "incomplete"}


class Flag(Contract):
    """One caution about a cell: KIND says what it doubts, CODE which check raised it."""

    kind: FlagKind
    """measurement_error and calibration doubt the measurement itself (the repetition is
    left out of comparisons and expectations); finding: a result; incomplete: a figure
    that could not be computed."""
    code: FlagCode
    """Which check raised it: stable, what consumers select by (never the text)."""
    text: str
    """For people: what was seen, with its numbers."""
    metrics: list[str] = []
    """The metrics (report/measures.py names) a measurement error doubts; empty: the
    cell's measurement as a whole (every calibration flag)."""

    def doubts(self, metric: str) -> bool:
        """Does this flag doubt METRIC's value in its cell?"""
        return self.kind in MISMEASURED and (not self.metrics or metric in self.metrics)

    def __str__(self) -> str:
        label = LABELS[self.kind]
        return f"{label}: {self.text}" if label else self.text


def calibration_flag(code: FlagCode, text: str) -> Flag:
    return Flag(kind="calibration", code=code, text=text)


def mismeasured(flags: list[Flag], metric: str | None = None) -> list[Flag]:
    """The FLAGS that doubt the measurement itself: any of it, or METRIC's value."""
    return [f for f in flags if f.kind in MISMEASURED and (metric is None or f.doubts(metric))]
