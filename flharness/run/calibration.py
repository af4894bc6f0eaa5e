"""Did the cell's path behave as declared? A verdict per cell (cell.json's
checks.calibration, shown in the index with ⚑): each check that failed is a reason.

* base RTT: Flent's idle ping before the flows start against the declared RTT of flow
  1 (the path unmarked traffic takes), within ±(1 ms + 2 %); not judged with netem
  features (jitter, loss) on the path;
* the captures: tcpdump's "dropped by kernel" on each host (a capture that lost
  packets undercounts everything measured from it);
* CPU: the per-core counters the ss sampler recorded each second; a core more than
  95 % busy for over 10 % of the test caps what namespaces can carry (niced time that
  cgroups with cpu.idle used counts as idle: the kernel runs them only on cores nothing
  else wants); a machine whose hypervisor took over 5 % of a core's time (steal) ran the
  shaper's timers late;
* netem's limit holds the delay line (rate × the longest one-way delay, in packets);
* offloads: TSO, GSO and GRO read back as off on every fl interface after the test
  (the teardown log), so the bottleneck and the captures saw wire-size packets;
* every host's state was recorded after the test (else the checks above are blind there);
* every declared path feature took effect (effects/: ECN rewrites, netem loss, the rate
  schedule, the tunnel, sysctls, the client's qdisc), each seen in the captures or the
  kernel's own counters.
"""
from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from ..analysis.cell_files import CellFiles
from ..frames import FRAME_BYTES
from ..hosts import HOSTS
from ..results import cell_folder
from ..results.cell_record import Calibration
from ..results.flags import Flag, calibration_flag
from ..teardown_format import COMMAND_PREFIX
from ..testbed.commands import NETEM_LIMIT
from .effects import effects

BASE_RTT_TOLERANCE = (1.0, 0.02)  # ms, share of the declared RTT
CPU_BUSY, CPU_BUSY_SHARE = 0.95, 0.10
#: Steal above this share of the test costs HTB's rate (CI measured: 10 % of the CPU
#: stolen, 95 % of a 20 Mbit/s link's capacity delivered; 35 %, 72 %; under 3 %, 99 %).
STOLEN_SHARE = 0.05
USER_HZ = os.sysconf("SC_CLK_TCK")  # /proc/stat's tick
_DROPS_RE = re.compile(r"^(\d+) packets dropped by kernel$", re.M)
_OFFLOAD_RE = re.compile(r"^(\S+) (tcp-segmentation|generic-segmentation|generic-receive)-offload: (on|off)", re.M)


def calibration(files: CellFiles) -> Calibration:
    """The verdict on a finished cell (its Flent data read: FILES.flent)."""
    assert files.flent is not None
    reasons: list[Flag] = []
    config = files.config
    base, declared = _base_rtt(files.flent, files.lead_s), config.flows[0].rtt_ms
    if config.netem is None and base is not None and abs(base - declared) > _rtt_tolerance(declared):
        reasons.append(calibration_flag("base_rtt", f"base RTT {base:.2f} ms, declared {declared:g} ms"))
    drops = capture_drops(files.sections)
    reasons += [calibration_flag("capture_drops", f"{host}'s capture dropped {n} packets")
                for host, n in drops.items() if n]
    saturated: dict[str, float] = {}
    stolen: dict[str, float] = {}
    for host in ("cli", "srv"):
        if (log := files.text(cell_folder.ss_log(host))) is not None:
            spans = cpu_intervals(log, *files.test_window)
            saturated.update({f"{host} {core}": share for core, share in saturated_share(spans).items()})
            stolen.update({f"{host} {core}": share for core, share in stolen_share(spans).items()})
    reasons += [calibration_flag("cpu_busy", f"CPU {core} more than {CPU_BUSY:.0%} busy for {share:.0%} of the test")
                for core, share in saturated.items() if share > CPU_BUSY_SHARE]
    reasons += _stolen(stolen)
    offloads = offloads_on(files.sections)
    reasons += [calibration_flag("offloads", f"offloads on: {', '.join(offloads)}")] if offloads else []
    if unrecorded := unrecorded_hosts(files.sections):
        reasons.append(calibration_flag("unrecorded", f"no state recorded after the test on {', '.join(unrecorded)}"))
    in_flight = config.bottleneck.max_rate_bps * config.max_rtt_s / 8 / FRAME_BYTES
    if in_flight > NETEM_LIMIT:
        reasons.append(calibration_flag(
            "netem_limit", f"netem limit {NETEM_LIMIT} packets is below the delay line ({in_flight:.0f})"))
    seen = effects(files)
    reasons += [calibration_flag("effect_missing", f"{e.feature}: {e.evidence}") for e in seen if not e.ok]
    return Calibration(base_rtt_ms=base, declared_rtt_ms=declared, capture_drops=drops, cpu_saturated=saturated,
                       cpu_stolen=stolen,
                       offloads_on=offloads, effects=seen, reasons=reasons, ok=not reasons)


