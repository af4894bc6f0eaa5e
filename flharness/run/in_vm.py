"""Host side of the VM backend: validate on the host, then run the same `fl` in the guest."""
from __future__ import annotations

from pathlib import Path

from ..testbed.inventory import load_inventory
from ..testbed.plan import estimated_seconds
from ..testbed.vm import BOOT_ALLOWANCE, GUEST_DIED, VmConfig, deadline, run_fl_in_vm
from .planning import check_run_name, load_selected
from .runner import RunOptions


#: Reboots after the guest died mid-run; each resumes where the last one stopped.
RESTARTS = 2


def run_scenarios_in_vm(paths: list[Path], opts: RunOptions, cfg: VmConfig, timeout_min: float | None) -> int:
    """Bad input is reported on the host, before booting; the guest probes its own kernel.
    A guest that dies (panic, QEMU crash) is booted again and the run resumes, unless
    --force (a resumed --force run would redo the cells this one already finished)."""
    check_run_name(opts.run)
    cells = [c for p in paths for c in load_selected(p, opts.only, require_match=len(paths) == 1)[1]]
    load_inventory(opts.inventory)
    run_dir = opts.results / opts.run
    run_dir.mkdir(parents=True, exist_ok=True)
    args = ["run", *map(str, paths), "--run", opts.run, "--results", str(opts.results),
            "--inventory", str(opts.inventory), *[f"--only={p}" for p in opts.only]]
    args += ["--force"] if opts.force else []
    args += ["--dry-run"] if opts.dry_run else []
    timeout = timeout_min * 60 if timeout_min else deadline(
        cfg, [(estimated_seconds(c, 0), max(c.up.rate.bps, c.down.rate.bps)) for c in cells])
    for attempt in range(RESTARTS + 1):
        rc = run_fl_in_vm(cfg, args, [run_dir], timeout, kernel_log=run_dir / "vm-kernel.log")
        if rc != GUEST_DIED or opts.force or opts.dry_run or attempt == RESTARTS:
            return rc
        print(f"fl: booting the VM again to resume the run ({attempt + 1}/{RESTARTS})", flush=True)
    return rc


def fl_in_vm(cfg: VmConfig, args: list[str]) -> int:
    """A short fl command (check, list) in the guest."""
    return run_fl_in_vm(cfg, args, [], BOOT_ALLOWANCE + 300)
