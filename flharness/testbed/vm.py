"""The VM backend: boot a chosen kernel with virtme-ng and run fl inside it.

The VM is only where the namespaces live: the guest sees the host's filesystem
read-only (so the same checkout, tools and virtualenv), runs the same `fl` with the
same roles and inventory, and writes into the host's results folder (a virtme-ng
--rwdir). One boot per command; qemu is killed by process group on a deadline,
Ctrl-C or any error.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import REPO
from ..errors import FlError
from .ansible import kill_group

BOOT_ALLOWANCE = 180.0  # seconds to boot, probe, build and remove the testbed under TCG
#: Wall seconds per second of test (Flent's length + lead-in/out) and per cell for the rest
#: (Ansible, Flent start-up, compression), which runs on an emulated CPU under TCG.
SLOWDOWN = {"virtual": 4.0, "real": 1.5}
CELL_ALLOWANCE = {"virtual": 120.0, "real": 60.0}
RATE_UNIT = 20e6  # SLOWDOWN holds up to this link rate (measured: 10-20 Mbit/s cells)
MEMORY_RE = re.compile(r"^\d+[MG]$")


@dataclass(frozen=True)
class VmConfig:
    kernel: str  # path of the kernel image
    release: str  # its release (uname -r in the guest)
    accel: str  # 'kvm' or 'tcg'
    clock: str  # 'virtual' (TCG icount: deterministic, high fidelity) or 'real'
    cpus: int
    memory: str

    def describe(self) -> dict[str, object]:
        return {"kind": "vm", **asdict(self)}

    def qemu_opts(self) -> str:
        # A second, cached read-only share of / (see vm_guest.sh).
        share = ("-fsdev local,id=flro,path=/,security_model=none,readonly=on,multidevs=remap "
                 "-device virtio-9p-pci,fsdev=flro,mount_tag=flro")
        if self.accel == "kvm":
            return share
        # qemu64: TCG emulates its SSE2 code paths much faster than `max`'s AVX ones.
        icount = " -icount shift=0,sleep=off" if self.clock == "virtual" else ""
        return f"-accel tcg,tb-size=256{icount} -cpu qemu64 {share}"

    def vng_argv(self, guest_command: list[str], rwdirs: list[Path]) -> list[str]:
        argv = [vng(), "--run", self.kernel, "--cpus", str(self.cpus), "--memory", self.memory,
                "--user", "root", "--cwd", str(REPO)]
        if self.accel == "tcg":
            argv.append("--disable-kvm")
        argv.append(f"--qemu-opts={self.qemu_opts()}")
        argv += [f"--rwdir={d}" for d in rwdirs]
        return argv + ["--exec", shlex.join(guest_command)]


def vng() -> str:
    local = Path(sys.executable).parent / "vng"
    return str(local) if local.exists() else "vng"


def resolve_kernel(spec: str) -> tuple[str, str]:
    """'auto' → the newest distribution kernel in /boot with its modules; else a path."""
    if spec == "auto":
        found = sorted(((_release_of(p), p) for p in Path("/boot").glob("vmlinuz-*")
                        if Path("/lib/modules", _release_of(p)).is_dir()), key=lambda rp: _version_key(rp[0]))
        if not found:
            raise FlError("--vm auto: no kernel in /boot with modules in /lib/modules "
                          "(./install.sh installs Debian's linux-image-amd64)")
        release, path = found[-1]
        return str(path), release
    path = Path(spec)
    if not path.is_file():
        raise FlError(f"--vm {spec}: no such kernel image")
    release = _release_of(path)
    if not Path("/lib/modules", release).is_dir():
        raise FlError(f"--vm {spec}: no modules in /lib/modules/{release} for this kernel")
    return str(path.resolve()), release


def _release_of(path: Path) -> str:
    return path.name.removeprefix("vmlinuz-")


def _version_key(release: str) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", release)]


def kvm_usable() -> bool:
    """KVM needs /dev/kvm and hardware virtualisation (vmx/svm) exposed to this machine;
    a software nested hypervisor (e.g. kvm_pvm) cannot run a stock kernel."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK) or Path("/sys/module/kvm_pvm").exists():
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return bool(re.search(r"^flags\s*:.*\b(vmx|svm)\b", flags, re.M))


