"""fl-wait-from (flharness/programs), which starts a cell's UDP, video and probe flows
SECONDS after Flent's first ping: it waits what is left of that time, not more."""
from __future__ import annotations

import subprocess
import time

from flharness.programs import HOST_DIR

HELPER = HOST_DIR / "fl-wait-from"


def waited(t0: str, seconds: str) -> float:
    start = time.monotonic()
    subprocess.run([str(HELPER), t0, seconds], check=True, timeout=30)
    return time.monotonic() - start


def test_it_waits_what_is_left_of_the_time():
    """Started 2 s before the target time: it sleeps about 2 s (at least what was left)."""
    assert waited(f"{time.time() - 1:.3f}", "3") >= 1.9


def test_a_time_passed_is_no_wait_and_a_missing_start_counts_from_now():
    assert waited(f"{time.time() - 60:.3f}", "20") < 10  # at once, late as it is (not 20 s from now)
    assert waited("", "1") >= 0.9  # no first ping recorded: from now
