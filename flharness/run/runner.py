"""`fl run`: plan each scenario's cells (resume, kernel support), build one testbed, run them.

Everything that can fail on bad input happens in `prepare`, before anything is
configured. One testbed (and, with --vm, one VM boot) serves all scenarios of a run.
"""
from __future__ import annotations

import signal
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import yaml

from .. import REPO
from ..capabilities import Capabilities, probe_for
from ..cells import Cell
from ..errors import FlError
from ..provenance import controller, fl_source
from ..results import CellRecord, ScenarioResults
from ..scenario.load import read_merged
from ..testbed.inventory import Inventory, load_inventory
from ..testbed.plan import cell_vars, estimated_seconds, run_vars
from ..testbed.testbed import Testbed
from .evaluate import Verdict, evaluate
from .planning import Planned, ScenarioPlan, check_run_name, load_selected, plan
from .progress import Progress
from .provenance_log import append_invocation, backend_record
from .summary import print_summary

CELL_OVERHEAD = 8.0  # seconds of Ansible setup and collection per cell, for estimates
VIRTUAL_CLOCK_DILATION = 20.0


@dataclass
class RunOptions:
    run: str = "default"
    only: list[str] = field(default_factory=list)
    force: bool = False
    dry_run: bool = False
    inventory: Path = REPO / "inventory.ini"
    results: Path = REPO / "results"
    backend: dict | None = None  # set in a VM guest: what the host booted (kind vm, kernel, clock…)


@dataclass
class Run:
    """What all scenarios and cells of one `fl run` share."""

    opts: RunOptions
    inventory: Inventory
    caps: Capabilities
    provenance: dict = field(default_factory=dict)

    @property
    def dilation(self) -> float:
        """Timeouts are stretched on QEMU's virtual clock (I/O waits skip guest time)."""
        return VIRTUAL_CLOCK_DILATION if (self.opts.backend or {}).get("clock") == "virtual" else 1.0

    @property
    def control_port(self) -> int:
        return int(self.inventory.hostvars["cli"]["fl_netperf_port"])

    @property
    def root(self) -> Path:
        return self.opts.results / self.opts.run


def prepare(paths: list[Path], opts: RunOptions) -> tuple[Run, list[ScenarioPlan]]:
    """Validate every input and probe the kernel; nothing is configured yet."""
    check_run_name(opts.run)
    selected = [load_selected(path, opts.only, require_match=len(paths) == 1) for path in paths]
    names = [s.name for s, _ in selected]
    if len(set(names)) != len(names):
        raise FlError(f"two scenarios of this run have the same name: {', '.join(names)}")
    inventory = load_inventory(opts.inventory)
    if any(c.path.tunnel != "none" for _, cells in selected for c in cells):
        inventory.tunnel_ip("cli"), inventory.tunnel_ip("srv")
    caps = probe_for([c for _, cells in selected for c in cells], inventory)
    if caps.data.get("error"):
        raise FlError(caps.data["error"])
    if missing := caps.missing_tools():
        raise FlError(f"missing tools: {', '.join(missing)} (./install.sh installs them)")
    for (scenario, cells), path in zip(selected, paths):
        caps.check_specs(cells, path)
    plans = [ScenarioPlan(path, s.name, ScenarioResults(opts.results / opts.run / s.name), [])
             for (s, _), path in zip(selected, paths)]
    for sp, (_, cells) in zip(plans, selected):
        sp.planned = plan(cells, caps, sp.store, opts.force)
    if not any(sp.planned for sp in plans):
        raise FlError(f"--only {' '.join(opts.only)}: no cell of these scenarios matches")
    return Run(opts, inventory, caps), plans


