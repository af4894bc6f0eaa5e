"""`fl run`: plan each scenario's cells (resume, kernel support), build the testbeds, run them.

Everything that can fail on bad input happens before anything is configured. One set of
testbeds (namespaces on this machine, VMs, or ssh testbeds of the inventory) serves all
scenarios of a run; `--parallel N` runs N of them at once (run/dispatch.py).
"""
from __future__ import annotations

import json
import logging
import os
import platform
import time
from collections import deque
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import yaml

from .. import log
from ..capabilities import Capabilities, probe_for, probe_request
from ..cells import Cell
from ..errors import FlError
from ..image.store import load_image
from ..provenance import controller, fl_source
from ..results import CellRecord, ScenarioFolder, files, run_folder
from ..results.cell_record import CcModule
from ..results.run_record import RunRecord
from ..scenario import Scenario
from ..scenario.load import read_merged
from ..testbed.inventory import Inventory, load_testbeds, moved
from ..testbed.plan import cell_vars, run_vars
from ..testbed.playbook_vars import RunVars
from ..testbed.probing import merge_hosts
from ..testbed.testbed import BATCH, Testbed
from . import pace
from .context import Run, RunOptions
from .dispatch import Dispatch, Slot, wall_stopwatch
from .finish import Attempt
from .kit_loading import load_modules, this_machine
from .planning import KnownKernel, PlannedCell, ScenarioPlan, all_done, check_run_name, load_selected, plan, require_some, scenario_name
from .progress import Progress
from .provenance_log import append_invocation, backend_record, on_testbed
from .recovery import recover_stale
from .signals import signals_as_interrupt
from .space import check_space
from .summary import print_summary

LOG = logging.getLogger(__name__)
#: Wall seconds a cell may take on namespaces or ssh hosts beyond Flent's own limit.
HOST_CELL_MARGIN = 300.0


def run_scenarios(paths: list[Path], opts: RunOptions) -> int:
    check_run_name(opts.run)
    selected = [load_selected(path, opts.only, require_match=len(paths) == 1) for path in paths]
    names = [scenario_name(s) for s, _ in selected]
    if len(set(names)) != len(names):
        raise FlError(f"two scenarios of this run have the same name: {', '.join(names)}")
    inventories = _testbed_inventories(opts)
    cells = [c for _, cs in selected for c in cs]
    require_some(cells, opts.only)
    if any(c.config.tunnel for c in cells):
        inventories[0].tunnel_ip("cli"), inventories[0].tunnel_ip("srv")
    _one_kernel_per_testbed(opts, inventories, cells)
    recover_stale()
    run_dir = opts.results / opts.run
    _check_readable(run_dir, names)
    if not opts.dry_run:
        check_space(run_dir, [c for s, cs in selected for c in cs
                              if opts.force or not ScenarioFolder(run_dir / scenario_name(s)).is_done(c.name, c.config_hash)])
    if not (opts.force or opts.dry_run) and (done := all_done(selected, paths, run_dir, _known_kernel(opts, inventories))):
        LOG.info("every selected cell completed earlier with the same configuration: nothing to run "
                 "(--force runs them again)")
        for sp in done:
            if _save_scenario(sp):
                LOG.info("%s: the scenario changed outside its cells' configurations (claims, references, "
                         "analysis): its scenario.yml is updated, and `fl plot` judges it again", sp.store.root)
        return print_summary(done, [], False)
    with ExitStack() as stack, signals_as_interrupt(), log.debug_log() as debug:
        LOG.debug("fl run %s: %d cell(s) of %s into %s", " ".join(map(str, paths)), len(cells), ", ".join(names), run_dir)
        testbeds = _testbeds(opts, inventories, run_dir, stack)
        if opts.load_modules and not opts.dry_run:  # a dry run changes no kernel
            load_modules(testbeds, lambda tb: _releases(tb, cells, opts))
        caps = _probe(testbeds, cells, opts)
        run = Run(opts, inventories[0], caps)
        plans = _plan(run, selected, paths)
        for sp in plans:
            for p in sp.planned:
                LOG.debug("plan %s/%s (config %s): %s%s", sp.name, p.cell.name, p.cell.config_hash, p.action,
                          f": {p.reason}" if p.reason else "")
        return _execute(run, plans, testbeds, debug)


