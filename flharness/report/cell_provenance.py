"""Where a run's numbers come from, for the index header, read from its cells' own records:
a run folder resumed across sessions holds cells of several fl commits, kernels, backends
and tool versions, and the header gives each value with how many cells it produced
(run.json's last invocation would name only the newest). A run with no cell that reached
a testbed shows that last invocation's."""
from __future__ import annotations

from collections import Counter
from typing import Any, Protocol

from ..results.cell_record import Backend, FlSource
from .collect import RunResult
from .host_settings import with_counts


class _Source(Protocol):
    """What a cell record and a run.json invocation both record."""

    fl: FlSource
    kernel: str
    backend: Backend
    tools: dict[str, str | None]


def describe_fl(fl: FlSource) -> str:
    commit = fl.commit or f"version {fl.version or '?'} (no commit recorded)"
    return f"{commit} (with uncommitted changes)" if fl.dirty else commit


def describe_backend(b: Backend) -> str:
    out = f"vm ({b.accel}, {b.clock} clock)" if b.kind == "vm" else f"{b.kind} ({b.testbed} testbed)"
    if b.image:
        out += f", image {b.image}"
    if b.append:
        out += f"; kernel command line: `{b.append}`"
    return out


def cell_provenance(result: RunResult) -> dict[str, Any]:
    """{'cells': n, 'rows': {'fl', 'kernel', 'backend', 'tools': text}}, each value with its
    cell count where the cells differ; n 0 and the last invocation's values when no cell
    reached a testbed; {} when run.json records no invocation either."""
    ran: list[_Source] = [c.record for c in result.cells() if c.status != "skipped" and c.record.kernel]
    sources = ran or result.provenance.invocations[-1:]
    if not sources:
        return {}
    n = len(sources)
    tools: dict[str, Counter[str]] = {}
    for s in sources:
        for name, version in s.tools.items():
            tools.setdefault(name, Counter())[version or "?"] += 1
    return {"cells": len(ran), "rows": {
        "fl": with_counts(Counter(describe_fl(s.fl) for s in sources), n),
        "kernel": with_counts(Counter(s.kernel for s in sources), n),
        "backend": with_counts(Counter(describe_backend(s.backend) for s in sources), n),
        "tools": ", ".join(f"{name} {with_counts(tools[name], n)}" for name in sorted(tools))}}
