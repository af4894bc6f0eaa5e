"""The VM backend: boot a chosen kernel with virtme-ng, then drive its guest from the host.

The guest is a managed node of the host's Ansible: it starts an sshd on QEMU's user-mode
network (restrict=on, so nothing leaves this machine; the ssh port is forwarded on
127.0.0.1 only) and the namespace testbed inside it is reached with the fl_netns_ssh
connection. Nothing of fl runs in the guest. Its root is the host's filesystem or a
built image's (`fl image build`), read-only; it writes cells straight into the host's
results folder, shared at GUEST_RESULTS. One boot serves a whole run; QEMU is killed by
process group.
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import FlError
from ..programs import VM_GUEST
from .ansible import kill_group

LOG = logging.getLogger(__name__)
BOOT_ALLOWANCE = 300.0  # seconds from starting QEMU to the guest's sshd, under TCG
#: Under TCG a guest advances only while QEMU runs: a VM's boot, and its cells on the
#: virtual clock, are timed in the CPU seconds its QEMU used (a machine busy with other
#: work slows them without hanging them), but at least this share of wall time (a guest
#: stopped dead uses none, and is still taken for hung).
WALL_SHARE = 0.25
#: Wall seconds per second of a cell's Flent run (length + lead-in/out) and per cell for
#: the rest, allowed before a cell is taken for hung (the VM is then restarted). Measured
#: on the virtual clock, two VMs sharing two cores: 8-11 s per second of two 50 Mbit/s
#: flows (4.1-4.5 × the rate unit's), so 8 × allows about twice that.
SLOWDOWN = {"virtual": 8.0, "real": 1.5}
CELL_ALLOWANCE = {"virtual": 120.0, "real": 60.0}
RATE_UNIT = 20e6  # SLOWDOWN holds up to this link rate (measured: 10-20 Mbit/s cells)
#: Wall seconds allowed per sample of Flent's (its socket statistics start programs every
#: step): measured 0.12 s per sample for one VM alone (a 50 Mbit/s cell sampled every 0.05 s
#: took 197 s against 144 s every 0.2 s), allowed 4× for two VMs sharing the cores.
SAMPLE_COST = {"virtual": 0.5, "real": 0.2}
STEP_UNIT = 0.2  # SLOWDOWN's cells sampled this often
MEMORY_RE = re.compile(r"^\d+[MG]\Z")
#: Kernel command line words --vm-append takes: a module's parameters (tcp_prague.rtt_indep=1)
#: and the like, never anything a shell or QEMU would read as syntax.
APPEND_RE = re.compile(r"^[A-Za-z0-9_.,:=-]{1,200}\Z")
GUEST_SCRIPT = VM_GUEST
#: Every folder shared with the guest over 9p, as fl's guest script expects on every
#: machine. Without it virtme-ng first tries virtio-fs for each folder and waits up to
#: 3.1 s for each virtiofsd that does not start (QEMU's own, Debian 12's, refuses its
#: options): 10-13 s of every boot spent idle, and a guest that would differ between
#: machines with and without a working virtiofsd.
VNG_9P = ["--force-9p"]
READY = "fl-guest: ready"
#: Where the guest sees the run's results folder: on its own /run (a tmpfs), so an image's
#: read-only root need not hold the host's path.
GUEST_RESULTS = Path("/run/fl-results")
#: What a built kernel tree holds: its kernel image, configuration and release.
TREE_KERNEL = Path("arch/x86/boot/bzImage")
TREE_FILES = (Path(".config"), TREE_KERNEL, Path("include/config/kernel.release"), Path("System.map"))


@dataclass(frozen=True)
class VmConfig:
    kernel: str  # path of the kernel image
    release: str  # its release (uname -r in the guest)
    accel: str  # 'kvm' or 'tcg'
    clock: str  # 'virtual' (TCG icount: deterministic, high fidelity) or 'real'
    cpus: int
    memory: str
    root: str | None = None  # the guest's root: a built image's, or None for the host's /
    image: str | None = None  # that image's name
    append: str | None = None  # kernel command line words added (--vm-append), e.g. module parameters

    @property
    def virtual_clock(self) -> bool:
        """Guest time counted in emulated instructions (TCG icount): it leaps while the guest idles."""
        return self.clock == "virtual"

    def describe(self) -> dict[str, object]:
        return {"kind": "vm", **asdict(self)}

    def qemu_opts(self, ssh_port: int) -> str:
        # A second, cached read-only share of the guest's root (see vm_guest.sh), and the
        # user-mode NIC that only carries the host's ssh into the guest.
        opts = (f"-fsdev local,id=flro,path={self.root or '/'},security_model=none,readonly=on,multidevs=remap "
                "-device virtio-9p-pci,fsdev=flro,mount_tag=flro "
                f"-netdev user,id=flssh,restrict=on,hostfwd=tcp:127.0.0.1:{ssh_port}-:22 "
                "-device virtio-net-pci,netdev=flssh")
        if self.accel == "kvm":
            return opts
        # qemu64: TCG emulates its SSE2 code paths much faster than `max`'s AVX ones.
        icount = " -icount shift=0,sleep=off" if self.virtual_clock else ""
        return f"-accel tcg,tb-size=256{icount} -cpu qemu64 {opts}"

    def cell_limit(self, flent_seconds: float, rate_bps: float, step_s: float = STEP_UNIT) -> float:
        """Wall seconds a cell may take before the VM is taken for hung. Under TCG the
        guest's work grows with the packet rate, so links faster than RATE_UNIT stretch it,
        and with Flent's samples, so steps shorter than STEP_UNIT do."""
        samples = max(0.0, flent_seconds / step_s - flent_seconds / STEP_UNIT)
        return (flent_seconds * SLOWDOWN[self.clock] * max(1.0, rate_bps / RATE_UNIT)
                + samples * SAMPLE_COST[self.clock] + CELL_ALLOWANCE[self.clock])


