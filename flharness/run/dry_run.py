"""`fl run --dry-run`: what would be configured and run, per cell, touching nothing."""
from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from ..testbed.plan import cell_vars, render_bottleneck

if TYPE_CHECKING:
    from .planning import ScenarioPlan
    from .runner import Run


def print_dry_run(run: "Run", sp: "ScenarioPlan", run_vars: dict[str, Any]) -> None:
    inv = run.inventory
    print(f"dry run of {sp.path} — nothing is configured or started")
    print(f"testbed: {inv.backend} hosts from {inv.path}; kernel {run.caps.kernel}; "
          f"results into {sp.store.root}")
    print(f"run-wide: IFBs for path delay: {'yes' if run_vars['ifb'] else 'no'}; "
          f"firewall counters: {'yes' if run_vars['nft'] else 'no'}")
    for i, p in enumerate(sp.planned, 1):
        print(f"\n== [{i}/{len(sp.planned)}] {p.cell.name}  (config {p.cell.config_hash})")
        if p.action != "run":
            print(f"   {'skip' if p.action == 'skip' else 'done'}: {p.reason}")
            continue
        cv = cell_vars(p.cell, inv, sp.store.root / p.cell.name, run.dilation)
        for host, settings in sorted(p.cell.sysctls.items()):
            for key, value in settings.items():
                print(f"   {host}: sysctl -w {key}={value}")
        print("   mid: bottleneck script:")
        for line in render_bottleneck(cv, run_vars, inv).splitlines():
            if line.strip() and not line.startswith(("#!", "set -e", "run()", "reset()", "exec 2>&1")):
                print(f"      {line}")
        print(f"   cli, srv: tcpdump -s 128 on {inv.hostvars['cli']['fl_if']} and "
              f"{inv.hostvars['srv']['fl_if']}, ss sampler")
        print(f"   cli: {shlex.join(cv['flent'])}")
