"""`fl clean`: remove what killed runs left behind — only testbeds and namespaces fl created."""
from __future__ import annotations

import os
import signal
from pathlib import Path

from .errors import FlError
from .testbed import netns
from .testbed.inventory import load_inventory
from .testbed.plan import run_vars
from .testbed.testbed import STATE_DIR, STATE_ROOT, Testbed, stale_testbeds


def stop_orphan_playbook(pid: int | None) -> None:
    """The killed run's ansible-playbook (its own process group), if it still runs."""
    if not pid:
        return
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return
    if any(b"ansible-playbook" in part for part in cmdline[:2]):
        print(f"  stopping its ansible-playbook (process group {pid})")
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def clean() -> int:
    removed = 0
    live_ids = {p.stem for p in STATE_DIR.glob("fl-*.json")} if STATE_DIR.is_dir() else set()
    for state in stale_testbeds():
        print(f"removing testbed {state['id']} ({state.get('backend')}, {state.get('inventory')})")
        stop_orphan_playbook(state.get("playbook_pid"))
        try:
            inv = load_inventory(Path(state["inventory"]))
        except FlError as e:
            print(f"  cannot read its inventory ({e}); removing its namespaces only")
            for ns in netns.testbed_namespaces(state["id"]):
                netns.remove(ns)
            (STATE_DIR / f"{state['id']}.json").unlink(missing_ok=True)
        else:
            Testbed(inv, state.get("run_vars") or run_vars([], False, False),
                    Path("/tmp/fl-clean.log"), testbed_id=state["id"]).down()
        live_ids.discard(state["id"])
        removed += 1
    for ns in netns.list_namespaces():
        if netns.is_fl_namespace(ns) and not any(ns.startswith(f"{i}-") for i in live_ids):
            print(f"removing namespace {ns}")
            netns.remove(ns)
            removed += 1
    for scratch in STATE_ROOT.glob("fl-*"):  # empty scratch roots of earlier testbeds
        if scratch.is_dir() and scratch.name not in live_ids and not any(scratch.iterdir()):
            scratch.rmdir()
    in_use = sorted(live_ids)
    if in_use:
        print(f"left alone (their fl process is still running): {', '.join(in_use)}")
    print("nothing to clean" if not removed else f"removed {removed} leftover(s)")
    return 0