def vng() -> str:
    local = Path(sys.executable).parent / "vng"
    return str(local) if local.exists() else "vng"


def resolve_target(spec: str) -> tuple[str, str, str | None, str | None]:
    """What --vm SPEC boots: (kernel image or tree, release, root, image name). SPEC is a
    built image's name (its kernel and root), 'auto', a kernel image's path or a built
    kernel tree's (the host's root)."""
    from ..image.recipe import changed_since_built, find_recipe
    from ..image.store import load_image
    if spec != "auto" and "/" not in spec and not Path(spec).exists():
        if (image := load_image(spec)) is not None:
            if changed_since_built(image.name, image.manifest.recipe_sha256):
                LOG.warning("image %s is older than its recipe images/%s.yml or a module source it names: "
                            "./fl image build %s (the run records the image as built)", image.name, image.name, image.name)
            return str(image.kernel), image.manifest.kernel.release, str(image.root), image.name
        if find_recipe(spec) is not None:
            raise FlError(f"--vm {spec}: image {spec} is not built yet: ./fl image build {spec}")
        raise FlError(f"--vm {spec}: no built image, image recipe (images/{spec}.yml) or kernel file of that name")
    return (*resolve_kernel(spec), None, None)


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
    if path.is_dir():
        return resolve_tree(path)
    if not path.is_file():
        raise FlError(f"--vm {spec}: no such kernel image")
    release = _release_of(path)
    if not Path("/lib/modules", release).is_dir():
        raise FlError(f"--vm {spec}: no modules in /lib/modules/{release} for this kernel")
    return str(path.resolve()), release


def resolve_tree(tree: Path) -> tuple[str, str]:
    """A kernel tree after `make`: virtme-ng boots its bzImage and links the modules its
    modules.order lists into the guest's /lib/modules (in the tree's .virtme_mods)."""
    if missing := [str(p) for p in TREE_FILES if not (tree / p).is_file()]:
        raise FlError(f"--vm {tree}: not a built kernel tree (no {', '.join(missing)}): run make in it")
    modular = re.search(r"^CONFIG_MODULES=y$", (tree / ".config").read_text(errors="replace"), re.M)
    if modular and not (tree / "modules.order").is_file():
        raise FlError(f"--vm {tree}: the kernel takes modules but none are built (no modules.order): run make in it")
    if not os.access(tree, os.W_OK):
        raise FlError(f"--vm {tree}: not writable (virtme-ng links the modules in {tree / '.virtme_mods'})")
    return str(tree.resolve()), (tree / TREE_FILES[2]).read_text().strip()


def _release_of(path: Path) -> str:
    return path.name.removeprefix("vmlinuz-")


def _version_key(release: str) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", release)]


def kvm_usable() -> bool:
    return kvm_unusable() is None


