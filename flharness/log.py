"""fl's messages through Python logging: what fl reports (status, warnings) goes to the
terminal as plain lines, as before; with -v/--verbose the debug messages too (each
playbook, probe, plan decision and step, with times); `fl run` and `fl plot` also write
every message, debug included, to debug.log in the run folder. What a command prints as
its answer (fl list, fl check, a dry run, the progress lines, summaries) stays on stdout."""
from __future__ import annotations

import logging
import logging.handlers
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = "flharness"
DEBUG_LOG = "debug.log"
FILE_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


class _Console(logging.Formatter):
    """Info as the message alone; warnings and errors prefixed as fl's always were; debug
    lines with the time and where they come from."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.levelno >= logging.WARNING:
            return f"fl: {record.levelname.lower()}: {text}"
        if record.levelno < logging.INFO:
            return f"{self.formatTime(record, '%H:%M:%S')} {record.name}: {text}"
        return text


def setup(verbose: bool = False) -> None:
    """Console logging for one fl command (info, or debug with VERBOSE)."""
    logger = logging.getLogger(ROOT)
    for h in list(logger.handlers):
        if getattr(h, "fl_console", False):
            logger.removeHandler(h)
    out = logging.StreamHandler(sys.stdout)
    out.setFormatter(_Console())
    out.setLevel(logging.DEBUG if verbose else logging.INFO)
    out.addFilter(lambda r: r.levelno < logging.WARNING)
    err = logging.StreamHandler(sys.stderr)
    err.setFormatter(_Console())
    err.setLevel(logging.WARNING)
    for h in (out, err):
        h.fl_console = True  # type: ignore[attr-defined]
        logger.addHandler(h)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False


class DebugLog:
    """Every message, debug included, for a run folder's debug.log: kept in memory until the
    folder exists (write_to), then appended to the file as it comes."""

    def __init__(self) -> None:
        self.memory = logging.handlers.MemoryHandler(capacity=1_000_000, flushLevel=logging.CRITICAL + 1)
        self.memory.setLevel(logging.DEBUG)
        self.file: logging.FileHandler | None = None

    def write_to(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / DEBUG_LOG
        if self.file is None:
            self.file = logging.FileHandler(path, encoding="utf-8")
            self.file.setFormatter(logging.Formatter(FILE_FORMAT))
            self.memory.setTarget(self.file)
            self.memory.flush()
            self.memory.capacity = 0  # from now on every record goes straight through
        return path


@contextmanager
def debug_log(folder: Path | None = None) -> Iterator[DebugLog]:
    """Collect every message while the block runs, for FOLDER/debug.log (now, or once the
    block calls write_to); nothing is written if it never does."""
    debug = DebugLog()
    logger = logging.getLogger(ROOT)
    logger.addHandler(debug.memory)
    logger.setLevel(logging.DEBUG)
    if folder is not None:
        debug.write_to(folder)
    try:
        yield debug
    finally:
        logger.removeHandler(debug.memory)
        if debug.file is not None:
            debug.memory.flush()
            debug.file.close()
        debug.memory.close()
