"""Shared fixtures. End-to-end tests (marked e2e) need root, namespaces and the tools.

In CI (CI=true, as .ci/run sets it) an e2e or VM test whose prerequisites are missing
fails, naming them, instead of being skipped: a suite must not pass by skipping."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
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
    missing += ["root"] if os.geteuid() != 0 else []
    return pytest.mark.skipif(bool(missing), reason=f"missing: {', '.join(missing)} (./install.sh, run as root)")


def needs_vm() -> pytest.MarkDecorator:
    from flharness.errors import FlError
    from flharness.testbed.vm import resolve_kernel, vng
    missing = ["root"] if os.geteuid() != 0 else []
    if shutil.which(vng()) is None:
        missing.append(f"virtme-ng ({vng()})")
    try:
        resolve_kernel("auto")
    except FlError as e:
        missing.append(f"a kernel ({e})")
    return pytest.mark.skipif(bool(missing), reason=f"missing: {'; '.join(missing)} (./install.sh)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI, a skipped e2e or VM test is a failure that names what was missing."""
    report = (yield).get_result()
    if os.environ.get("CI") == "true" and report.skipped and (item.get_closest_marker("e2e") or item.get_closest_marker("vm")):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        report.outcome = "failed"  # reported as an error of the test's setup
        report.longrepr = f"CI must not skip an end-to-end test: {reason}"


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


#: One `fl run --vm --parallel 2` (two VMs, each booted once) serves every VM test module:
#: the acceptance matrix and a repeated cell (test_e2e_vm), path features and the
#: Pantheon scenario (…_features), tunnels (…_tunnel), and eight deterministic cells that
#: a serial run repeats (…_parallel). The VM tests ask for what they check: TCG and the
#: virtual clock (on a KVM host fl would pick KVM and the real clock).
VM_SCENARIOS = [str(REPO / "tests" / "scenarios" / f"{n}.yml")
                for n in ("vm-aqm", "vm-det", "vm-features", "pantheon-short", "vm-tunnel", "vm-par")]
VM_CELLS = 12 + 1 + 5 + 3 + 4 + 8
VM_OPTIONS = ["--vm", "--vm-accel", "tcg", "--vm-clock", "virtual"]


def qemus(results: Path) -> list[str]:
    """PIDs of QEMU processes working for a run (their command line names its folder)."""
    found = []
    for d in Path("/proc").iterdir():
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "qemu-system" in cmd and str(results) in cmd:
            found.append(d.name)
    return found


def statuses(results: Path) -> dict[str, str]:
    out = {}
    for cell_json in results.glob("default/*/*/cell.json"):
        out[f"{cell_json.parent.parent.name}/{cell_json.parent.name}"] = json.loads(cell_json.read_text())["status"]
    return out


@pytest.fixture(scope="session")
def vm_run(tmp_path_factory):
    """The parallel VM run, interrupted (SIGINT) after its first cell completed while both
    VMs run cells, then resumed."""
    from test_e2e_interrupt import interruptible, wait_for_line
    results = tmp_path_factory.mktemp("vm-results")
    argv = [sys.executable, str(FL), "run", *VM_SCENARIOS, *VM_OPTIONS, "--parallel", "2",
            "--results", str(results)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=interruptible)
    wait_for_line(proc, f"/{VM_CELLS}] vm", timeout=900)  # a cell started
    wait_for_line(proc, " ok ", timeout=900)  # the first cell is done: the next ones run
    time.sleep(15)
    proc.send_signal(signal.SIGINT)
    try:
        killed_out = proc.communicate(timeout=180)[0]
    except subprocess.TimeoutExpired:
        proc.terminate()  # fl kills its VMs on SIGTERM: leave nothing behind for the suite
        proc.wait(timeout=60)
        raise
    killed = {"rc": proc.returncode, "qemus": qemus(results), "statuses": statuses(results),
              "out": killed_out}
    resumed = run_fl("run", *VM_SCENARIOS, *VM_OPTIONS, "--parallel", "2", "--results", str(results),
                     timeout=4800)
    return {"killed": killed, "resumed": resumed, "root": results / "default"}
