"""The statistics of repetitions, in one place: a mean with its Student t 95 % confidence
interval (the tables), and the difference of two runs' repetitions of one metric with
Welch's interval (unequal variances, Welch–Satterthwaite degrees of freedom) and a
verdict (fl compare)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import fmean, stdev, variance
from typing import Literal

from scipy.stats import t as student_t

Verdict = Literal["no change", "higher", "lower", "n = 1: no CI", "no data"]
LEVEL = 0.95


@dataclass(frozen=True)
class Difference:
    a: float | None  # means
    b: float | None
    n_a: int
    n_b: int
    delta: float | None  # b − a
    pct: float | None  # Δ as a share of a, in %
    ci: tuple[float, float] | None  # of b − a; None with one repetition on either side
    verdict: Verdict


def t_half_width(values: list[float], level: float = LEVEL) -> float | None:
    """The half-width of the mean's Student t interval; None with fewer than two values."""
    if len(values) < 2:
        return None
    return float(student_t.ppf(0.5 + level / 2, len(values) - 1) * stdev(values) / math.sqrt(len(values)))


def welch_ci(a: list[float], b: list[float], level: float = LEVEL) -> tuple[float, float] | None:
    """The CI of mean(b) − mean(a); None unless both sides have 2 or more values."""
    if len(a) < 2 or len(b) < 2:
        return None
    d = fmean(b) - fmean(a)
    va, vb = variance(a) / len(a), variance(b) / len(b)
    if va + vb == 0:
        return d, d
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    half = student_t.ppf(0.5 + level / 2, df) * math.sqrt(va + vb)
    return d - half, d + half


def compare(a: list[float], b: list[float], margin: float = 0.0, floor: float = 0.0) -> Difference:
    """A against B: a change is one whose CI excludes 0 and that exceeds the practical
    margin (MARGIN × |mean(a)|, at least FLOOR): two runs of one configuration differ a
    little in every metric, and such differences are "no change"."""
    if not a or not b:
        ma, mb = (fmean(a) if a else None), (fmean(b) if b else None)
        return Difference(ma, mb, len(a), len(b), None, None, None, "no data")
    ma, mb = fmean(a), fmean(b)
    d = mb - ma
    pct = 100 * d / abs(ma) if ma else None
    ci = welch_ci(a, b)
    if ci is None:
        verdict: Verdict = "n = 1: no CI"
    elif ci[0] <= 0 <= ci[1] or abs(d) < max(margin * abs(ma), floor):
        verdict = "no change"
    else:
        verdict = "higher" if d > 0 else "lower"
    return Difference(ma, mb, len(a), len(b), d, pct, ci, verdict)
