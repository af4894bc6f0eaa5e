"""The latency probe (scenario key `probe`) from irtt's JSON (probe.json.gz): each round
trip's timestamps and delays, as irtt recorded them (nanoseconds).

A round trip irtt marks lost (`lost` other than "false") has no delays. The one-way delay
client → server compares the client's send time with the server's receive time, so it
means something only where both ends read one clock (namespaces on one machine, or in one
VM guest); elsewhere the probe's queueing delay comes from the round trip.
"""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..results.cell_metrics import DelayTail, ProbeFlow
from ..results.cell_record import ProbeConfig


@dataclass(frozen=True)
class ProbeSamples:
    """Each completed round trip (one entry each), ms; NaN where irtt had no value."""

    sent: int
    t: NDArray[np.float64]  # when the client sent it (epoch s)
    rtt: NDArray[np.float64]
    owd_up: NDArray[np.float64]
    port: int | None  # the server's port irtt talked to


def load(path: Path) -> ProbeSamples | str:
    """The round trips of an irtt JSON file, or why there are none (text)."""
    try:
        with gzip.open(path, "rt") as f:
            data = json.load(f)
        trips: list[dict[str, Any]] = data["round_trips"]
        remote = str(data.get("config", {}).get("remote_address", ""))
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"no readable {path.name} ({e.__class__.__name__}: {e})"
    done = [t for t in trips if t.get("lost") == "false"]

    def ms(kind: str) -> NDArray[np.float64]:
        return np.array([t.get("delay", {}).get(kind, np.nan) for t in done], dtype=float) / 1e6
    port = remote.rsplit(":", 1)[-1]
    sent_at = np.array([t.get("timestamps", {}).get("client", {}).get("send", {}).get("wall", np.nan) for t in done],
                       dtype=float) / 1e9
    return ProbeSamples(sent=len(trips), t=sent_at, rtt=ms("rtt"), owd_up=ms("send"),
                        port=int(port) if port.isdigit() else None)


def queueing(samples: ProbeSamples, shared_clock: bool) -> tuple[NDArray[np.float64], str]:
    """The delay above the cell's minimum, per completed round trip (NaN where irtt had
    none): one-way where the ends share a clock, else the round trip's."""
    values, source = (samples.owd_up, "one-way") if shared_clock else (samples.rtt, "round trip")
    known = values[~np.isnan(values)]
    return (values - known.min() if len(known) else values), source


def tail(values: NDArray[np.float64]) -> DelayTail | None:
    values = values[~np.isnan(values)]
    if not len(values):
        return None
    p = np.percentile(values, [50, 95, 99, 99.9])
    return DelayTail(median=float(p[0]), p95=float(p[1]), p99=float(p[2]), p999=float(p[3]), max=float(values.max()),
                     n=len(values))


def probe_flow(samples: ProbeSamples | str, config: ProbeConfig, shared_clock: bool) -> ProbeFlow | str:
    """The probe's figures from its samples (load), or why there are none (text)."""
    if isinstance(samples, str):
        return samples
    if not samples.sent:
        return "irtt recorded no round trip"
    induced, source = queueing(samples, shared_clock)
    induced = induced[~np.isnan(induced)]
    return ProbeFlow(codepoint=config.codepoint, interval_ms=config.interval_s * 1e3, sent=samples.sent,
                     lost_pct=100 * (1 - len(samples.rtt) / samples.sent), rtt_ms=tail(samples.rtt),
                     owd_up_ms=tail(samples.owd_up) if shared_clock else None, queueing_ms=tail(induced),
                     queueing_from="one-way" if source == "one-way" else "round trip")