def _stolen(stolen: dict[str, float]) -> list[Flag]:
    """One reason when the hypervisor took more than STOLEN_SHARE of a core's time (the
    testbed's hosts share the machine's cores: the worst core speaks for them)."""
    worst = max(stolen, key=stolen.__getitem__, default=None)
    if worst is None or stolen[worst] <= STOLEN_SHARE:
        return []
    return [calibration_flag("cpu_stolen", f"the hypervisor took {stolen[worst]:.0%} of CPU {worst}'s time (steal) "
                             "during the test: the shaper's and the endpoints' timers ran late, rates and delays are off")]


def _rtt_tolerance(declared_ms: float) -> float:
    absolute, share = BASE_RTT_TOLERANCE
    return absolute + share * declared_ms


def _base_rtt(data: dict[str, Any], lead: float) -> float | None:
    """Median idle ping (ms) of the lead-in (LEAD s), before any flow starts."""
    values = data.get("results", {}).get("Ping (ms) ICMP") or []
    idle = sorted(v for t, v in zip(data.get("x_values", []), values) if v is not None and t < lead - 0.5)
    return idle[len(idle) // 2] if idle else None


def capture_drops(sections: dict[str, str]) -> dict[str, int]:
    """tcpdump's "packets dropped by kernel" per host (SECTIONS: the teardown log's)."""
    return {host: sum(int(n) for n in _DROPS_RE.findall(body)) for host, body in sections.items()
            if _DROPS_RE.search(body)}


def offloads_on(sections: dict[str, str]) -> list[str]:
    """"host dev offload" for each offload read back as on in the teardown log."""
    return [f"{host} {dev} {kind}-offload" for host, body in sections.items()
            for dev, kind, state in _OFFLOAD_RE.findall(body) if state == "on"]


def unrecorded_hosts(sections: dict[str, str]) -> list[str]:
    """Hosts whose part of the teardown log has no command in it (their collection
    printed nothing, or failed): capture drops and offloads went unchecked there."""
    return [h for h in HOSTS if COMMAND_PREFIX not in sections.get(h, "")]


#: Per core: (ticks, idle + iowait ticks, steal ticks, ticks of idle-class work) of each
#: sampling interval.
CpuSpans = dict[str, list[tuple[int, int, int, float]]]


def saturated_share(spans: CpuSpans) -> dict[str, float]:
    """Per core: the share of the sampling intervals in which it was more than CPU_BUSY
    busy (idle-class work's time counted as idle)."""
    return {core: sum(1 - (idle + free) / total > CPU_BUSY for total, idle, _, free in s) / len(s)
            for core, s in spans.items()}


def stolen_share(spans: CpuSpans) -> dict[str, float]:
    """Per core: the share of its time that the hypervisor gave to another guest
    (/proc/stat's steal): the machine's own timers, the shaper's among them, ran late by
    as much."""
    return {core: sum(x[2] for x in s) / sum(x[0] for x in s) for core, s in spans.items()}


@dataclass
class _Sample:
    t: float
    cores: dict[str, list[int]] = field(default_factory=dict)  # cpuN → /proc/stat's counters
    idle_ns: dict[str, int] = field(default_factory=dict)  # idle cgroup → its CPU time so far


def _samples(ss_log: str, start: float, end: float) -> list[_Sample]:
    """The ss sampler's samples within [START, END] (epoch s): "# TIME", then "% cpuN
    user nice system idle iowait irq softirq steal …" and "% idle CGROUP NS" lines."""
    samples: list[_Sample] = []
    for line in ss_log.splitlines():
        if line.startswith("# "):
            with contextlib.suppress(ValueError):
                samples.append(_Sample(float(line[2:])))
        elif line.startswith("% ") and samples:
            with contextlib.suppress(ValueError, IndexError):
                name, *numbers = line[2:].split()
                if name == "idle":
                    samples[-1].idle_ns[numbers[0]] = int(numbers[1])
                elif name.startswith("cpu"):
                    samples[-1].cores[name] = [int(n) for n in numbers]
    return [s for s in samples if start <= s.t <= end]


def cpu_intervals(ss_log: str, start: float, end: float) -> CpuSpans:
    """Per core, each sampling interval within [START, END] (epoch s), from the ss
    sampler's lines in SS_LOG. Idle-class work (cgroups with cpu.idle: the sampler's
    "% idle" lines) is run niced (.ci/in-idle-cgroup): its CPU time in the interval is
    shared among the cores in proportion to their niced time, up to all of it."""
    out: CpuSpans = {}
    def fields(ticks: list[int]) -> tuple[int, int, int, int]:
        ticks = ticks[:8] + [0] * (8 - len(ticks[:8]))
        return sum(ticks), ticks[3] + ticks[4], ticks[7], ticks[1]
    for a, b in pairwise(_samples(ss_log, start, end)):
        deltas = {core: [y - x for x, y in zip(fields(a.cores[core]), fields(b.cores[core]))]
                  for core in a.cores.keys() & b.cores.keys()}
        idle_class = sum(b.idle_ns[g] - a.idle_ns[g] for g in a.idle_ns.keys() & b.idle_ns.keys()) / 1e9 * USER_HZ
        niced = sum(d[3] for d in deltas.values())
        credit = min(1.0, idle_class / niced) if niced > 0 else 0.0
        for core, (total, idle, steal, nice) in deltas.items():
            if total > 0:
                out.setdefault(core, []).append((total, idle, steal, nice * credit))
    return out
