"""The kernel probe (probe.py) run on a testbed's hosts through Ansible, where fl cannot
run it in-process (ssh hosts, a VM guest), and the hosts' answers merged into one view."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import FlError
from . import probe
from .ansible import run_playbook


def probe_hosts(inventory: Path, request: dict[str, Any], on: str, log: Path) -> dict[str, dict[str, Any]]:
    """The probe run through Ansible on the hosts of group ON (testbed: ssh hosts; nsroot:
    a VM guest), per host."""
    result = run_playbook("probe", inventory, {
        "fl_probe_script": probe.__file__, "fl_probe_request": request, "fl_probe_on": on}, log)
    if not result.ok:
        raise FlError(f"probing the testbed hosts failed: {result.reason()}")
    found = {}
    for host, printed in result.outputs.get("fl_probe_out", {}).items():
        try:
            found[host] = json.loads(printed)
        except json.JSONDecodeError:
            raise FlError(f"the probe on {host} printed no JSON ({printed[:200]!r}); see {log}") from None
    return found


def merge_hosts(per_host: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One view of a testbed of separate hosts: the middlebox's qdiscs and features, a CC
    only if both endpoints have it, a sysctl or tool only if every host has it."""
    mid = per_host["mid"]
    ends = [per_host["cli"], per_host["srv"]]
    hosts = list(per_host.values())
    merged = dict(mid)
    merged["ccs"] = {c: all(e.get("ccs", {}).get(c) for e in ends) for c in mid.get("ccs", {})}
    merged["sysctls"] = {k: all(h.get("sysctls", {}).get(k) for h in hosts) for k in mid.get("sysctls", {})}
    merged["sysctl_sets"] = {s: next((h["sysctl_sets"][s] for h in hosts if h.get("sysctl_sets", {}).get(s)), "")
                             for s in mid.get("sysctl_sets", {})}
    merged["tools"] = {t: v if all(h.get("tools", {}).get(t) for h in hosts) else None
                       for t, v in per_host["cli"].get("tools", {}).items()}
    merged["cc_modules"] = per_host["cli"].get("cc_modules", {})  # the client's: it sends the flows
    merged["root"] = all(h.get("root") for h in hosts)
    merged["error"] = next((f"{n}: {h['error']}" for n, h in per_host.items() if h.get("error")), None)
    merged["hosts"] = {n: {"kernel": h.get("kernel"), "tools": h.get("tools")} for n, h in per_host.items()}
    return merged
