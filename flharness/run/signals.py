"""SIGTERM and SIGHUP handled as Ctrl-C, so that what fl started (testbeds, VMs) is
removed by the same `finally` blocks whichever way fl is told to stop."""
from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def signals_as_interrupt() -> Iterator[None]:
    """Within: SIGTERM and SIGHUP raise KeyboardInterrupt (in the main thread)."""
    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt
    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
