"""metrics.json next to each cell: computed once, recomputed when its inputs change
(the cell's files, the analysis settings or the metrics version)."""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .metrics import METRICS_VERSION, Settings, cell_metrics

METRICS_FILE = "metrics.json"
INPUTS = ("cell.json", "cli.pcap.xz", "srv.pcap.xz", "cli.ss.log", "srv.ss.log", "mid.qdisc.log")


def fingerprint(cell_dir: Path, settings: Settings) -> str:
    """Names, sizes and modification times of the inputs, the settings, the version."""
    parts: list[Any] = [METRICS_VERSION, asdict(settings)]
    for p in sorted([*(cell_dir / n for n in INPUTS), *cell_dir.glob("*.flent.gz")]):
        if p.is_file():
            st = p.stat()
            parts.append([p.name, st.st_size, st.st_mtime_ns])
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def cached(cell_dir: Path, settings: Settings) -> dict[str, Any] | None:
    """The stored metrics if still current, else None."""
    try:
        stored = json.loads((cell_dir / METRICS_FILE).read_text())
    except (OSError, ValueError):
        return None
    return stored if stored.get("key") == fingerprint(cell_dir, settings) else None


def compute(cell_dir: Path, settings: Settings) -> dict[str, Any]:
    """Compute and store the metrics of one cell (runs in a worker process)."""
    record = json.loads((cell_dir / "cell.json").read_text())
    key = fingerprint(cell_dir, settings)
    out = {"key": key, **cell_metrics(cell_dir, record, settings)}
    tmp = cell_dir / f".{METRICS_FILE}.tmp"
    tmp.write_text(json.dumps(out, indent=1))
    tmp.replace(cell_dir / METRICS_FILE)
    return out
