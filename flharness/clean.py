"""`fl clean`: remove what killed runs left behind — only testbeds and namespaces fl created."""
from __future__ import annotations

import logging
import shutil

from .run.recovery import recover_stale
from .testbed import netns
from .testbed.testbed import STATE_DIR, STATE_ROOT

LOG = logging.getLogger(__name__)


def clean() -> int:
    removed = recover_stale(say="removing testbed {id} (its fl, PID {pid}, is gone)")
    live_ids = {p.stem for p in STATE_DIR.glob("fl-*.json")} if STATE_DIR.is_dir() else set()
    for ns in netns.list_namespaces():
        if netns.is_fl_namespace(ns) and not any(ns.startswith(f"{i}-") for i in live_ids):
            LOG.info("removing namespace %s", ns)
            netns.remove(ns)
            removed += 1
    for scratch in [*STATE_ROOT.glob("fl-*"), *(STATE_ROOT / "ctl").glob("fl-*")]:  # leftovers of old testbeds
        # (a testbed born since live_ids was read has its state file by now: boot() writes it first)
        if scratch.is_dir() and scratch.name not in live_ids and not (STATE_DIR / f"{scratch.name}.json").exists():
            shutil.rmtree(scratch, ignore_errors=True)
    if live_ids:
        LOG.info("left alone (their fl process is still running): %s", ", ".join(sorted(live_ids)))
    LOG.info("nothing to clean" if not removed else f"removed {removed} leftover(s)")
    return 0
