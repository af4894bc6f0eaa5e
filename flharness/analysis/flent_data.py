"""Flent's data files, read by Flent's own loader (flentlib.py: its ResultSet, which
upgrades older format versions) and handed on in the files' JSON shape, with what fl
reads of them: the flows' series, netperf's means, the time axis and the lead-in."""
from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

from . import flentlib

#: 'TCP upload::1', 'TCP download BE2' (rrul's marked flows), not their socket-stat
#: sub-series ('TCP upload BE::tcp_cwnd').
_FLOW_RE = re.compile(r"^TCP (upload|download)( [^\s:]+)?(::\d+)?$")
_AGGREGATES = (" sum", " avg", " fairness", " totals")


def load(path: Path) -> dict[str, Any]:
    """The file as Flent's loader reads it: metadata, x_values, results, raw_values."""
    data: dict[str, Any] = flentlib.load(path).serialise()
    return data


def is_flow_series(name: str) -> bool:
    """A per-flow TCP throughput series ('TCP upload::1', 'TCP download BE2'), not one of
    Flent's sum/avg/fairness aggregates or socket-stat sub-series."""
    return bool(_FLOW_RE.match(name)) and not name.endswith(_AGGREGATES)


def flow_series(data: dict[str, Any]) -> dict[str, list[float | None]]:
    """Per-flow TCP throughput series (Mbit/s)."""
    return {name: values for name, values in data.get("results", {}).items() if is_flow_series(name)}


def goodput_mbit(data: dict[str, Any], series: str) -> float | None:
    """netperf's own end-of-test throughput of a flow (bytes received / elapsed), Mbit/s."""
    meta = data.get("metadata", {}).get("SERIES_META", {}).get(series, {})
    value = meta.get("MEAN_VALUE")
    return float(value) if isinstance(value, (int, float)) else None


def t0(data: dict[str, Any]) -> float:
    """Epoch seconds of Flent's time axis origin (its ping starts then)."""
    return datetime.fromisoformat(data["metadata"]["T0"].replace("Z", "+00:00")).timestamp()


def delivered_mbit(raw: list[dict[str, Any]], origin: float, start: float, end: float) -> float | None:
    """Mean goodput (Mbit/s) over [START, END) s of the test, from a flow's raw netperf samples
    (RAW, epoch stamps; ORIGIN = t0): each sample covers the `dur` seconds up to its stamp.
    Unlike netperf's end-of-test mean, a flow that delivered nothing in the window (no
    samples: netperf reports only when a send completes) counts 0, and data sent after
    the test (a connection that could not start in time) does not count. None without
    netperf samples."""
    spans = [(s["t"] - origin - s["dur"], s["t"] - origin, s["val"]) for s in raw if "dur" in s and "val" in s]
    if not spans or end <= start:
        return None
    mean: float = sum(v * max(0.0, min(b, end) - max(a, start)) for a, b, v in spans) / (end - start)
    return mean


def first_data_s(raw: list[dict[str, Any]], origin: float) -> float | None:
    """When a flow's first netperf sample interval begins, s on the test's time axis."""
    starts = [s["t"] - origin - s["dur"] for s in raw if "dur" in s and "val" in s]
    return min(starts) if starts else None


def lead_in(data: dict[str, Any]) -> float:
    """Seconds Flent's ping runs alone before the flows start (and after they end)."""
    meta = data["metadata"]
    return (float(meta["TOTAL_LENGTH"]) - float(meta["LENGTH"])) / 2
