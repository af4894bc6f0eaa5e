"""Finishing a cell after its testbed moved on: compress its captures, check it, commit it.

This runs in a worker thread while the testbed already runs the next cell, so a cell
costs the testbed only its configuration, Flent and the collection of its state.
"""
from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..analysis import cache
from ..analysis.metrics import Settings
from ..cells import Cell
from ..phases import Phase
from ..results import CellRecord, ScenarioFolder, cell_folder
from ..results.cell_record import Status
from ..testbed.ansible import PlaybookResult
from ..testbed.plan import XZ_LEVEL
from .cell_logs import write_cell_logs
from .evaluate import Verdict, evaluate
from .planning import ScenarioPlan

LOG = logging.getLogger(__name__)


@dataclass
class Attempt:
    """A cell handed to a testbed: its scenario, where it is written and what will be recorded."""

    plan: ScenarioPlan
    cell: Cell
    partial: Path
    record: CellRecord
    testbed: str  # label of the testbed running it
    elapsed: Callable[[], float] = lambda: 0.0  # seconds it has run (the slot's stopwatch)

    @property
    def store(self) -> ScenarioFolder:
        return self.plan.store


def compress_captures(cell_dir: Path) -> None:
    """xz the raw captures a shared-filesystem testbed left (lowest CPU priority: the
    next cell is running)."""
    for pcap in sorted(cell_dir.glob(cell_folder.RAW_CAPTURE_GLOB)):
        subprocess.run(["nice", "-n", "19", "xz", "-T1", f"-{XZ_LEVEL}", "-f", str(pcap)],
                       check=False, capture_output=True)


def finish(attempt: Attempt, result: PlaybookResult) -> tuple[CellRecord, Verdict]:
    """Compress, check and commit one cell; returns its record and the checks' verdict.
    The testbed's endpoints tell netperf's control connection (by its port) and the
    directions (by the server's address) apart."""
    t0 = time.time()
    write_cell_logs(attempt.cell, attempt.partial, result)
    compress_captures(attempt.partial)
    assert attempt.record.endpoints is not None  # recorded when the cell was handed out
    verdict = evaluate(attempt.cell, attempt.partial, result, attempt.record.endpoints, attempt.record.ports)
    rec = attempt.record
    rec.status, rec.reason, rec.checks = verdict.status, verdict.reason, verdict.checks
    rec.phases = {**result.phases, Phase.CHECK.value: round(time.time() - t0, 3)}  # during the next cell
    committed = attempt.store.commit(attempt.partial, rec)
    if verdict.status == "ok":
        _analyse(committed, verdict)
    LOG.debug("cell %s: %s%s; phases %s", rec.cell, rec.status, f" ({rec.reason})" if rec.reason else "", rec.phases)
    return rec, verdict


def _analyse(cell_dir: Path, verdict: Verdict) -> None:
    """The cell's metrics, stored for fl plot; their utilisation goes to the progress line.
    A failure is reported there, never allowed to stop the run (fl plot retries)."""
    try:
        verdict.utilisation = cache.compute(cell_dir, Settings()).utilisation
    except Exception as e:
        verdict.analysis_error = f"{type(e).__name__}: {e}"


def give_up(attempt: Attempt, status: Status, reason: str, result: PlaybookResult | None = None) -> CellRecord:
    """Record a cell that did not complete (interrupted, or its testbed died)."""
    rec = attempt.record
    rec.status, rec.reason = status, reason
    rec.ended = rec.ended or time.time()
    if result is not None:
        rec.phases = result.phases
        write_cell_logs(attempt.cell, attempt.partial, result)
    compress_captures(attempt.partial)
    attempt.store.commit(attempt.partial, rec)
    return rec
