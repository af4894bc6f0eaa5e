"""The hosts' settings as the run's cells found them, for the index header (as Pantheon's
report header lists its hosts' sysctls): each TCP and core sysctl read back on each host
after each test, and the root qdisc of each endpoint interface (the sender's own queue:
noqueue, fq for pacing, …), with how many cells saw each value."""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any

from ..analysis.cell_files import CellFiles
from ..analysis.teardown_log import device_blocks, sysctl_values
from ..hosts import ENDPOINTS, HOSTS
from .collect import RunResult

_ROOT_QDISC_RE = re.compile(r"^qdisc (\S+) \S+ root\b", re.M)


def host_settings(result: RunResult) -> dict[str, Any]:
    """{'hosts': [...], 'rows': [{'setting', 'values': {host: value}}]}: a value with its
    cell count where the cells differ, '' where a host has no such setting."""
    seen: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    cells = 0
    for c in result.cells():
        sections = CellFiles.of(c.dir, c.record).sections if c.status != "skipped" else {}
        if not sections:
            continue
        cells += 1
        for host, section in sections.items():
            for key, value in sysctl_values(section).items():
                seen[(host, key)][value] += 1
            if host in ENDPOINTS:
                for dev, block in device_blocks(section).items():
                    if root := _ROOT_QDISC_RE.search(block):
                        seen[(host, f"root qdisc of {dev}")][root.group(1)] += 1
    hosts = sorted({host for host, _ in seen}, key=lambda h: (h not in HOSTS, HOSTS.index(h) if h in HOSTS else h))
    settings = sorted({key for _, key in seen}, key=lambda k: (k.startswith("root qdisc"), k))
    return {"hosts": hosts, "rows": [{"setting": key, "values": {h: with_counts(seen[(h, key)], cells) if (h, key) in seen
                                                                   else "" for h in hosts}} for key in settings]}


def with_counts(counts: Counter[str], cells: int) -> str:
    """The one value all CELLS had, or each value with how many of them had it."""
    if len(counts) == 1 and sum(counts.values()) == cells:
        return next(iter(counts))
    return "; ".join(f"{v} ({n} of {cells} cells)" for v, n in counts.most_common())