def kvm_unusable() -> str | None:
    """Why this machine's KVM cannot run a stock kernel, or None: KVM needs /dev/kvm and
    hardware virtualisation (vmx/svm) exposed to this machine; a software nested hypervisor
    (kvm_pvm) cannot run a stock kernel."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "no /dev/kvm this user can open"
    if Path("/sys/module/kvm_pvm").exists():
        return "its KVM is kvm_pvm, a software nested hypervisor that runs no stock kernel"
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError as e:
        return f"/proc/cpuinfo unreadable ({e.strerror})"
    if not re.search(r"^flags\s*:.*\b(vmx|svm)\b", flags, re.M):
        return "the CPU exposes no hardware virtualisation (vmx/svm) to this machine"
    return None


def vm_config(kernel: str = "auto", accel: str = "auto", clock: str = "auto",
              cpus: int | None = None, memory: str = "1G", append: str | None = None) -> VmConfig:
    path, release, root, image = resolve_target(kernel)
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
    words = (append or "").split()
    if bad := next((w for w in words if not APPEND_RE.match(w)), None):
        raise FlError(f"--vm-append {bad!r}: kernel command line words of letters, digits and _ . , : = - "
                      "(e.g. tcp_prague.rtt_indep=1)")
    return VmConfig(path, release, accel, clock, cpus, memory, root, image, " ".join(words) or None)


class Vm:
    """One running guest: booted by `boot`, ready for ssh after `wait_ready`, killed by `stop`.

    FOLDER (on the host, private) holds the ssh client key and known_hosts, and ``share/``
    (read-only in the guest): sshd's configuration, its host key, the client's public key
    and the guest script. RESULTS (read-write) is the run's folder, GUEST_RESULTS inside."""

    def __init__(self, cfg: VmConfig, folder: Path, results: Path | None, kernel_log: Path) -> None:
        self.cfg, self.folder, self.results, self.kernel_log = cfg, folder, results, kernel_log
        self.share = folder / "share"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.console = folder / "console.log"
        self.booted = 0.0
        self._log_from = 0  # the kernel log's size at boot: what the guest writes comes after
        self._qemu: int | None = None  # QEMU's PID, once seen

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def boot(self) -> None:
        self.port = free_port()
        self._write_keys()
        (self.share / "sshd_config").write_text(_sshd_config(self.share))
        shutil.copy(GUEST_SCRIPT, self.share / GUEST_SCRIPT.name)
        self.kernel_log.parent.mkdir(parents=True, exist_ok=True)
        self._log_from = self.kernel_log.stat().st_size if self.kernel_log.is_file() else 0
        guest = ["/bin/sh", str(self.share / GUEST_SCRIPT.name), str(self.share), str(self.guest_path(self.kernel_log))]
        argv = [vng(), "--run", self.cfg.kernel, *(["--root", self.cfg.root] if self.cfg.root else []), *VNG_9P,
                "--cpus", str(self.cfg.cpus), "--memory", self.cfg.memory,
                "--user", "root", "--cwd", self.cfg.root or "/", *(["--disable-kvm"] if self.cfg.accel == "tcg" else []),
                *(["--append", self.cfg.append] if self.cfg.append else []),
                f"--qemu-opts={self.cfg.qemu_opts(self.port)}", f"--rodir={self.share}={self.share}",
                *([f"--rwdir={GUEST_RESULTS}={self.results}"] if self.results else []), "--exec", shlex.join(guest)]
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
        with self.console.open("wb") as out:
            LOG.debug("booting a VM: %s", " ".join(argv))
            self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        self.booted = time.time()

    def wait_ready(self, timeout: float = BOOT_ALLOWANCE) -> None:
        """Until the guest's sshd listens (its script says so on the console, and in the
        kernel log: without udev in the guest's root it has no console fl reads)."""
        elapsed = self.stopwatch()
        while elapsed() < timeout:
            text = self._guest_said()
            if READY in text:
                return
            if self.proc is None or self.proc.poll() is not None:
                raise FlError(f"the VM ({self.cfg.release}) stopped while booting: {_last_lines(text)}")
            time.sleep(0.2)
        raise FlError(f"the VM ({self.cfg.release}) was not ready after {timeout:.0f} s of its CPU time: "
                      f"{_last_lines(self._guest_said())}")

    def _guest_said(self) -> str:
        """The console, then what the guest script wrote to the kernel log in this boot."""
        said = self.console.read_text(errors="replace")
        if self.kernel_log.is_file():
            with self.kernel_log.open("rb") as f:
                f.seek(self._log_from)
                said += "".join(line for line in f.read().decode(errors="replace").splitlines(keepends=True)
                                if line.startswith("fl-guest: "))
        return said

    def stopwatch(self, cpu: bool = True) -> Callable[[], float]:
        """From now: the seconds the VM has run (CPU: max(QEMU's CPU time, WALL_SHARE of
        the wall time); else wall time)."""
        t0, c0 = time.monotonic(), self._qemu_cpu_s() if cpu else 0.0
        if not cpu:
            return lambda: time.monotonic() - t0
        return lambda: max(self._qemu_cpu_s() - c0, (time.monotonic() - t0) * WALL_SHARE)

    def _qemu_cpu_s(self) -> float:
        """CPU seconds used so far by the QEMU in this VM's process group (0 before it starts)."""
        if self.proc is None:
            return 0.0
        if self._qemu is None or not Path(f"/proc/{self._qemu}").exists():
            self._qemu = next((pid for pid, comm in _group(self.proc.pid) if comm.startswith("qemu")), None)
        if self._qemu is None:
            return 0.0
        try:
            fields = Path(f"/proc/{self._qemu}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime

    def guest_path(self, path: Path) -> Path:
        """Where the guest sees PATH, a path in the run's results folder."""
        path = path.resolve()
        if self.results is None or not path.is_relative_to(self.results.resolve()):
            raise FlError(f"{path} is outside the VM's results folder {self.results}")
        return GUEST_RESULTS / path.relative_to(self.results.resolve())

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def ssh_settings(self) -> dict[str, Any]:
        """Ansible variables that reach the guest's sshd."""
        return {"ansible_host": "127.0.0.1", "ansible_port": self.port, "ansible_user": "root",
                "ansible_ssh_private_key_file": str(self.folder / "id_ed25519"),
                # No keep-alives: nothing from the host may reach the guest during a test.
                "ansible_ssh_common_args": f"-o UserKnownHostsFile={self.folder / 'known_hosts'} "
                                           "-o StrictHostKeyChecking=yes",
                "ansible_python_interpreter": "python3",
                # This boot's own ssh master: never one left by an earlier guest on the port.
                "ansible_control_path_dir": str(self.folder / "cp"),
                # A connection that fails anyway (CI saw 'Connection closed by 127.0.0.1'
                # right after a boot, on the virtual clock: vm_guest.sh) is tried again.
                "ansible_ssh_retries": 3,
                # QEMU's own user-mode network answers the connection: a host whose cores are
                # busy with other work delays it (ssh's 10 s would take the guest for gone).
                "ansible_ssh_timeout": 120}

    def stop(self) -> None:
        """Kill QEMU and virtme-ng (the process group, and any QEMU that left it)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            kill_group(self.proc, grace=3.0)
        kill_strays(self.proc.pid)

    def last_words(self, lines: int = 15) -> str:
        """The end of the guest's kernel log, for a guest that died."""
        try:
            return "\n".join(self.kernel_log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no kernel log)"

    def _write_keys(self) -> None:
        """A client key for fl and a host key for the guest, made for this boot."""
        self.share.mkdir(parents=True, exist_ok=True)
        self.folder.chmod(0o700)
        for key in (self.folder / "id_ed25519", self.share / "ssh_host_ed25519_key"):
            for f in (key, key.with_name(key.name + ".pub")):
                f.unlink(missing_ok=True)
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "fl-vm", "-f", str(key)],
                           check=True, capture_output=True)
        shutil.copy(self.folder / "id_ed25519.pub", self.share / "authorized_keys")
        host_key = " ".join((self.share / "ssh_host_ed25519_key.pub").read_text().split()[:2])
        (self.folder / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {host_key}\n")


def _sshd_config(share: Path) -> str:
    return "\n".join([
        "# fl's sshd in a VM guest: root with fl's key only, no PAM (quick logins).",
        "ListenAddress 0.0.0.0", f"HostKey {share}/ssh_host_ed25519_key",
        f"AuthorizedKeysFile {share}/authorized_keys", "PermitRootLogin prohibit-password",
        "PasswordAuthentication no", "KbdInteractiveAuthentication no", "StrictModes no", "UsePAM no",
        "PrintMotd no", "PrintLastLog no", "UseDNS no", "PidFile /run/fl-sshd.pid",
        # No time limits: on the virtual clock an idle guest's time races (vm_guest.sh).
        "LoginGraceTime 0", "TCPKeepAlive no", "ClientAliveInterval 0",
        "Subsystem sftp internal-sftp", ""])


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _last_lines(text: str, n: int = 5) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return " | ".join(lines[-n:]) or "(no output)"


def _group(group: int) -> list[tuple[int, str]]:
    """(PID, command name) of each process in process group GROUP."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if os.getpgid(int(d.name)) == group:
                out.append((int(d.name), (d / "comm").read_text().strip()))
        except (ProcessLookupError, PermissionError, OSError):
            continue
    return out


def kill_strays(group: int) -> None:
    """Any QEMU left in a VM's process group (vng may fork) is killed by PID."""
    for pid, _ in _group(group):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)

