"""flharness/programs/fl-flent: Flent's own program, started without matplotlib (and
without setuptools' distutils shim): it answers as the installed Flent does, and as a
Flent on a machine without matplotlib."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from flharness.programs import HOST_DIR

LAUNCHER = HOST_DIR / "fl-flent"
#: Skipped without Flent only outside CI (CI=true: it fails there, as test_shellcheck does).
pytestmark = pytest.mark.skipif(shutil.which("flent") is None and not os.environ.get("CI"),
                                reason="needs Flent (./install.sh)")


def version(*argv: str) -> str:
    p = subprocess.run([*argv, "--version"], capture_output=True, text=True, timeout=120, cwd="/")
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout + p.stderr


def test_the_launcher_runs_the_installed_flent_without_matplotlib():
    own, lean = version("flent"), version(str(LAUNCHER))
    number = re.compile(r"Flent v([\d.]+)")
    assert number.search(own) and number.search(own).group(1) == number.search(lean).group(1), (own, lean)
    assert "Using matplotlib" in own and "No matplotlib found" in lean, lean
    listed = subprocess.run([str(LAUNCHER), "--list-tests"], capture_output=True, text=True, timeout=120, cwd="/")
    assert listed.returncode == 0 and "tcp_1up" in listed.stdout + listed.stderr, listed.stdout + listed.stderr
