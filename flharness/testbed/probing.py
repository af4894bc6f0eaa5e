"""The kernel probe (probe.py) run on a testbed's hosts through Ansible, where fl cannot
run it in-process (ssh hosts, a VM guest), and the hosts' answers merged into one view."""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import FlError
from ..programs import PROBE, probe
from .ansible import run_playbook
from .playbook_vars import Hosts, ProbeVars
from .probe_reply import HostFacts, ProbeReply, parse_reply

#: Seconds the probe may take on a host, on the controller's clock: a bound for a guest on
#: the virtual clock, where its own commands run without one (probe.COMMAND_TIMEOUT_S).
PROBE_TIMEOUT_S = 600


def probe_hosts(inventory: Path, request: probe.Request, on: Hosts, log: Path) -> dict[str, ProbeReply]:
    """The probe run through Ansible on the hosts of group ON (testbed: ssh hosts; nsroot:
    a VM guest), per host, each reply checked."""
    handed = ProbeVars(fl_probe_on=on, fl_probe_script=str(PROBE), fl_probe_request=dict(request),
                       fl_probe_timeout_s=PROBE_TIMEOUT_S)
    result = run_playbook("probe", inventory, handed.to_ansible(), log)
    if not result.ok:
        raise FlError(f"probing the testbed hosts failed: {result.reason()}")
    found = {}
    for host, printed in result.outputs.get("fl_probe_out", {}).items():
        try:
            data = json.loads(printed)
        except json.JSONDecodeError:
            raise FlError(f"the probe on {host} printed no JSON ({printed[:200]!r}); see {log}") from None
        found[host] = parse_reply(data, host)
    return found


def merge_hosts(per_host: dict[str, ProbeReply]) -> ProbeReply:
    """One view of a testbed of separate hosts: the middlebox's qdiscs and features, a CC
    only if both endpoints have it, a sysctl or tool only if every host has it."""
    mid, cli = per_host["mid"], per_host["cli"]
    ends = [cli, per_host["srv"]]
    hosts = list(per_host.values())
    return mid.model_copy(update={
        "ccs": {c: all(e.ccs.get(c) is True for e in ends) for c in mid.ccs},
        "sysctls": {k: all(h.sysctls.get(k) is True for h in hosts) for k in mid.sysctls},
        "sysctl_sets": {s: next((h.sysctl_sets[s] for h in hosts if h.sysctl_sets.get(s)), "") for s in mid.sysctl_sets},
        "tools": {t: v if all(h.tools.get(t) for h in hosts) else None for t, v in cli.tools.items()},
        "cc_modules": cli.cc_modules,  # the client's: it sends the flows
        "cc_errors": {c: f"{n}: {why}" for n, h in per_host.items() for c, why in h.cc_errors.items()},
        "programs": {p: all(e.programs.get(p) is True for e in ends) for p in cli.programs},
        "root": all(h.root for h in hosts),
        "error": next((f"{n}: {h.error}" for n, h in per_host.items() if h.error), None),
        "hosts": {n: HostFacts(kernel=h.kernel, tools=h.tools) for n, h in per_host.items()},
    })
