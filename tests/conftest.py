"""Shared by every kind of test (unit/, e2e/, vm/, each with a conftest of its own): the
scenario_file fixture, and CI's rule: in CI (CI=true, as .ci/run sets it) an e2e or VM
test whose prerequisites are missing fails, naming them, instead of being skipped: a suite
must not pass by skipping. Helpers live in tests/lib/ (on the tests' path)."""
from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest


@pytest.fixture
def scenario_file(tmp_path: Path):
    """Write a scenario file from dedented YAML text; returns its path."""
    def write(text: str, name: str = "t.yml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path
    return write


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI, a skipped e2e or VM test is a failure that names what was missing."""
    report = (yield).get_result()
    if os.environ.get("CI") == "true" and report.skipped and (item.get_closest_marker("e2e") or item.get_closest_marker("vm")):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        report.outcome = "failed"  # reported as an error of the test's setup
        report.longrepr = f"CI must not skip an end-to-end test: {reason}"
