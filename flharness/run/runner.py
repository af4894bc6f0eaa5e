"""`fl run`: plan the cells (resume, kernel support), build the testbed, run each cell."""
from __future__ import annotations

import fnmatch
import json
import signal
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import yaml

from .. import REPO
from ..capabilities import Capabilities, probe_for
from ..cells import Cell, expand
from ..errors import FlError
from ..provenance import controller, fl_source
from ..results import CellRecord, ScenarioResults, write_json
from ..scenario import load_scenario
from ..scenario.load import read_merged
from ..scenario.values import check_name
from ..testbed.inventory import Inventory, load_inventory
from ..testbed.plan import cell_vars, estimated_seconds, run_vars
from ..testbed.testbed import Testbed
from ..units import human_duration
from .evaluate import Verdict, evaluate
from .progress import Progress

CELL_OVERHEAD = 12.0  # seconds of Ansible setup and collection per cell, for estimates
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


@dataclass(frozen=True)
class Planned:
    cell: Cell
    action: str  # 'run', 'skip' (kernel cannot), 'done' (completed earlier, same config)
    reason: str = ""


@dataclass
class Context:
    """What every cell of one `fl run` shares."""

    path: Path
    opts: RunOptions
    inventory: Inventory
    caps: Capabilities
    store: ScenarioResults
    provenance: dict

    @property
    def dilation(self) -> float:
        """Timeouts are stretched on QEMU's virtual clock (I/O waits skip guest time)."""
        return VIRTUAL_CLOCK_DILATION if (self.opts.backend or {}).get("clock") == "virtual" else 1.0

    @property
    def control_port(self) -> int:
        return int(self.inventory.hostvars["cli"]["fl_netperf_port"])


def select(cells: list[Cell], patterns: list[str]) -> list[Cell]:
    """--only: glob patterns (*, ?, [..]) or plain substrings of cell names."""
    if not patterns:
        return cells
    def hit(p: str, name: str) -> bool:
        return fnmatch.fnmatchcase(name, p) if any(ch in p for ch in "*?[") else p in name
    chosen = [c for c in cells if any(hit(p, c.name) for p in patterns)]
    if not chosen:
        raise FlError(f"--only {' '.join(patterns)}: no cell matches (cells look like {cells[0].name})")
    return chosen


def prepare(path: Path, opts: RunOptions) -> tuple[Context, list[Planned]]:
    """Everything that can fail on bad input, before anything is configured."""
    check_run_name(opts.run)
    scenario = load_scenario(path)
    cells = select(expand(scenario, path), opts.only)
    inventory = load_inventory(opts.inventory)
    caps = probe_for(cells)
    if caps.data.get("error"):
        raise FlError(caps.data["error"])
    if missing := caps.missing_tools():
        raise FlError(f"missing tools: {', '.join(missing)} (sudo ./install.sh installs them)")
    caps.check_specs(path)
    store = ScenarioResults(opts.results / opts.run / (scenario.name or path.stem))
    ctx = Context(path, opts, inventory, caps, store, {})
    return ctx, plan(cells, caps, store, opts.force)


def check_run_name(name: str) -> None:
    try:
        check_name(name, "run name")
    except ValueError as e:
        raise FlError(f"--run: {e}") from None


def plan(cells: list[Cell], caps: Capabilities, store: ScenarioResults, force: bool) -> list[Planned]:
    out = []
    for cell in cells:
        if not force and store.is_done(cell.name, cell.config_hash):
            out.append(Planned(cell, "done", "completed earlier with the same configuration"))
        elif (why := caps.unsupported(cell)) is not None:
            out.append(Planned(cell, "skip", why))
        else:
            out.append(Planned(cell, "run"))
    return out


def run_scenario(path: Path, opts: RunOptions) -> int:
    ctx, planned = prepare(path, opts)
    to_run = [p.cell for p in planned if p.action == "run"]
    rv = run_vars(to_run, ctx.caps.feature("ifb") and ctx.caps.feature("u32_mirred"),
                  ctx.caps.feature("nftables"), dilation=ctx.dilation,
                  emulated=(opts.backend or {}).get("accel") == "tcg")
    if opts.dry_run:
        from .dry_run import print_dry_run
        print_dry_run(ctx, planned, rv)
        return 0
    ctx.store.root.mkdir(parents=True, exist_ok=True)
    _save_scenario(ctx)
    ctx.provenance = {"fl": fl_source(), "controller": controller()}
    invocation = _start_invocation(ctx, planned)
    records: list[CellRecord] = [_record_skip(ctx, p) for p in planned if p.action == "skip"]
    interrupted = False
    try:
        if to_run:
            records += _run_cells(ctx, to_run, rv)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        _finish_invocation(ctx, invocation, planned, records, interrupted)
    return print_summary(ctx, planned, records, interrupted)


def _run_cells(ctx: Context, cells: list[Cell], rv: dict) -> list[CellRecord]:
    progress = Progress([estimated_seconds(c, CELL_OVERHEAD) for c in cells])
    records: list[CellRecord] = []
    log = ctx.store.root / "fl.log"
    with _signals_as_interrupt(), Testbed(ctx.inventory, rv, log) as tb:
        ctx.provenance["testbed"] = tb.id
        for cell in cells:
            records.append(_run_cell(ctx, tb, cell, progress))
    return records