def vm_config(kernel: str = "auto", accel: str = "auto", clock: str = "auto",
              cpus: int | None = None, memory: str = "1G") -> VmConfig:
    path, release = resolve_kernel(kernel)
    if accel not in ("auto", "kvm", "tcg"):
        raise FlError(f"--vm-accel {accel!r}: one of auto, kvm, tcg")
    if accel == "auto":
        accel = "kvm" if kvm_usable() else "tcg"
    if clock not in ("auto", "virtual", "real"):
        raise FlError(f"--vm-clock {clock!r}: one of auto, virtual, real")
    if clock == "auto":
        clock = "real" if accel == "kvm" else "virtual"
    if clock == "virtual" and accel != "tcg":
        raise FlError("--vm-clock virtual needs --vm-accel tcg (QEMU icount)")
    if not MEMORY_RE.match(memory):
        raise FlError(f"--vm-memory {memory!r}: a size like 1G or 768M")
    cpus = cpus or 1
    if clock == "virtual" and cpus != 1:
        raise FlError("--vm-clock virtual runs one vCPU (--vm-cpus 1)")
    return VmConfig(path, release, accel, clock, cpus, memory)


def deadline(cfg: VmConfig, cells: list[tuple[float, float]]) -> float:
    """Wall-clock limit for a VM running cells given as (test seconds, fastest link in
    bit/s). Under TCG the guest's work grows with the packet rate (forwarding, capture,
    compression), so links faster than RATE_UNIT stretch the allowance in proportion."""
    return BOOT_ALLOWANCE + sum(t * SLOWDOWN[cfg.clock] * max(1.0, bps / RATE_UNIT) + CELL_ALLOWANCE[cfg.clock]
                                for t, bps in cells)


#: virtme-ng's exit status when the guest stopped without its command finishing
#: (kernel panic, QEMU crash).
GUEST_DIED = 255


def run_fl_in_vm(cfg: VmConfig, fl_args: list[str], rwdirs: list[Path], timeout: float,
                 kernel_log: Path | None = None) -> int:
    """Boot the VM, run `fl FL_ARGS` in it (told it is a guest), return its exit status.
    The guest's kernel messages are appended to KERNEL_LOG (in a --rwdir) if given."""
    venv = Path(sys.prefix)
    klog = [f"FL_VM_KLOG={kernel_log}"] if kernel_log else []
    guest = ["env", f"FL_VENV={venv}", *klog, "/bin/sh", str(Path(__file__).with_name("vm_guest.sh")),
             sys.executable, str(REPO / "fl"), *fl_args, "--in-vm", json.dumps(cfg.describe())]
    argv = cfg.vng_argv(guest, rwdirs)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    print(f"booting {cfg.release} ({cfg.accel}, {cfg.clock} clock, {cfg.cpus} vCPU, {cfg.memory}); "
          f"deadline {timeout / 60:.0f} min", flush=True)
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt
    old = {s: signal.signal(s, interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    proc = subprocess.Popen(argv, env=env, start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        rc = proc.wait(timeout=timeout)
        if rc == GUEST_DIED:
            print("fl: the VM stopped unexpectedly (guest kernel panic or QEMU crash)"
                  + (f"; its last kernel messages:\n{_tail(kernel_log)}" if kernel_log else ""),
                  file=sys.stderr, flush=True)
        return rc
    except subprocess.TimeoutExpired:
        print(f"fl: the VM passed its deadline ({timeout:.0f} s): killed", file=sys.stderr)
        return 124
    finally:
        if proc.poll() is None:
            kill_group(proc, grace=3.0)
        _kill_strays(proc.pid)
        for s, h in old.items():
            signal.signal(s, h)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no kernel log)"


def _kill_strays(group: int) -> None:
    """Any qemu left in the VM's process group (vng may fork) is killed by PID."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if os.getpgid(int(d.name)) == group:
                os.kill(int(d.name), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
