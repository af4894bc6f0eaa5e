"""Helpers of the end-to-end and VM tests: running fl and watching what it builds and
leaves (only this run's own state, never the whole machine's), and what the tests need."""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from flharness.testbed.testbed import STATE_DIR

REPO = Path(__file__).resolve().parents[2]
#: The shipped demo's 12 cells with 10 s tests and lead 2, named demo (the e2e suite's demo run)
DEMO = str(REPO / "tests" / "scenarios" / "demo-short.yml")
FL = REPO / "fl"


#: Where `ip netns` keeps named namespaces (fl's state files: STATE_DIR).
NETNS_DIR = Path("/run/netns")


@dataclass
class Seen:
    """What a test saw of an fl process it started, while it ran: its testbeds (state
    files naming its PID), the inodes of their namespaces, its ansible-playbook and VM
    processes, and the capability-probe namespaces that appeared meanwhile. A test
    compares only this state of its own, never the whole machine's: another fl run on
    the machine at the same time must not break it."""

    ids: set[str] = field(default_factory=set)
    inodes: set[int] = field(default_factory=set)
    programs: dict[int, bytes] = field(default_factory=dict)  # PID → program name
    probes: set[str] = field(default_factory=set)
    probes_before: set[str] = field(default_factory=set)

    def start(self) -> None:
        self.probes_before = set(_probe_namespaces())

    def note(self, pid: int) -> None:
        """Record the testbeds whose state file names fl process PID, and their namespaces."""
        for path in STATE_DIR.glob("fl-*.json") if STATE_DIR.is_dir() else []:
            try:
                state = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if state.get("pid") != pid:
                continue
            self.ids.add(state["id"])
            for key, program in (("playbook_pid", b"ansible-playbook"), ("vm_pid", b"vng")):
                if state.get(key):
                    self.programs[int(state[key])] = program
        for tid in self.ids:
            self.inodes |= {i for ns in NETNS_DIR.glob(f"{tid}-*") if (i := _inode(ns)) is not None}
        self.probes |= set(_probe_namespaces()) - self.probes_before


def _inode(ns: Path) -> int | None:
    """The inode of a named namespace: an nsfs file mounted on /run/netns/NAME (None for
    the empty file `ip netns add` mounts it on, or one gone)."""
    try:
        st = ns.stat()
    except OSError:
        return None
    return st.st_ino if st.st_dev == os.stat("/proc/self/ns/net").st_dev else None


def _probe_namespaces() -> list[str]:
    return [p.name for p in NETNS_DIR.glob("fl-probe-*")] if NETNS_DIR.is_dir() else []


class FlResult(subprocess.CompletedProcess):
    """A finished fl run: its exit status and output, and what it built (SEEN)."""

    def __init__(self, args: list[str], returncode: int, stdout: str, stderr: str, seen: Seen) -> None:
        super().__init__(args, returncode, stdout, stderr)
        self.seen = seen


def run_fl_together(*calls: tuple[list[str], float]) -> list[FlResult]:
    """Several `fl ARGS` (each with its timeout) at once, to their ends: in the VM suite,
    two single-VM commands keep both cores busy (a run on the virtual clock keeps its
    results under load; a probe does not depend on time)."""
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = [pool.submit(run_fl, *args, timeout=timeout) for args, timeout in calls]
        return [f.result() for f in futures]


def run_fl(*args: str, timeout: float = 1800) -> FlResult:
    """`fl ARGS` to its end (at most TIMEOUT s: then SIGTERM, which makes fl remove its
    testbeds), noting what it builds while it runs."""
    argv = [sys.executable, str(FL), *args]
    seen = Seen()
    seen.start()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    deadline = time.monotonic() + timeout
    while True:
        seen.note(proc.pid)
        try:
            out, err = proc.communicate(timeout=0.5)  # no output is lost by retrying
            break
        except subprocess.TimeoutExpired:
            if time.monotonic() > deadline:
                proc.terminate()
                try:
                    proc.communicate(timeout=180)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    with contextlib.suppress(subprocess.TimeoutExpired):  # a child may hold its pipes
                        proc.communicate(timeout=60)
                raise subprocess.TimeoutExpired(argv, timeout) from None
    return FlResult(argv, proc.returncode, out, err, seen)


