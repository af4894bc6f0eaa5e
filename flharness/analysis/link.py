"""The bottleneck link as declared (cell.json's config): its rate at any time of the test,
a rate schedule's steps included, and the TCP payload it can carry.

HTB counts Ethernet frames of 1514 bytes that carry 1448 bytes of TCP payload (1500-byte
MTU, TCP timestamps): a link of rate R delivers at most R × 1448/1514 of payload.
"""
from __future__ import annotations

from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from ..frames import PAYLOAD_SHARE
from ..results.cell_metrics import Capacity
from ..results.cell_record import CellConfig, Direction, StepConfig

#: A rate: one number, or one per time.
Rates = TypeVar("Rates", float, NDArray[np.float64])


def payload_capacity_bps(rate_bps: Rates) -> Rates:
    """The most TCP payload a link of RATE_BPS (Ethernet frames) can carry."""
    return rate_bps * PAYLOAD_SHARE


def _steps(config: CellConfig) -> list[StepConfig]:
    return sorted(config.rate_schedule or [], key=lambda s: s.at_s)


def rate_at(t: NDArray[np.float64], config: CellConfig, direction: Direction) -> NDArray[np.float64]:
    """The link rate of DIRECTION in force at each time T (Flent's axis): the cell's
    rate, then each step of its rate schedule."""
    t = np.asarray(t, dtype=float)
    out = np.full(t.shape, config.bottleneck.of(direction).rate_bps, dtype=float)
    for step in _steps(config):
        out[t >= step.at_s] = step.of(direction).rate_bps
    return out


def highest_rate(t_from: NDArray[np.float64], t_to: NDArray[np.float64], config: CellConfig,
                 direction: Direction) -> NDArray[np.float64]:
    """The highest link rate in force at any time in [T_FROM, T_TO] (element-wise)."""
    t_from, t_to = np.asarray(t_from, dtype=float), np.asarray(t_to, dtype=float)
    out = np.maximum(rate_at(t_from, config, direction), rate_at(t_to, config, direction))
    for step in _steps(config):
        inside = (t_from < step.at_s) & (step.at_s <= t_to)
        out[inside] = np.maximum(out[inside], step.of(direction).rate_bps)
    return out


def capacity(config: CellConfig, direction: Direction, t_from: float, t_to: float) -> Capacity:
    """The payload capacity of DIRECTION over [T_FROM, T_TO] (Flent's axis): its mean
    and its peak (an empty window: the rate in force at T_FROM)."""
    peak = payload_capacity_bps(float(highest_rate(np.array([t_from]), np.array([max(t_from, t_to)]), config, direction)[0])) / 1e6
    if t_to <= t_from:
        return Capacity(mean_mbit=peak, peak_mbit=peak)
    return Capacity(mean_mbit=capacity_bits(config, direction, t_from, t_to) / (t_to - t_from) / 1e6, peak_mbit=peak)


def capacity_bits(config: CellConfig, direction: Direction, t_from: float, t_to: float) -> float:
    """The TCP payload (bits) the link can carry over [T_FROM, T_TO] (Flent's axis): the
    integral of its payload capacity, each step of the schedule at its time."""
    if t_to <= t_from:
        return 0.0
    edges = [t_from, *(s.at_s for s in _steps(config) if t_from < s.at_s < t_to), t_to]
    spans = np.diff(edges)
    rates = rate_at(np.array(edges[:-1]), config, direction)
    return float(payload_capacity_bps(1.0) * np.sum(rates * spans))
