"""A built image's kernel booted for a test to drive by hand: fl's own VM code (the same
boot, guest script and sshd as `fl run --vm IMAGE`), then shell commands over ssh."""
from __future__ import annotations

import re
import secrets
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from flharness.testbed.vm import GUEST_RESULTS, Vm, vm_config

#: The kernel messages of a module gone wrong (a WARN_ON, an oops, a leaked reference).
KERNEL_TROUBLE = re.compile(r"WARNING:|BUG:|Call Trace|refcount_t|Oops|general protection|list_(add|del) corruption")
#: Under /run: the guest mounts the host's folders at their own paths, and an image's
#: root has /run (a tmpfs) but not the host's other trees.
STATE = Path("/run/fl-tests")


class Guest:
    def __init__(self, vm: Vm) -> None:
        self.vm = vm

    def sh(self, script: str, timeout: float = 600) -> subprocess.CompletedProcess:
        """SCRIPT run by the guest's shell as root; its output and exit status."""
        s = self.vm.ssh_settings()
        argv = ["ssh", "-p", str(s["ansible_port"]), "-i", s["ansible_ssh_private_key_file"],
                *s["ansible_ssh_common_args"].split(), "-o", "BatchMode=yes", "root@127.0.0.1", script]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)

    def run_script(self, script: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        """SCRIPT (a file on the host) run by the guest's shell with ARGS, from the results
        folder the guest shares (GUEST_RESULTS), where it may leave files for the test."""
        assert self.vm.results is not None
        shutil.copy(script, self.vm.results / script.name)
        return self.sh(shlex.join(["sh", str(GUEST_RESULTS / script.name), *args]), timeout=timeout)

    @property
    def results(self) -> Path:
        """The host's side of the guest's GUEST_RESULTS."""
        assert self.vm.results is not None
        return self.vm.results

    def kernel_log(self) -> str:
        """The guest kernel's messages so far (vm_guest.sh writes them to the shared folder)."""
        if not self.vm.kernel_log.is_file():
            found = sorted(str(p) for p in self.vm.kernel_log.parent.parent.rglob("*"))
            dmesg = self.sh("ls -la /run/fl-results; mount | grep fl-; dmesg | tail -5", timeout=120)
            raise AssertionError(f"no {self.vm.kernel_log}: {found}; console: "
                                 f"{self.vm.console.read_text(errors='replace')[-2000:]}; guest: {dmesg.stdout} {dmesg.stderr}")
        return self.vm.kernel_log.read_text(errors="replace")


@contextmanager
def booted(image: str, append: str | None = None) -> Iterator[Guest]:
    """IMAGE's kernel and root under TCG on the virtual clock, stopped afterwards: CI runs
    the VM suite on the CPU its default suite leaves, and a guest on the real clock starved
    for a while logs RCU stalls (with call traces) that tests reading its kernel log would
    take for a module's trouble; on the virtual clock its time stops with it. APPEND: kernel
    command line words (--vm-append's)."""
    folder = STATE / secrets.token_hex(4)
    results = folder / "results"
    results.mkdir(parents=True)
    vm = Vm(vm_config(image, "tcg", "virtual", append=append), folder / "vm", results, results / "kernel.log")
    try:
        vm.boot()
        vm.wait_ready()
        yield Guest(vm)
    finally:
        vm.stop()
        shutil.rmtree(folder, ignore_errors=True)
