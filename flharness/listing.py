"""`fl list`: scenarios, or one scenario's cells with their status and estimated time."""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from .capabilities import Capabilities, probe_for, probe_request
from .cells import Cell, expand
from .errors import FlError
from .results import ScenarioFolder
from .run import pace
from .run.planning import require_some, select
from .scenario import list_scenarios, load_scenario
from .scenario.load import SCENARIO_DIR
from .testbed.probing import merge_hosts

if TYPE_CHECKING:
    from .testbed.vm import VmConfig


def list_all() -> int:
    measured = pace.pace("host")
    for name in list_scenarios():
        path = SCENARIO_DIR / f"{name}.yml"
        try:
            scenario = load_scenario(path)
            cells = expand(scenario, path)
            print(f"{name:<28} {len(cells):>5} cells  {measured.estimate(cells, 1):>8}  {scenario.description}")
        except FlError as e:
            print(f"{name:<28} invalid: {e}")
    return 0


def list_cells(paths: list[Path], label: str, only: list[str], results: Path, vm: VmConfig | None = None,
               inventory: Path | None = None, parallel: int | None = None) -> int:
    """The cells of one or more scenarios, with what this kernel (or the VM's, probed in
    one boot for all of them, or an ssh inventory's hosts') can run, and how long that takes on PARALLEL testbeds at
    the pace this machine ran such cells before (run/pace.py)."""
    scenarios = [(path, load_scenario(path)) for path in paths]
    cells = {path: select(expand(scenario, path), only, require_match=len(paths) == 1) for path, scenario in scenarios}
    everything = [c for cs in cells.values() for c in cs]
    require_some(everything, only)
    caps: Capabilities | None
    from .run.vm_probe import probe_in_vm, probe_ssh, ssh_inventory
    place = "this"
    if vm is not None and inventory is not None:
        caps, place = probe_in_vm(vm, inventory, probe_request(everything)), "the VM's"
    elif (inv := ssh_inventory(inventory)) is not None and os.geteuid() == 0:
        caps, place = Capabilities(merge_hosts(probe_ssh(inv, probe_request(everything)))), "the ssh testbed's"
    else:
        caps = probe_for(everything) if os.geteuid() == 0 else None
    measured = pace.pace(_kind(vm, inventory))
    testbeds = _testbeds(parallel, vm, inventory)
    pending = []
    for i, (path, scenario) in enumerate(scenarios):
        if len(scenarios) > 1:
            print(f"{'' if i == 0 else chr(10)}== {scenario.name or path.stem}")
        pending += _print_cells(scenario.name or path.stem, sorted(set(scenario.repetitions_list())), cells[path],
                                label, results, caps, place, measured, testbeds)
    if len(scenarios) > 1:
        print(f"\nall: {len(pending)} cells to run, {measured.estimate(pending, testbeds)} on "
              f"{testbeds} testbed(s) ({measured.describe()})")
    return 0


def _testbeds(parallel: int | None, vm: VmConfig | None, inventory: Path | None) -> int:
    """How many testbeds fl run would use: --parallel N, else one VM, or every testbed of
    an ssh inventory."""
    if parallel is not None and parallel < 1:
        raise FlError(f"--parallel {parallel}: give 1 or more testbeds")
    if parallel is not None or vm is not None:
        return parallel or 1
    from .testbed.inventory import load_testbeds
    found = load_testbeds(inventory) if inventory is not None and inventory.is_file() else []
    return len(found) if found and found[0].backend == "ssh" else 1


def _kind(vm: VmConfig | None, inventory: Path | None) -> str:
    from .testbed.inventory import load_testbeds
    backend = load_testbeds(inventory)[0].backend if inventory is not None and inventory.is_file() else "netns"
    return pace.kind_of(vm.accel if vm else None, backend)


def _print_cells(name: str, repetitions: list[int], cells: list[Cell], label: str, results: Path,
                 caps: Capabilities | None, place: str, measured: pace.Pace, testbeds: int) -> list[Cell]:
    store = ScenarioFolder(results / label / name)
    pending = []
    width = max((len(c.name) for c in cells), default=10)
    for cell in cells:
        status = _status(store, cell.name, cell.config_hash)
        why = caps.unsupported(cell) if caps and not caps.error else None
        if status != "done" and why is None:
            pending.append(cell)
        note = f"skip: {why}" if why else ""
        print(f"{cell.name:<{width}}  {cell.config_hash}  {status:<7} {note}")
    kernel = f"kernel {caps.kernel}" if caps else "kernel support not probed (needs root)"
    print(f"\n{len(cells)} cells ({' or '.join(map(str, repetitions))} repetition(s)), "
          f"{measured.estimate(cells, testbeds)} for all; {len(pending)} to run on {place} {kernel}, "
          f"{measured.estimate(pending, testbeds)} on {testbeds} testbed(s) ({measured.describe()})")
    return pending


def _status(store: ScenarioFolder, name: str, config_hash: str) -> str:
    rec = store.record(name)
    if rec is None:
        return "new"
    if rec.status == "ok":
        return "done" if rec.config_hash == config_hash else "changed"
    return rec.status
