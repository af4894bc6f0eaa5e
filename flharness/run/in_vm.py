"""Host side of the VM backend: validate on the host, then run the same `fl` in the guest."""
from __future__ import annotations

from pathlib import Path

from ..cells import expand
from ..scenario import load_scenario
from ..testbed.inventory import load_inventory
from ..testbed.plan import estimated_seconds
from ..testbed.vm import BOOT_ALLOWANCE, VmConfig, deadline, run_fl_in_vm
from .runner import CELL_OVERHEAD, RunOptions, check_run_name, select


def run_scenario_in_vm(path: Path, opts: RunOptions, cfg: VmConfig, timeout_min: float | None) -> int:
    """Bad input is reported on the host, before booting; the guest probes its own kernel."""
    check_run_name(opts.run)
    scenario = load_scenario(path)
    cells = select(expand(scenario, path), opts.only)
    load_inventory(opts.inventory)
    run_dir = opts.results / opts.run
    run_dir.mkdir(parents=True, exist_ok=True)
    args = ["run", str(path), "--run", opts.run, "--results", str(opts.results),
            "--inventory", str(opts.inventory), *[f"--only={p}" for p in opts.only]]
    args += ["--force"] if opts.force else []
    args += ["--dry-run"] if opts.dry_run else []
    guest_seconds = sum(estimated_seconds(c, CELL_OVERHEAD) for c in cells)
    timeout = timeout_min * 60 if timeout_min else deadline(cfg, guest_seconds)
    return run_fl_in_vm(cfg, args, [run_dir], timeout)


def fl_in_vm(cfg: VmConfig, args: list[str]) -> int:
    """A short fl command (check, list) in the guest."""
    return run_fl_in_vm(cfg, args, [], BOOT_ALLOWANCE + 300)
