"""results/<run>/run.json: one entry per `fl run` invocation (who, where, what, outcome)."""
from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from ..results import CellRecord, write_json

if TYPE_CHECKING:
    from .planning import ScenarioPlan
    from .runner import Run


def backend_record(run: Run) -> dict[str, Any]:
    """Where cells ran: the testbed (namespaces or ssh hosts) and the VM, if any."""
    base = {"testbed": run.inventory.backend, "inventory": str(run.inventory.path)}
    if run.opts.vm:
        return {**base, **run.opts.vm.describe()}
    return {**base, "kind": "host", "clock": "real"}


def append_invocation(run: Run, plans: list[ScenarioPlan], entry: dict | None = None,
                      records: list[CellRecord] | None = None, interrupted: bool = False) -> dict:
    """Add this invocation to run.json (entry None), or complete the entry added before."""
    if entry is None:
        entry = {"started": time.time(), "scenarios": [sp.name for sp in plans],
                 "kernel": run.caps.kernel, "only": run.opts.only, "force": run.opts.force,
                 "planned": {a: sum(len(sp.cells(a)) for sp in plans) for a in ("run", "skip", "done")},
                 **run.provenance, "tools": run.caps.tools}
    else:
        entry.update(ended=time.time(), interrupted=interrupted,
                     outcome={s: sum(r.status == s for r in records or [])
                              for s in ("ok", "failed", "skipped", "interrupted")})
    entry["backend"] = backend_record(run)
    path = run.root / "run.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(path.read_text()) if path.is_file() else {"run": run.opts.run, "invocations": []}
    if data["invocations"] and data["invocations"][-1].get("started") == entry["started"]:
        data["invocations"][-1] = entry
    else:
        data["invocations"].append(entry)
    write_json(path, data)
    return entry