def _run_cell(ctx: Context, tb: Testbed, cell: Cell, progress: Progress) -> CellRecord:
    partial = ctx.store.new_partial(cell.name)
    cv = cell_vars(cell, ctx.inventory, partial, ctx.dilation)
    rec = _base_record(ctx, cell)
    rec.started = time.time()
    progress.start(cell.name)
    try:
        verdict = evaluate(cell, partial, tb.run_cell(cv), ctx.control_port)
    except KeyboardInterrupt:
        rec.status, rec.reason, rec.ended = "interrupted", "interrupted (SIGINT/SIGTERM)", time.time()
        with _no_interrupts():
            ctx.store.commit(partial, rec)
        progress.finish(cell.name, "stopped", rec.ended - rec.started)
        raise
    rec.status, rec.reason, rec.checks, rec.ended = verdict.status, verdict.reason, verdict.checks, time.time()
    with _no_interrupts():
        ctx.store.commit(partial, rec)
    progress.finish(cell.name, rec.status, rec.ended - rec.started, _detail(cell, verdict))
    return rec


def _detail(cell: Cell, verdict: Verdict) -> str:
    if verdict.status != "ok":
        return verdict.reason[:200]
    util = verdict.checks.get("utilisation_up")
    return f"{util:.1%} of {cell.up.rate.text} up" if util is not None else ""


def _base_record(ctx: Context, cell: Cell, status: str = "ok", reason: str = "") -> CellRecord:
    return CellRecord(
        scenario=cell.scenario, cell=cell.name, config_hash=cell.config_hash, status=status,
        reason=reason, coordinates=cell.coordinates(), swept=list(cell.swept), config=cell.config,
        backend=_backend(ctx),
        kernel=ctx.caps.kernel, tools=ctx.caps.tools, fl=ctx.provenance.get("fl", {}))


def _backend(ctx: Context) -> dict:
    """Where a cell ran: the testbed (namespaces or ssh hosts) and, in a guest, the VM."""
    base = {"testbed": ctx.inventory.backend, "inventory": str(ctx.inventory.path),
            "testbed_id": ctx.provenance.get("testbed")}
    return {**base, **ctx.opts.backend} if ctx.opts.backend else {**base, "kind": "host", "clock": "real"}


def _record_skip(ctx: Context, p: Planned) -> CellRecord:
    rec = _base_record(ctx, p.cell, "skipped", p.reason)
    rec.started = rec.ended = time.time()
    ctx.store.commit(ctx.store.new_partial(p.cell.name), rec)
    return rec


def _save_scenario(ctx: Context) -> None:
    """The scenario as run (extends merged), next to its cells."""
    text = f"# {ctx.path} as read by fl (extends merged)\n" + yaml.safe_dump(
        read_merged(ctx.path), sort_keys=False, allow_unicode=True)
    (ctx.store.root / "scenario.yml").write_text(text)


def _start_invocation(ctx: Context, planned: list[Planned]) -> dict:
    inv = {"started": time.time(), "scenario": ctx.store.root.name, "kernel": ctx.caps.kernel,
           "backend": _backend(ctx), "only": ctx.opts.only, "force": ctx.opts.force,
           "planned": {a: sum(p.action == a for p in planned) for a in ("run", "skip", "done")},
           **ctx.provenance, "tools": ctx.caps.tools}
    _append_run_json(ctx, inv)
    return inv


def _finish_invocation(ctx: Context, inv: dict, planned: list[Planned], records: list[CellRecord],
                       interrupted: bool) -> None:
    inv["ended"] = time.time()
    inv["testbed"] = ctx.provenance.get("testbed")
    inv["interrupted"] = interrupted
    inv["outcome"] = {s: sum(r.status == s for r in records) for s in ("ok", "failed", "skipped", "interrupted")}
    _append_run_json(ctx, inv, replace_last=True)


def _append_run_json(ctx: Context, entry: dict, replace_last: bool = False) -> None:
    path = ctx.store.root.parent / "run.json"
    data = json.loads(path.read_text()) if path.is_file() else {"run": ctx.opts.run, "invocations": []}
    if replace_last and data["invocations"]:
        data["invocations"][-1] = entry
    else:
        data["invocations"].append(entry)
    write_json(path, data)


def print_summary(ctx: Context, planned: list[Planned], records: list[CellRecord], interrupted: bool) -> int:
    by = {s: [r for r in records if r.status == s] for s in ("ok", "failed", "skipped", "interrupted")}
    done = [p for p in planned if p.action == "done"]
    print(f"\n{ctx.store.root.name}: {len(planned)} cells — {len(by['ok'])} ok, {len(by['failed'])} failed, "
          f"{len(by['skipped'])} skipped, {len(done)} already done"
          + (", interrupted" if interrupted else ""))
    for status in ("skipped", "failed", "interrupted"):
        for r in by[status]:
            print(f"  {status:<11} {r.cell}: {r.reason}")
    print(f"results: {ctx.store.root}")
    if interrupted:
        return 130
    return 1 if by["failed"] else 0


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


def estimate_total(cells: list[Cell]) -> str:
    return human_duration(sum(estimated_seconds(c, CELL_OVERHEAD) for c in cells))
