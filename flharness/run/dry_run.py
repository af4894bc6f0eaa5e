"""`fl run --dry-run`: what would be configured and run, per cell, touching nothing: each
host's command files (testbed/commands.py, state_script.py and flent_script.py; the
client's flent.sh holds the Flent command) and the two scripts the cell role runs on it,
setup.sh (which writes those files, then runs them) and collect.sh (cell_scripts.py),
after each host's configuration for the whole run (testbed_scripts.up_script): exactly
what a real run writes and runs."""
from __future__ import annotations

from ..hosts import HOSTS
from ..testbed.cell_scripts import file_line
from ..testbed.plan import DRY_RUN_ID, DRY_RUN_ROOT, cell_vars, host_dirs, host_scripts
from ..testbed.playbook_vars import RunVars
from ..testbed.tunnel import MTU, OVERHEAD
from .context import Run
from .planning import ScenarioPlan


def print_dry_run(run: Run, sp: ScenarioPlan, run_vars: RunVars) -> None:
    inv = run.inventory
    print(f"dry run of {sp.path} — nothing is configured or started")
    print(f"testbed: {inv.backend} hosts from {inv.path}; kernel {run.caps.kernel}; "
          f"results into {sp.store.root}")
    print(f"run-wide: IFBs for path delay: {'yes' if run_vars.ifb else 'no'}; "
          f"firewall counters: {'yes' if run_vars.nft else 'no'}")
    scratch = host_dirs(DRY_RUN_ID, DRY_RUN_ROOT)
    for host, scripts in host_scripts(inv, scratch, run_vars).items():
        print(f"   {host}: testbed_up.sh (run by the testbed role once, before the first cell):")
        _print_text(scripts.up or "")
    for i, p in enumerate(sp.planned, 1):
        print(f"\n== [{i}/{len(sp.planned)}] {p.cell.name}  (config {p.cell.config_hash})")
        if p.action != "run":
            print(f"   {'skip' if p.action == 'skip' else 'done'}: {p.reason}")
            continue
        cv = cell_vars(p.cell, inv, sp.store.root / p.cell.name, not run.virtual_clock,
                       tcp_rewrite=run.caps.tcp_rewrite, run_vars=run_vars, scratch=scratch, keys=False)
        for host in HOSTS:
            files = cv.files.get(host, {})
            print(f"   {host}:" + ("" if files else " nothing of its own"))
            setup = cv.hosts[host].setup
            for name, text in files.items():  # each file is shown above: once is enough
                setup = setup.replace(file_line(name, text), f'# (writes "$cmd/{name}": its text is above)')
            cell_scripts = {"setup.sh (run by the cell role; writes the files above)": setup,
                            "collect.sh (run by the cell role after Flent)": cv.hosts[host].collect}
            for name, text in {**files, **cell_scripts}.items():
                print(f"      {name}:")
                _print_text(text)
            if host in ("cli", "srv") and cv.tunnel:
                print(f"      (tunnel.ip: {MTU} is the underlay's MTU less {OVERHEAD[cv.tunnel]} bytes, read on "
                      "the host" + (", and the keys are made per cell" if cv.tunnel in ("ipsec", "wireguard") else "") + ")")


def _print_text(text: str) -> None:
    for line in text.splitlines():
        print(f"         {line}")
