"""Intra-flow latency after a rate step (the L4S Tests' finding 7): a flow's TCP RTT, as
its sending socket reports it (Flent's samples, or the host's ss samples), after each
step of the cell's rate schedule, against its level just before the step. A spike lasts
from the step to the last sample more than SPIKE_MS above that level, within the step's
span (to the next step, or the flow's last sample); the cell's figure is the step with
the longest, then highest, spike."""
from __future__ import annotations

from statistics import median

from ..results.cell_metrics import RttSpike
from ..results.cell_record import CellConfig

SPIKE_MS = 50.0  # above the level before the step: a queue no AQM target (5-20 ms) leaves standing
BEFORE_S = 5.0  # the level before a step: the median of this span's samples


def rtt_spike(rtts: list[tuple[float, float]], config: CellConfig) -> RttSpike | None:
    """RTTS: (t on Flent's axis, TCP RTT ms) of one flow; None without a step that has
    samples on both sides."""
    steps = [s.at_s for s in config.steps]
    spikes = [spike for i, at in enumerate(steps)
              if (spike := _after(rtts, at, steps[i + 1] if i + 1 < len(steps) else float("inf"))) is not None]
    return max(spikes, key=lambda s: (s.lasted_s, s.above_ms), default=None)


def _after(rtts: list[tuple[float, float]], at: float, until: float) -> RttSpike | None:
    before = [v for t, v in rtts if at - BEFORE_S <= t < at]
    after = [(t, v) for t, v in rtts if at <= t < until]
    if not before or not after:
        return None
    level = median(before)
    peak = max(v for _, v in after)
    high = [t for t, v in after if v > level + SPIKE_MS]
    return RttSpike(step_s=at, before_ms=level, peak_ms=peak, above_ms=peak - level,
                    lasted_s=high[-1] - at if high else 0.0, unsettled=bool(high) and high[-1] == after[-1][0])
