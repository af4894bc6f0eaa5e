"""metrics.json (and series.npz) next to each cell: computed once, recomputed when its inputs change
(the cell's files, the analysis settings or the metrics version)."""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import logging
import lzma
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from ..results import cell_folder, files
from ..results.cell_metrics import METRICS_VERSION, CellMetrics
from ..results.cell_record import CellRecord
from .metrics import Settings, analyse_folder

LOG = logging.getLogger(__name__)
INPUTS = (cell_folder.CELL, *cell_folder.CAPTURES, *cell_folder.SS_LOGS, cell_folder.QUEUE_LOG, cell_folder.UDP_LOG,
          cell_folder.PROBE, cell_folder.TEARDOWN_LOG)
#: compressed inputs, read whole to find damage
OPENERS: dict[str, Callable[[Path, str], IO[Any] | io.BufferedIOBase]] = {cell_folder.COMPRESSED: lzma.open, ".gz": gzip.open}


def fingerprint(cell_dir: Path, settings: Settings) -> str:
    """Names, sizes and modification times of the inputs, the settings, the version."""
    parts: list[Any] = [METRICS_VERSION, asdict(settings)]
    for p in sorted([*(cell_dir / n for n in INPUTS), *cell_dir.glob(cell_folder.FLENT_DATA_GLOB)]):
        if p.is_file():
            st = p.stat()
            parts.append([p.name, st.st_size, st.st_mtime_ns])
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def cached(cell_dir: Path, settings: Settings) -> CellMetrics | None:
    """The stored metrics if still current, else None (missing, of another version,
    unreadable, computed from other inputs, or without their series.npz)."""
    if not (cell_dir / cell_folder.SERIES).is_file():
        return None
    try:
        stored = files.read(CellMetrics, cell_dir / cell_folder.METRICS)
    except (OSError, files.InvalidFile, files.VersionError):
        return None
    return stored if stored.key == fingerprint(cell_dir, settings) else None


def compute_contained(cell_dir: Path, settings: Settings) -> CellMetrics | str:
    """compute(), or why the cell cannot be analysed: a damaged file named with what is
    wrong with it (a worker's error comes back as the cell's, never as the pool's)."""
    try:
        return compute(cell_dir, settings)
    except Exception as e:
        LOG.debug("metrics of %s failed", cell_dir, exc_info=True)
        return damaged_file(cell_dir) or f"{type(e).__name__}: {e}"


def damaged_file(cell_dir: Path) -> str | None:
    """The first of the cell's input files that cannot be read whole: 'NAME: why'."""
    for path in sorted([*(cell_dir / n for n in INPUTS), *cell_dir.glob(cell_folder.FLENT_DATA_GLOB)]):
        if not path.is_file():
            continue
        try:
            with OPENERS.get(path.suffix, open)(path, "rb") as f:
                if path.name.endswith((".json", cell_folder.FLENT_DATA)):
                    json.loads(f.read())
                else:
                    while f.read(1 << 20):  # to the end, a MiB at a time
                        pass
        except Exception as e:
            return f"{path.name}: {e}" if str(e) else f"{path.name}: {type(e).__name__}"
    return None


def compute(cell_dir: Path, settings: Settings) -> CellMetrics:
    """Compute and store the metrics of one cell and its series (runs in a worker process)."""
    started = time.process_time()
    key = fingerprint(cell_dir, settings)
    analysis = analyse_folder(cell_dir, files.read(CellRecord, cell_dir / cell_folder.CELL), settings)
    out = analysis.metrics
    out.key = key
    analysis.series.write(cell_dir / cell_folder.SERIES)
    files.write(cell_dir / cell_folder.METRICS, out)
    LOG.debug("metrics of %s: %.2f s of CPU", cell_dir, time.process_time() - started)
    return out