def _known_kernel(opts: RunOptions, inventories: list[Inventory]) -> KnownKernel:
    """The testbed's kernel as known before it is built: a VM's release (and an image's
    modules), this machine's for namespaces; unknown for ssh hosts (probed later)."""
    if opts.vm is not None:
        image = load_image(opts.vm.image) if opts.vm.image and not opts.load_modules else None
        return KnownKernel(opts.vm.release, {m.name: m.sha256 for m in image.manifest.modules} if image else {})
    if inventories[0].backend == "ssh":
        return KnownKernel(None, {})
    return KnownKernel(platform.release(), {})


def _releases(tb: Testbed, cells: list[Cell], opts: RunOptions) -> set[str]:
    """The kernel releases of a testbed's hosts: a VM's, this machine's, or each ssh host's
    (probed)."""
    if opts.vm is not None:
        return {opts.vm.release}
    if tb.inv.backend == "netns":
        return this_machine()
    return {reply.kernel for reply in tb.probe(probe_request(cells)).values()}


def _one_kernel_per_testbed(opts: RunOptions, inventories: list[Inventory], cells: list[Cell]) -> None:
    """Module parameters are a kernel's: namespace testbeds on this machine share one, so
    cells that set them cannot run on several at once."""
    if len(inventories) > 1 and not opts.vm and inventories[0].backend != "ssh" \
            and (c := next((c for c in cells if c.config.module_params), None)):
        raise FlError(f"--parallel {len(inventories)}: cell {c.scenario}/{c.name} sets module_params, and the "
                      "namespace testbeds of one machine share its kernel; run it with --parallel 1, or with --vm "
                      "(a kernel per VM)")


def _check_readable(run_dir: Path, names: list[str]) -> None:
    """Results this fl cannot read (another version's) stop the run before any testbed is
    built or VM booted, naming the file (results/files.py)."""
    if (run_dir / run_folder.RUN_RECORD).is_file():
        files.read(RunRecord, run_dir / run_folder.RUN_RECORD)
    for name in names:
        ScenarioFolder(run_dir / name).records()


def _execute(run: Run, plans: list[ScenarioPlan], testbeds: list[Testbed], debug: log.DebugLog) -> int:
    to_run = [(sp, c) for sp in plans for c in sp.cells("run")]
    rv = run_vars([c for _, c in to_run], run.caps.feature("ifb") and run.caps.feature("u32_mirred"),
                  run.caps.feature("nftables"), dilation=run.dilation, shared_fs=run.inventory.shared_fs,
                  vm=run.opts.vm is not None)
    if run.opts.dry_run:
        from .dry_run import print_dry_run
        for sp in plans:
            print_dry_run(run, sp, rv)
        return 0
    for sp in plans:
        sp.store.root.mkdir(parents=True, exist_ok=True)
        _save_scenario(sp)
    LOG.debug("run-wide settings (fl_run): %s", json.dumps(rv.to_ansible(), sort_keys=True))
    LOG.debug("debug log: %s", debug.write_to(run.root))
    run.provenance = {"fl": fl_source(), "controller": controller(),
                      "testbeds": {tb.label: tb.id for tb in testbeds}}
    invocation = append_invocation(run, plans)
    records: list[CellRecord] = [_record_skip(run, sp, p) for sp in plans for p in sp.planned
                                 if p.action == "skip"]
    interrupted = False
    try:
        if to_run:
            ran = _run_cells(run, to_run, rv, testbeds)
            records += ran
            by_name = {(sp.name, c.name): c for sp, c in to_run}
            pace.record([(by_name[r.scenario, r.cell], r) for r in ran if (r.scenario, r.cell) in by_name],
                        _kind(run), len(testbeds))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        try:
            append_invocation(run, plans, invocation, records, interrupted)
        except OSError as e:  # the error that stopped the run (a full disk) says more
            LOG.warning("%s: run.json not updated: %s", run.root, e.strerror)
    return print_summary(plans, records, interrupted, vm_hint=run.opts.vm is None)


