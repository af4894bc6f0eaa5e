"""The run's disk space estimate (run/space.py) and the one line a full disk ends a run in."""
from __future__ import annotations

import errno
from pathlib import Path

import pytest

from flharness.cells import expand
from flharness.errors import FlError
from flharness.run.space import check_space, disk_full, needed_bytes, raw_capture_bytes
from flharness.scenario import load_scenario

REPO = Path(__file__).resolve().parents[2]


def demo_cells():
    path = REPO / "scenarios" / "demo.yml"
    return expand(load_scenario(path), path)


def test_the_estimate_covers_what_the_demo_left():
    """The demo's 50 Mbit/s × 20 s cell wrote two raw captures of ~16.8 MB each and left
    ~4.5 MB in its folder (measured): the estimate is above both, within a factor of 2."""
    cell = next(c for c in demo_cells() if c.config.bottleneck.up.rate_bps == 50e6)
    assert 2 * 16.8e6 <= raw_capture_bytes(cell) <= 2 * 2 * 16.8e6
    left = needed_bytes([cell]) - raw_capture_bytes(cell) * 1.2  # what one cell leaves, with the margin
    assert 4.5e6 <= left <= 2 * 4.5e6 * 1.2
    left_by_demo = 6 * 4.5e6 + 6 * 1.6e6 + 2 * 16.8e6  # its cells' folders, and one cell's raw captures
    assert left_by_demo < needed_bytes(demo_cells()) < 2 * left_by_demo and needed_bytes([]) == 0


def test_too_little_space_is_an_error_naming_the_folder(tmp_path, monkeypatch):
    import shutil
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda _: usage._replace(free=10_000_000))
    with pytest.raises(FlError, match=rf"^{tmp_path / 'new'}: 10.0 MB free, the 12 cell\(s\) to run need about"):
        check_space(tmp_path / "new", demo_cells())
    check_space(tmp_path, [])


def test_a_full_disk_is_one_line_naming_the_file_and_other_errors_are_left_alone():
    full = disk_full(OSError(errno.ENOSPC, "No space left on device", "/r/run.json"))
    assert str(full) == ("/r/run.json: No space left on device: the run stopped; free some space and run it again "
                         "(completed cells are kept)")
    assert disk_full(OSError(errno.EACCES, "Permission denied", "/r")) is None
