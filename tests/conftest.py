"""Shared fixtures. End-to-end tests (marked e2e) need root, namespaces and the tools."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FL = REPO / "fl"


@pytest.fixture
def scenario_file(tmp_path: Path):
    """Write a scenario file from dedented YAML text; returns its path."""
    def write(text: str, name: str = "t.yml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path
    return write


def run_fl(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(FL), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


def netns_list() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return sorted(line.split()[0] for line in out.splitlines() if line.strip())


def needs_root_tools() -> pytest.MarkDecorator:
    missing = [t for t in ("flent", "netperf", "tcpdump", "tc") if shutil.which(t) is None]
    return pytest.mark.skipif(os.geteuid() != 0 or bool(missing),
                              reason=f"needs root and {', '.join(missing) or 'tools'}")


def needs_vm() -> pytest.MarkDecorator:
    from flharness.errors import FlError
    from flharness.testbed.vm import resolve_kernel, vng
    try:
        resolve_kernel("auto")
        ok = shutil.which(vng()) is not None and os.geteuid() == 0
    except FlError:
        ok = False
    return pytest.mark.skipif(not ok, reason="needs root, virtme-ng and a kernel in /boot (./install.sh)")


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """The shipped demo scenario run once for the session: (fl's output, results root).
    Run folder results/e2e/; test_e2e_demo checks the run, test_e2e_report its analysis."""
    results = tmp_path_factory.mktemp("results")
    before = netns_list()
    p = run_fl("run", "demo", "--run", "e2e", "--results", str(results))
    assert p.returncode == 0, p.stdout + p.stderr
    assert netns_list() == before, "the run left namespaces behind"
    return p.stdout, results