def _testbed_inventories(opts: RunOptions) -> list[Inventory]:
    """The inventory of each testbed the run uses: an ssh inventory's testbeds (up to
    --parallel), or N copies of a namespace testbed: on this machine each on subnets of its
    own, in VMs (one machine each) all alike."""
    found = load_testbeds(opts.inventory)
    if found[0].backend == "ssh":
        if opts.vm:
            raise FlError(f"--vm runs the namespace testbed in a VM; {opts.inventory} has ssh hosts")
        n = opts.parallel or len(found)
        if n > len(found):
            raise FlError(f"--parallel {n}: {opts.inventory} has {len(found)} testbed(s)")
        return found[:n]
    n = opts.parallel or 1
    if n < 1:
        raise FlError("--parallel: at least 1")
    cores = os.cpu_count() or 1
    if opts.vm and n > cores:
        LOG.warning("%d VMs on %d cores: each VM needs a core of its own; they will slow each other down "
                    "(results stay exact on the virtual clock)", n, cores)
    return [found[0] if opts.vm else moved(found[0], i) for i in range(n)]


def _testbeds(opts: RunOptions, inventories: list[Inventory], run_dir: Path, stack: ExitStack) -> list[Testbed]:
    """The run's testbeds, removed when the run ends whatever happens; VMs are booted (all
    at once) and ready for ssh."""
    log = run_dir / run_folder.FL_LOG
    if opts.vm:  # the guests write into it: it must exist before they boot
        made = not run_dir.exists()
        run_dir.mkdir(parents=True, exist_ok=True)

        def remove_if_empty() -> None:
            if made and not any(run_dir.iterdir()):
                run_dir.rmdir()
        stack.callback(remove_if_empty)
    many = len(inventories) > 1
    testbeds = []
    for i, inv in enumerate(inventories):
        label = (f"vm{i + 1}" if opts.vm else inv.name if inv.backend == "ssh" else f"ns{i + 1}") if many else ""
        testbeds.append(Testbed(inv, None, log, label, opts.vm, run_dir.resolve()))
    for tb in testbeds:
        stack.callback(tb.down)
    if opts.vm:
        cfg = opts.vm
        LOG.info("booting %d VM(s) with %s (%s, %s clock, %s vCPU, %s)", len(testbeds), cfg.release, cfg.accel,
                 cfg.clock, cfg.cpus, cfg.memory)
    for tb in testbeds:
        tb.boot()
    for tb in testbeds:
        tb.ready()
    return testbeds


def _probe(testbeds: list[Testbed], cells: list[Cell], opts: RunOptions) -> Capabilities:
    """What the testbeds' kernels can do: this machine's (namespaces), the VM guest's, or
    every ssh testbed's (they must agree: one run's results must not mix kernels)."""
    request = probe_request(cells)
    if opts.vm:
        caps = Capabilities(testbeds[0].probe(request)["nsroot"])
    elif testbeds[0].inv.backend == "netns":
        caps = probe_for(cells)
    else:
        found = [Capabilities(merge_hosts(tb.probe(request))) for tb in testbeds]
        kernels = {tb.inv.name: {h: f.model_dump() for h, f in c.reply.hosts.items()} for tb, c in zip(testbeds, found)}
        if len({json.dumps(k, sort_keys=True) for k in kernels.values()}) > 1:
            raise FlError(f"{opts.inventory}: the testbeds differ in kernel or tools, so their results "
                          f"would not be comparable: {kernels}")
        caps = found[0]
    LOG.debug("probed: kernel %s; tools %s; features %s", caps.kernel, json.dumps(caps.tools, sort_keys=True),
              caps.reply.features.model_dump_json(exclude_none=True) if caps.reply.features else None)
    if caps.error:
        raise FlError(caps.error)
    if missing := caps.missing_tools():
        raise FlError(f"missing tools: {', '.join(missing)} (./install.sh installs them)")
    return caps


def _plan(run: Run, selected: list[tuple[Scenario, list[Cell]]], paths: list[Path]) -> list[ScenarioPlan]:
    for (_, cells), path in zip(selected, paths):
        run.caps.check_specs(cells, path)
    plans = [ScenarioPlan(path, scenario_name(s), ScenarioFolder(run.root / scenario_name(s)), [])
             for (s, _), path in zip(selected, paths)]
    for sp, (_, cells) in zip(plans, selected):
        sp.planned = plan(cells, run.caps, sp.store, run.opts.force)
    if not any(sp.planned for sp in plans):
        raise FlError(f"--only {' '.join(run.opts.only)}: no cell of these scenarios matches")
    return plans


