"""`fl list`: scenarios, or one scenario's cells with their status and estimated time."""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from .capabilities import probe_for, probe_request
from .cells import expand
from .errors import FlError
from .results import ScenarioResults
from .run.planning import estimate_total, select
from .run.runner import CELL_OVERHEAD
from .scenario import list_scenarios, load_scenario
from .scenario.load import SCENARIO_DIR

if TYPE_CHECKING:
    from .testbed.vm import VmConfig


def list_all() -> int:
    for name in list_scenarios():
        path = SCENARIO_DIR / f"{name}.yml"
        try:
            scenario = load_scenario(path)
            cells = expand(scenario, path)
            print(f"{name:<28} {len(cells):>5} cells  ~{estimate_total(cells, CELL_OVERHEAD):>7}  {scenario.description}")
        except FlError as e:
            print(f"{name:<28} invalid: {e}")
    return 0


def list_cells(path: Path, run: str, only: list[str], results: Path, vm: VmConfig | None = None,
               inventory: Path | None = None) -> int:
    scenario = load_scenario(path)
    cells = select(expand(scenario, path), only)
    store = ScenarioResults(results / run / (scenario.name or path.stem))
    if vm is not None and inventory is not None:
        from .run.vm_probe import probe_in_vm
        caps = probe_in_vm(vm, inventory, probe_request(cells))
    else:
        caps = probe_for(cells) if os.geteuid() == 0 else None
    pending = []
    width = max(len(c.name) for c in cells)
    for cell in cells:
        status = _status(store, cell.name, cell.config_hash)
        why = caps.unsupported(cell) if caps and not caps.data.get("error") else None
        if status != "done" and why is None:
            pending.append(cell)
        note = f"skip: {why}" if why else ""
        print(f"{cell.name:<{width}}  {cell.config_hash}  {status:<7} {note}")
    kernel = f"kernel {caps.kernel}" if caps else "kernel support not probed (needs root)"
    where = f"this {kernel}" if vm is None else f"the VM's {kernel}"
    print(f"\n{len(cells)} cells ({scenario.repetitions} repetition(s)), "
          f"~{estimate_total(cells, CELL_OVERHEAD)} for all; {len(pending)} to run on {where}, "
          f"~{estimate_total(pending, CELL_OVERHEAD)} (test length + 10 s Flent lead-in/out "
          f"+ ~{CELL_OVERHEAD:.0f} s setup per cell; a TCG VM takes ~4× as long)")
    return 0


def _status(store: ScenarioResults, name: str, config_hash: str) -> str:
    rec = store.record(name)
    if rec is None:
        return "new"
    if rec.status == "ok":
        return "done" if rec.config_hash == config_hash else "changed"
    return rec.status
