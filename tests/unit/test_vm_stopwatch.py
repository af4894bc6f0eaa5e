"""A VM's stopwatch counts the CPU time its QEMU got, and at least WALL_SHARE of the wall
time: a stand-in QEMU (a copy of Python named qemu-system-fltest, in a process group of
its own as vng's is) that spins, then one that sleeps."""
from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from flharness.testbed.vm import WALL_SHARE, Vm


def stand_in(tmp_path: Path, code: str) -> subprocess.Popen:
    exe = tmp_path / "qemu-system-fltest"
    shutil.copy(sys.executable, exe)
    return subprocess.Popen([exe, "-c", code], start_new_session=True)


def vm_running(proc: subprocess.Popen) -> Vm:
    vm = Vm.__new__(Vm)
    vm.proc, vm._qemu = proc, None
    return vm


def test_a_spinning_qemus_cpu_time_is_counted(tmp_path):
    """1.5 s of CPU, then asleep: the stopwatch reads its CPU time, however long the
    spinning took on this busy machine."""
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.5: pass\ntime.sleep(60)\n"
    proc = stand_in(tmp_path, spin)
    try:
        vm = vm_running(proc)
        elapsed, wall = vm.stopwatch(), vm.stopwatch(cpu=False)
        while elapsed() < 1.45 and wall() < 30:
            time.sleep(0.1)
        time.sleep(1)
        assert 1.4 < elapsed() < 1.7 and elapsed() > WALL_SHARE * wall(), (elapsed(), wall())
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_a_qemu_that_uses_no_cpu_is_timed_in_a_share_of_wall_time(tmp_path):
    proc = stand_in(tmp_path, "import time\ntime.sleep(30)\n")
    try:
        vm = vm_running(proc)
        time.sleep(0.2)
        elapsed, wall = vm.stopwatch(), vm.stopwatch(cpu=False)
        time.sleep(2)
        assert elapsed() == WALL_SHARE * wall() or abs(elapsed() - WALL_SHARE * wall()) < 0.05, (elapsed(), wall())
        assert 1.9 < wall() < 10, wall()
    finally:
        proc.kill()
        proc.wait(timeout=30)