def _run_cells(run: Run, to_run: list[tuple[ScenarioPlan, Cell]], rv: RunVars,
               testbeds: list[Testbed]) -> list[CellRecord]:
    measured = pace.pace(_kind(run))
    queue = deque(sorted(to_run, key=lambda sc: -measured.cell_s(sc[1])))  # the longest first
    rv = rv.batched(len(queue) // BATCH + 2, BATCH)
    for tb in testbeds:
        tb.run_vars = rv
    progress = Progress([measured.cell_s(c, len(testbeds)) for _, c in queue], len(testbeds), guess=measured.guess)
    slots = [Slot(tb, _cell_limit(run), _stopwatch(tb)) for tb in testbeds]

    def start_cell(sp: ScenarioPlan, cell: Cell, tb: Testbed) -> Attempt:
        rec = _record(run, cell)
        on_testbed(rec, cell, tb)
        rec.started = time.time()
        attempt = Attempt(sp, cell, sp.store.new_partial(cell.name), rec, tb.label)
        tb.give(cell_vars(cell, tb.inv, tb.path_on_testbed(attempt.partial), not run.virtual_clock,
                          tcp_rewrite=run.caps.tcp_rewrite, run_vars=rv, scratch=tb.host_dirs))
        return attempt

    return Dispatch(slots, queue, start_cell, progress, host_wait_s=run.opts.host_wait_s).run_all()


def _kind(run: Run) -> str:
    """The kind of testbed the run's pace is kept for (pace.py)."""
    return pace.kind_of(run.opts.vm.accel if run.opts.vm else None, run.inventory.backend)


def _stopwatch(tb: Testbed) -> Callable[[], Callable[[], float]]:
    """How a cell's time on TB is counted: on a VM's virtual clock in the CPU time its QEMU
    got (vm.py: a busy machine slows a guest without hanging it), else in wall seconds."""
    vm = tb.vm
    if vm is not None and vm.cfg.virtual_clock:
        return vm.stopwatch
    return wall_stopwatch


def _cell_limit(run: Run) -> Callable[[Cell], float]:
    """Seconds a cell may take before its testbed is taken for hung (_stopwatch's)."""
    vm = run.opts.vm

    def limit(cell: Cell) -> float:
        flent = cell.config.flent_s
        if vm:
            return vm.cell_limit(flent, cell.config.bottleneck.max_rate_bps, cell.config.step_size)
        return flent + HOST_CELL_MARGIN
    return limit


def _record(run: Run, cell: Cell, status: str = "ok", reason: str = "") -> CellRecord:
    return CellRecord(
        scenario=cell.scenario, cell=cell.name, config_hash=cell.config_hash, status=status,
        reason=reason, coordinates=cell.coordinates(), swept=list(cell.swept), config=cell.config,
        backend=backend_record(run), kernel=run.caps.kernel, tools=run.caps.tools,
        cc_modules=cell_cc_modules(run, cell),
        fl=run.provenance.get("fl", {}))


def cell_cc_modules(run: Run, cell: Cell) -> dict[str, CcModule]:
    """The congestion-control modules the cell's flows ran, with the parameters it had
    them run with: the probe's, its own module_params in place."""
    params = cell.config.module_params or {}
    return {cc: m.model_copy(update={"parameters": {**m.parameters, **params.get(m.module, {})}})
            for f in cell.config.kernel_flows for cc in f.ccs if (m := run.caps.cc_module(cc))}


def _record_skip(run: Run, sp: ScenarioPlan, p: PlannedCell) -> CellRecord:
    rec = _record(run, p.cell, "skipped", p.reason)
    rec.started = rec.ended = time.time()
    sp.store.commit(sp.store.new_partial(p.cell.name), rec)
    return rec


def _save_scenario(sp: ScenarioPlan) -> bool:
    """The scenario as run (extends merged), next to its cells; whether that changed it."""
    merged = read_merged(sp.path)
    merged.pop("extends", None)  # merged in: the copy stands alone
    text = f"# {sp.path} as read by fl (extends merged)\n" + yaml.safe_dump(
        merged, sort_keys=False, allow_unicode=True)
    saved = sp.store.root / run_folder.SCENARIO
    if saved.is_file() and saved.read_text() == text:
        return False
    saved.write_text(text)
    return True
