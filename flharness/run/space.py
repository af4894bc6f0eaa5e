"""Will the run's files fit? Before anything is built, the free space of the results
folder is checked against what the cells to run will leave, and the largest capture a
cell writes before it is compressed: a run that fills the disk loses its cell under way
and stops (a full disk ends any run with one line naming the file)."""
from __future__ import annotations

import errno
import shutil
from pathlib import Path

from ..cells import Cell
from ..errors import FlError
from ..units import human_size

#: Raw capture bytes per bit the bottleneck carries, each capture (headers only, snap
#: length 128, with the ACKs; 0.0134 measured on the demo's 50 Mbit/s cells).
CAPTURE_BYTES_PER_BIT = 0.016
CAPTURES = 2  # cli and srv
XZ_SHARE = 0.12  # compressed / raw (0.104 measured)
OTHER_BYTES = 1_500_000  # a cell's Flent data, logs, samples, series and figures (1.1 MB measured)
MARGIN = 1.2
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def raw_capture_bytes(cell: Cell) -> float:
    """Both captures of CELL before compression: the busier direction's rate (both with
    flows each way) over the test and Flent's lead-in and lead-out."""
    rate = cell.config.bottleneck.max_rate_bps * (2 if cell.test.up and cell.test.down else 1)
    return CAPTURES * CAPTURE_BYTES_PER_BIT * rate * cell.config.flent_s


def needed_bytes(cells: list[Cell]) -> float:
    """What CELLS leave (compressed captures and the rest), plus the largest raw capture."""
    if not cells:
        return 0.0
    raw = [raw_capture_bytes(c) for c in cells]
    return MARGIN * (sum(XZ_SHARE * r + OTHER_BYTES for r in raw) + max(raw))


def check_space(folder: Path, cells: list[Cell]) -> None:
    """An error before anything is built when FOLDER's file system cannot hold the run."""
    need = needed_bytes(cells)
    existing = folder
    while not existing.exists():
        existing = existing.parent
    free = shutil.disk_usage(existing).free
    if free < need:
        raise FlError(f"{folder}: {human_size(free)} free, the {len(cells)} cell(s) to run need about "
                      f"{human_size(need)} (their captures): free some space, or run into a folder "
                      "on another disk (--results)")


def disk_full(e: OSError, where: Path | None = None) -> FlError | None:
    """A full disk as one line naming the file (or WHERE it was writing, when a write to an
    open file failed), or None for another error."""
    if e.errno not in DISK_FULL:
        return None
    return FlError(f"{e.filename or where or 'the results folder'}: {e.strerror}: the run stopped; free some space "
                   "and run it again (completed cells are kept)")