def interruptible() -> None:
    """In the child: SIGINT back to its default, so Python turns it into Ctrl-C even when
    the test suite was started in the background (a shell then ignores SIGINT for it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class FlProcess:
    """`fl ARGS` in the background. A thread of its own reads its output (stdout and
    stderr), so every wait has a deadline even when fl prints nothing; what it builds is
    noted while the test waits (SEEN)."""

    def __init__(self, *args: str) -> None:
        self.seen = Seen()
        self.seen.start()
        self.proc = subprocess.Popen([sys.executable, str(FL), *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, cwd=REPO, preexec_fn=interruptible)
        self.lines: list[str] = []
        self._next = 0  # the first line not yet looked at by wait_for_line
        self._eof = False
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    @property
    def output(self) -> str:
        with self._cond:
            return "".join(self.lines)

    def wait_for_line(self, needle: str, timeout: float = 300) -> str:
        """The next line of output (after those already waited for) that contains NEEDLE."""
        deadline = time.monotonic() + timeout
        while True:
            self.seen.note(self.proc.pid)
            with self._cond:
                while self._next < len(self.lines):
                    line = self.lines[self._next]
                    self._next += 1
                    if needle in line:
                        return line
                if self._eof:
                    raise AssertionError(f"fl ended without printing {needle!r}:\n{''.join(self.lines)}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no line with {needle!r} within {timeout:g} s:\n{''.join(self.lines)}")
                self._cond.wait(min(left, 0.5))

    def wait_until(self, condition: Callable[[], bool], what: str, timeout: float = 120) -> None:
        """Poll CONDITION until it holds; fails after TIMEOUT s, or when fl has ended."""
        deadline = time.monotonic() + timeout
        while not condition():
            self.seen.note(self.proc.pid)
            if self.proc.poll() is not None:
                raise AssertionError(f"fl ended (status {self.proc.returncode}) before {what}:\n{self.output}")
            if time.monotonic() > deadline:
                raise AssertionError(f"not within {timeout:g} s: {what}:\n{self.output}")
            time.sleep(0.1)
        self.seen.note(self.proc.pid)

    def send_signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def qemu_command(self, timeout: float = 300) -> str:
        """The command line of the QEMU booting a kernel for this fl (among its own
        descendants: vng first asks QEMU for its version), once it runs."""
        seen: list[str] = []

        def booted() -> bool:
            if (cmd := qemu_of(self.proc.pid)) is not None and " -kernel " in cmd:
                seen.append(cmd)
            return bool(seen)
        self.wait_until(booted, "fl's QEMU booted", timeout=timeout)
        return seen[0]

    def finish(self, timeout: float = 300) -> int:
        """Wait for fl to end (SIGTERM after TIMEOUT s: fl then removes its testbeds, and
        the test fails); returns its exit status."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            self.proc.wait(timeout=180)
            raise AssertionError(f"fl did not end within {timeout:g} s:\n{self.output}") from None
        with self._cond:
            self._cond.wait_for(lambda: self._eof, timeout=30)
        return self.proc.returncode


