"""Fixtures of the VM tests: one parallel VM run shared by every module that reads it."""
from __future__ import annotations

import signal
from pathlib import Path

import pytest
from flrun import REPO, FlProcess, newest_kernel, qemus, run_fl, statuses

#: One `fl run --vm --parallel 2` (two VMs, each booted once) serves every VM test module:
#: the acceptance matrix and a repeated cell (test_e2e_vm), path features and the
#: Pantheon scenario (…_features), tunnels (…_tunnel), and eight deterministic cells that
#: a serial run repeats (…_parallel). The VM tests ask for what they check: TCG and the
#: virtual clock (on a KVM host fl would pick KVM and the real clock).
VM_SCENARIOS = [str(REPO / "tests" / "scenarios" / f"{n}.yml")
                for n in ("vm-aqm", "vm-det", "vm-features", "pantheon-seed", "vm-tunnel", "vm-par")]
VM_CELLS = 12 + 1 + 9 + 3 + 4 + 8
VM_OPTIONS = ["--vm", "--vm-accel", "tcg", "--vm-clock", "virtual"]


#: test_e2e_vm_parallel's run of vm-par in one VM of its own, started in the background
#: once the session's run ended: it takes one core while the modules in between (a kernel
#: image built from .deb files, the l4s image's build) leave one idle; on the virtual
#: clock the load does not change its results.
SERIAL = str(REPO / "tests" / "scenarios" / "vm-par.yml")


@pytest.fixture(scope="session")
def vm_run(tmp_path_factory):
    """The parallel VM run, interrupted (SIGINT) after its first cell completed while both
    VMs run cells, then resumed; then the serial run of vm-par starts ("serial": its
    process, results folder and kernel image), ended at the latest with the session."""
    results = tmp_path_factory.mktemp("vm-results")
    fl = FlProcess("run", *VM_SCENARIOS, *VM_OPTIONS, "--parallel", "2", "--results", str(results))
    fl.wait_for_line(f"/{VM_CELLS}] vm", timeout=900)  # a cell started
    fl.wait_for_line(" ok ", timeout=900)  # the first cell is done
    fl.wait_for_line(" … (run ETA", timeout=300)  # the VM that ran it has its next cell: both run cells
    qemu_argv = [Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode() for pid in qemus(results)]
    fl.send_signal(signal.SIGINT)
    rc = fl.finish(timeout=180)  # fl kills its VMs on SIGTERM: finish() sends it on a timeout
    killed = {"rc": rc, "qemus": qemus(results), "statuses": statuses(results), "out": fl.output,
              "qemu_argv": qemu_argv}
    resumed = run_fl("run", *VM_SCENARIOS, *VM_OPTIONS, "--parallel", "2", "--results", str(results),
                     timeout=4800)
    serial_results, image = tmp_path_factory.mktemp("vm-serial"), newest_kernel()
    serial = FlProcess("run", SERIAL, "--vm", str(image), "--vm-accel", "tcg", "--vm-clock", "virtual",
                       "--results", str(serial_results))
    yield {"killed": killed, "resumed": resumed, "root": results / "default",
           "serial": (serial, serial_results / "default" / "vm-par", image)}
    if serial.proc.poll() is None:  # the session ended before a test waited for it
        serial.proc.terminate()
        serial.proc.wait(timeout=180)
