"""Minimal reading of Flent's data files (gzip JSON, format version 4)."""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

_FLOW_RE = re.compile(r"^TCP (upload|download)( \S+)?(::\d+)?$")
_AGGREGATES = (" sum", " avg", " fairness", " totals")


def load(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


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
