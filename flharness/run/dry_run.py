"""`fl run --dry-run`: what would be configured and run, per cell, touching nothing.

The scripts are rendered by Ansible from the cell role's templates, with the same
variables as a real run (testbed/render.py)."""
from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Any

from ..testbed.plan import cell_vars
from ..testbed.render import render_cells

if TYPE_CHECKING:
    from .planning import ScenarioPlan
    from .runner import Run

#: Lines of the rendered scripts that are plumbing, not configuration.
PLUMBING = ("#", "exec 2>&1", "set -e", "run()", "reset()", "batch()", "dir=", "show()", "listening()", "i=",
            "until ", "sleep", "done", "echo ", "printf '%s\\n' 'qdisc show", "printf '%s\\n' 'link show",
            "printf '%s\\n' \\", "> \"$dir/", "tc -force -batch", "'qdisc del dev")
BATCH_LINE = re.compile(r"^\s+('.*') \\$")  # a line of a tc or nft batch, quoted for the shell


def print_dry_run(run: Run, sp: ScenarioPlan, run_vars: dict[str, Any]) -> None:
    inv = run.inventory
    print(f"dry run of {sp.path} — nothing is configured or started")
    print(f"testbed: {inv.backend} hosts from {inv.path}; kernel {run.caps.kernel}; "
          f"results into {sp.store.root}")
    print(f"run-wide: IFBs for path delay: {'yes' if run_vars['ifb'] else 'no'}; "
          f"firewall counters: {'yes' if run_vars['nft'] else 'no'}")
    to_run = {p.cell.name: cell_vars(p.cell, inv, sp.store.root / p.cell.name, not run.virtual_clock,
                                     tcp_rewrite=run.caps.tcp_rewrite)
              for p in sp.planned if p.action == "run"}
    scripts = render_cells(inv, run_vars, list(to_run.values()),
                           {h: ["setup.sh.j2"] for h in ("cli", "mid", "srv")}) if to_run else {}
    for i, p in enumerate(sp.planned, 1):
        print(f"\n== [{i}/{len(sp.planned)}] {p.cell.name}  (config {p.cell.config_hash})")
        if p.action != "run":
            print(f"   {'skip' if p.action == 'skip' else 'done'}: {p.reason}")
            continue
        for host in ("cli", "mid", "srv"):
            lines = [ln for ln in scripts[p.cell.name][host]["setup.sh"].splitlines()
                     if ln.strip() and not ln.lstrip().startswith(PLUMBING)]
            print(f"   {host}:")
            for line in lines:
                print(f"      {_unquoted(line)}")
        print(f"   cli: {shlex.join(to_run[p.cell.name]['flent'])}")


def _unquoted(line: str) -> str:
    """A tc or nft batch line as the program reads it; other lines as they are."""
    batch = BATCH_LINE.match(line)
    return shlex.split(batch.group(1))[0] if batch else line
