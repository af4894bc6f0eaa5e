"""results/<run>/run.json: one entry per `fl run` invocation (who, where, what, outcome);
and what each cell's record says of the backend and testbed it ran on."""
from __future__ import annotations

import time

from ..cells import Cell
from ..results import files, run_folder
from ..results.cell_record import Backend, BottleneckPorts, CellRecord, Endpoints
from ..results.run_record import Invocation, Outcome, Planned, RunRecord
from ..testbed.commands import ports
from ..testbed.plan import target
from ..testbed.testbed import Testbed
from .context import Run
from .planning import ScenarioPlan


def backend_record(run: Run) -> Backend:
    """Where cells ran: the testbed (namespaces or ssh hosts) and the VM, if any."""
    base = {"testbed": run.inventory.backend, "inventory": str(run.inventory.path)}
    if run.opts.vm:
        return Backend.model_validate(base | run.opts.vm.describe())
    return Backend.model_validate(base | {"kind": "host", "clock": "real"})


def on_testbed(record: CellRecord, cell: Cell, tb: Testbed) -> None:
    """Record the testbed that runs the cell, and what the analysis needs of it: the
    server's address, netperf's control port and the middlebox's bottleneck ports, as
    the cell's commands name them (they differ between testbeds)."""
    record.backend = record.backend.on_testbed(tb.id, tb.label)
    record.endpoints = Endpoints(server=target(cell, tb.inv), netperf_port=tb.inv.netperf_port)
    record.ports = BottleneckPorts.model_validate(ports(tb.inv).queues)


def append_invocation(run: Run, plans: list[ScenarioPlan], entry: Invocation | None = None,
                      records: list[CellRecord] | None = None, interrupted: bool = False) -> Invocation:
    """Add this invocation to run.json (entry None), or complete the entry added before."""
    if entry is None:
        entry = Invocation.model_validate({
            "started": time.time(), "scenarios": [sp.name for sp in plans], "kernel": run.caps.kernel,
            "only": run.opts.only, "force": run.opts.force,
            "planned": Planned(**{a: sum(len(sp.cells(a)) for sp in plans) for a in ("run", "skip", "done")}),
            **run.provenance, "tools": run.caps.tools, "backend": backend_record(run)})
    else:
        entry.ended, entry.interrupted = time.time(), interrupted
        entry.outcome = Outcome(**{s: sum(r.status == s for r in records or [])
                                   for s in ("ok", "failed", "skipped", "interrupted")})
    path = run.root / run_folder.RUN_RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    record = files.read(RunRecord, path) if path.is_file() else RunRecord(run=run.opts.run)
    record.add(entry)
    files.write(path, record)
    return entry
