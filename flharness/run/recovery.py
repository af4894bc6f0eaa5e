"""Testbeds left by an fl that was killed (kill -9, power loss): found by their state
files (testbed/testbed.py), removed by PID and name, saying so. `fl run` does this before
it starts; `fl clean` does it on demand."""
from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import FlError
from ..testbed import netns
from ..testbed.inventory import Inventory, load_testbeds
from ..testbed.playbook_vars import RunVars
from ..testbed.testbed import STATE_DIR, Testbed, stale_testbeds

LOG = logging.getLogger(__name__)


def recover_stale(say: str = "fl: removing testbed {id} left by a run that was killed (fl PID {pid})") -> int:
    """Remove every testbed whose fl process is gone; returns how many. Two fl processes
    that find one at once (`fl clean`, another's `fl run`) remove it one at a time: the
    second waits, then finds it gone, so neither returns while the removal still runs."""
    removed = 0
    for state in stale_testbeds():
        with _removing(state["id"]) as still_there:
            if not still_there:
                LOG.info("testbed %s: another fl removed it meanwhile", state["id"])
                continue
            LOG.info(say.format(id=state["id"], pid=state.get("pid")))
            remove_testbed(state)
            removed += 1
    return removed


@contextlib.contextmanager
def _removing(testbed_id: str) -> Iterator[bool]:
    """The lock of one testbed's removal (held until it is done); yields whether its state
    file is still there once the lock is held."""
    lock = STATE_DIR / f".{testbed_id}.lock"
    while True:
        with lock.open("w") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            if not _same_file(f.fileno(), lock):
                continue  # its holder removed it while this fl waited: lock the one there now
            try:
                yield (STATE_DIR / f"{testbed_id}.json").exists()
            finally:
                lock.unlink(missing_ok=True)
            return


def _same_file(fd: int, path: Path) -> bool:
    """Whether PATH still names the file open as FD."""
    try:
        return os.path.samestat(os.fstat(fd), path.stat())
    except FileNotFoundError:
        return False


def remove_testbed(state: dict[str, Any]) -> None:
    for key, program in (("playbook_pid", b"ansible-playbook"), ("vm_pid", b"vng")):
        _stop_group(state.get(key), program)
    try:
        inv = state_inventory(state)
    except FlError as e:
        LOG.info("  cannot read its inventory (%s); removing its namespaces only", e)
        for ns in netns.testbed_namespaces(state["id"]):
            netns.remove(ns)
        (STATE_DIR / f"{state['id']}.json").unlink(missing_ok=True)
        return
    tb = Testbed(inv, _run_vars(state), Path("/tmp/fl-clean.log"), testbed_id=state["id"])
    tb.touched = state.get("kind") != "vm"  # a VM's namespaces went with it
    if tb.touched and not tb.inventory.is_file():
        tb.ready()
    tb.down()


def state_inventory(state: dict[str, Any]) -> Inventory:
    """The testbed of a state file's inventory that the run used: an ssh inventory may hold
    several (state files before fl named it: the first)."""
    source = Path(state.get("source") or state.get("inventory") or "")
    testbeds = load_testbeds(source)
    name = state.get("testbed", testbeds[0].name)
    found = [tb for tb in testbeds if tb.name == name]
    if not found:
        raise FlError(f"{source}: no testbed {name!r} any more (the inventory was edited)")
    return found[0]


def _run_vars(state: dict[str, Any]) -> RunVars | None:
    """The killed run's fl_run (the teardown reads it), or None: it had none yet, or
    another fl wrote the state file."""
    try:
        return RunVars.model_validate(state["run_vars"]) if state.get("run_vars") else None
    except ValidationError as e:
        LOG.info("  its run settings are unreadable (%s); removing without them", e.error_count())
        return None


def _stop_group(pid: int | None, program: bytes) -> None:
    """A killed run's ansible-playbook or VM (its own process group), if it still runs."""
    if not pid:
        return
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return
    if any(program in part for part in cmdline[:2]):
        LOG.info("  stopping its %s (process group %s)", program.decode(), pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        if program == b"vng":
            from ..testbed.vm import kill_strays
            kill_strays(pid)
