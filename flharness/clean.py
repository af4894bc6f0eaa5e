"""`fl clean`: remove what killed runs left behind — only testbeds and namespaces fl created."""
from __future__ import annotations

import logging
import shutil

from .errors import FlError
from .run.recovery import recover_stale
from .testbed import netns
from .testbed.testbed import STATE_DIR, STATE_ROOT, stale_testbeds

LOG = logging.getLogger(__name__)


def clean() -> int:
    removed = recover_stale(say="removing testbed {id} (its fl, PID {pid}, is gone)")
    live_ids = {p.stem for p in STATE_DIR.glob("fl-*.json")} if STATE_DIR.is_dir() else set()
    kept = {s["id"] for s in stale_testbeds()}  # hosts that could not be reached: they stay
    for ns in netns.list_namespaces():
        if netns.is_fl_namespace(ns) and not any(ns.startswith(f"{i}-") for i in live_ids):
            LOG.info("removing namespace %s", ns)
            netns.remove(ns)
            removed += 1
    for scratch in [*STATE_ROOT.glob("fl-*"), *(STATE_ROOT / "ctl").glob("fl-*")]:  # leftovers of old testbeds
        # (a testbed born since live_ids was read has its state file by now: boot() writes it first)
        if scratch.is_dir() and scratch.name not in live_ids and not (STATE_DIR / f"{scratch.name}.json").exists():
            shutil.rmtree(scratch, ignore_errors=True)
    if live_ids - kept:
        LOG.info("left alone (their fl process is still running): %s", ", ".join(sorted(live_ids - kept)))
    if kept:
        LOG.info("kept until their hosts answer (fl clean --forget ID drops one whose hosts are gone for good): %s",
                 ", ".join(sorted(kept)))
    LOG.info("nothing to clean" if not removed else f"removed {removed} leftover(s)")
    return 0


def forget(ids: list[str]) -> int:
    """Drop the state of testbeds whose hosts are gone for good (a testbed of hosts that
    will never answer again): nothing is reached; what fl changed on them stays there."""
    stale = {s["id"]: s for s in stale_testbeds()}
    for testbed_id in ids:
        if testbed_id not in stale:
            known = (STATE_DIR / f"{testbed_id}.json").exists()
            raise FlError(f"fl clean --forget {testbed_id}: " + (
                "its fl process is still running: stop it first" if known else
                f"no such testbed (state files: {STATE_DIR})"))
    for testbed_id in ids:
        hosts = ", ".join(stale[testbed_id].get("unreached") or []) or "its hosts"
        LOG.info("forgetting testbed %s: what fl changed on %s stays there", testbed_id, hosts)
        (STATE_DIR / f"{testbed_id}.json").unlink(missing_ok=True)
        shutil.rmtree(STATE_ROOT / "ctl" / testbed_id, ignore_errors=True)
    return 0
