"""CI cannot pass by skipping: with CI=true, an end-to-end or VM test whose prerequisites
are missing fails and names them (tests/conftest.py). Checked by running pytest itself,
as .ci/run does, on a machine made to lack them: no tools on PATH, and a Python
environment without virtme-ng (the project's venv seen through links, minus `vng`)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from flrun import REPO


def pytest_in(env_python: str, tmp_path: Path, *args: str, ci: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": str(tmp_path / "empty"), "CI": "true" if ci else "false"}
    return subprocess.run([env_python, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs",
                           "--basetemp", str(tmp_path / "bt"), *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def test_a_missing_tool_fails_in_ci_and_is_skipped_elsewhere(tmp_path):
    test = "tests/e2e/test_e2e_interrupt.py::test_fl_clean_removes_what_a_killed_run_left"
    p = pytest_in(sys.executable, tmp_path, test)
    assert p.returncode == 1 and "1 error" in p.stdout, p.stdout
    assert "CI must not skip an end-to-end test: missing: flent, netperf, tcpdump, tc" in p.stdout, p.stdout
    p = pytest_in(sys.executable, tmp_path, test, ci=False)
    assert p.returncode == 0 and "1 skipped" in p.stdout, p.stdout


def test_a_machine_without_virtme_ng_fails_the_vm_suite_in_ci(tmp_path):
    venv = Path(sys.executable).parent.parent
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "pyvenv.cfg").write_text((venv / "pyvenv.cfg").read_text())
    (tmp_path / "venv" / "lib").symlink_to(venv / "lib")
    python = tmp_path / "venv" / "bin" / "python"
    python.symlink_to(Path(sys.executable).resolve())
    p = pytest_in(str(python), tmp_path, "-m", "vm", "tests/vm/test_e2e_vm_parallel.py")
    assert p.returncode == 1 and "CI must not skip an end-to-end test: missing:" in p.stdout, p.stdout
    assert "virtme-ng (vng)" in p.stdout, p.stdout