def listening(addr: str, port: int) -> bool:
    """Whether something accepts TCP connections on ADDR:PORT."""
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((addr, port)) == 0


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
    """Poll CONDITION until it holds, for at most TIMEOUT s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what}")
        time.sleep(0.1)


def removed_stale(out: str, tid: str) -> bool:
    """Whether an fl's output (OUT) says it removed the killed run's testbed TID, or waited
    while another fl did: CI's other pytest processes start fl runs, which remove the
    testbeds of killed runs too (flharness/run/recovery.py)."""
    return bool(re.search(rf"removing testbed {tid}\b|testbed {tid}: another fl removed it meanwhile", out))


def leftovers(seen: Seen, results: Path | None = None) -> list[str]:
    """What remains of the testbeds of one fl run (SEEN): their namespaces and state files;
    processes in their namespaces (by the namespaces' inodes), naming the run's RESULTS
    folder or a testbed's id, or the run's own ansible-playbook and VM; and capability-probe
    namespaces that appeared during the run and are still there 30 s later (another run's
    probe is gone within seconds)."""
    found = []
    for tid in sorted(seen.ids):
        found += [f"namespace {p.name}" for p in NETNS_DIR.glob(f"{tid}-*")]
        found += [f"state file {p}" for p in (STATE_DIR / f"{tid}.json",) if p.exists()]
    needles = [str(results)] if results is not None else []
    needles += sorted(seen.ids)
    # A namespace's inode is reused once it is freed: one that another's named namespace
    # has now is not the run's (a namespace of the run that a process still holds keeps its inode)
    others = {_inode(p) for p in NETNS_DIR.glob("*") if not p.name.startswith(tuple(seen.ids))} - {None}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            raw = (d / "cmdline").read_bytes()
            net = os.stat(d / "ns" / "net").st_ino
        except OSError:
            continue
        cmd = raw.replace(b"\0", b" ").decode(errors="replace")
        program = seen.programs.get(int(d.name))
        if (net in seen.inodes and net not in others) or any(re.search(re.escape(n) + r"(?=[/ ]|$)", cmd) for n in needles) \
                or (program is not None and program in raw):
            found.append(f"process {d.name}: {cmd}")
    try:
        wait_for(lambda: not (seen.probes & set(_probe_namespaces())), "probe namespaces removed")
    except AssertionError:
        found += [f"namespace {ns}" for ns in sorted(seen.probes & set(_probe_namespaces()))]
    return found


def built_testbeds(result: FlResult | FlProcess, *cell_dirs: Path) -> set[str]:
    """The testbeds a run built, as seen while it ran, checked against the cells it wrote:
    every cell names one of them (cell.json backend.testbed_id)."""
    seen = result.seen
    assert seen.ids, "no testbed of this fl run was seen: nothing to check its removal against"
    for d in cell_dirs:
        tid = json.loads((d / "cell.json").read_text())["backend"]["testbed_id"]
        assert tid in seen.ids, (d, tid, seen.ids)
    return seen.ids


def needs_root_tools(*more: str) -> pytest.MarkDecorator:
    """Root and the testbed's tools (and MORE programs), or a skip naming what is missing."""
    missing = [t for t in ("flent", "netperf", "tcpdump", "tc", *more) if shutil.which(t) is None]
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


def kernel_release(image: Path) -> str:
    """The release a bzImage names in its own header (the version string that setup
    header field kernel_version points to), read without fl."""
    head = image.read_bytes()[:0x10000]
    at = int.from_bytes(head[0x20E:0x210], "little") + 0x200
    return head[at:at + 256].split(b" ")[0].decode()


def newest_kernel() -> Path:
    """The newest /boot/vmlinuz-* with its modules installed: what `--vm` alone picks."""
    def version(p: Path) -> list[int]:
        return [int(x) for x in re.findall(r"\d+", p.name)]
    found = [p for p in Path("/boot").glob("vmlinuz-*") if Path("/lib/modules", p.name.removeprefix("vmlinuz-")).is_dir()]
    return max(found, key=version)


def qemu_of(pid: int) -> str | None:
    """The command line of a QEMU process descending from PID."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    todo = list(children.get(pid, []))
    while todo:
        p = todo.pop()
        try:
            cmd = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "qemu-system" in cmd.split(" ", 1)[0]:
            return cmd
        todo += children.get(p, [])
    return None