def run_scenarios(paths: list[Path], opts: RunOptions) -> int:
    run, plans = prepare(paths, opts)
    to_run = [(sp, c) for sp in plans for c in sp.cells("run")]
    rv = run_vars([c for _, c in to_run], run.caps.feature("ifb") and run.caps.feature("u32_mirred"),
                  run.caps.feature("nftables"), dilation=run.dilation)
    if opts.dry_run:
        from .dry_run import print_dry_run
        for sp in plans:
            print_dry_run(run, sp, rv)
        return 0
    for sp in plans:
        sp.store.root.mkdir(parents=True, exist_ok=True)
        _save_scenario(sp)
    run.provenance = {"fl": fl_source(), "controller": controller()}
    invocation = append_invocation(run, plans)
    records: list[CellRecord] = [_record_skip(run, sp, p) for sp in plans for p in sp.planned
                                 if p.action == "skip"]
    interrupted = False
    try:
        if to_run:
            records += _run_cells(run, to_run, rv)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        append_invocation(run, plans, invocation, records, interrupted)
    return print_summary(plans, records, interrupted, vm_hint=opts.backend is None)


def _run_cells(run: Run, to_run: list[tuple[ScenarioPlan, Cell]], rv: dict) -> list[CellRecord]:
    progress = Progress([estimated_seconds(c, CELL_OVERHEAD) for _, c in to_run])
    records: list[CellRecord] = []
    with _signals_as_interrupt(), Testbed(run.inventory, rv, run.root / "fl.log") as tb:
        run.provenance["testbed"] = tb.id
        for sp, cell in to_run:
            records.append(_run_cell(run, sp, tb, cell, progress))
    return records


def _run_cell(run: Run, sp: ScenarioPlan, tb: Testbed, cell: Cell, progress: Progress) -> CellRecord:
    partial = sp.store.new_partial(cell.name)
    cv = cell_vars(cell, run.inventory, partial, run.dilation)
    rec = _record(run, cell)
    rec.started = time.time()
    progress.start(f"{sp.name}/{cell.name}")
    try:
        result = tb.run_cell(cv)
        rec.phases = result.phases
        verdict = evaluate(cell, partial, result, run.control_port)
    except KeyboardInterrupt:
        rec.status, rec.reason, rec.ended = "interrupted", "interrupted (SIGINT/SIGTERM)", time.time()
        with _no_interrupts():
            sp.store.commit(partial, rec)
        progress.finish(cell.name, "stopped", rec.ended - rec.started)
        raise
    rec.status, rec.reason, rec.checks, rec.ended = verdict.status, verdict.reason, verdict.checks, time.time()
    with _no_interrupts():
        sp.store.commit(partial, rec)
    progress.finish(cell.name, rec.status, rec.ended - rec.started, _detail(cell, verdict))
    return rec


def _detail(cell: Cell, verdict: Verdict) -> str:
    if verdict.status != "ok":
        return verdict.reason[:200]
    util = verdict.checks.get("utilisation_up")
    parts = [f"{util:.1%} of {cell.up.rate.text} up"] if util is not None else []
    parts += [f"{name} began {delay:g} s late" for name, delay in verdict.checks.get("late_start_s", {}).items()]
    return "; ".join(parts)


def _record(run: Run, cell: Cell, status: str = "ok", reason: str = "") -> CellRecord:
    return CellRecord(
        scenario=cell.scenario, cell=cell.name, config_hash=cell.config_hash, status=status,
        reason=reason, coordinates=cell.coordinates(), swept=list(cell.swept), config=cell.config,
        backend=backend_record(run), kernel=run.caps.kernel, tools=run.caps.tools,
        fl=run.provenance.get("fl", {}))


def _record_skip(run: Run, sp: ScenarioPlan, p: Planned) -> CellRecord:
    rec = _record(run, p.cell, "skipped", p.reason)
    rec.started = rec.ended = time.time()
    sp.store.commit(sp.store.new_partial(p.cell.name), rec)
    return rec


def _save_scenario(sp: ScenarioPlan) -> None:
    """The scenario as run (extends merged), next to its cells."""
    merged = read_merged(sp.path)
    merged.pop("extends", None)  # merged in: the copy stands alone
    text = f"# {sp.path} as read by fl (extends merged)\n" + yaml.safe_dump(
        merged, sort_keys=False, allow_unicode=True)
    (sp.store.root / "scenario.yml").write_text(text)


@contextmanager
def _signals_as_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP end a run like Ctrl-C: the current cell is marked, the testbed removed."""
    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt
    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextmanager
def _no_interrupts() -> Iterator[None]:
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
