"""Features the hosts' state after the test shows (the teardown log): the rate schedule
(its own log of each step, what tc printed, the bottleneck class's rate at the end), the
tunnel (its device's packet counters on both ends), the sysctls and module parameters
(read back), the client's qdisc (its counters) and the competing UDP flow (iperf's own counts)."""
from __future__ import annotations

import re

from ... import layout
from ...analysis.cell_files import CellFiles
from ...analysis.qdisc_stats import device_qdiscs
from ...analysis.teardown_log import command_output, device_blocks, sysctl_values
from ...analysis.udp_flow import udp_flow
from ...layout import TUNNEL_DEV
from ...results import cell_folder
from ...results.cell_record import Effect
from ...teardown_format import MODULE_PARAMS, SCHEDULE_LOG_SHOW, SCHEDULE_OUT_SHOW, schedule_log
from ...testbed.commands import PARAM_HOSTS, module_param_path
from ...units import Rate

UDP_RATE_TOLERANCE = 0.05  # the UDP flow's sending rate against the declared one
STEP_LATE_S = 0.5  # a step logged this much after its planned time did not come at its time
TC_WARNING = "Warning: "  # how tc starts a line of the kernel's warnings (extack), not errors
_CLASS_RATE_RE = re.compile(rf"^class htb {re.escape(layout.CLASS)} .*? rate (\S+) ", re.M)
_LINK_RE = r"^\d+: {dev}[:@].*\n(?:.*\n)*?\s+RX:.*\n\s+\d+\s+(\d+).*\n\s+TX:.*\n\s+\d+\s+(\d+)"


def check(files: CellFiles) -> list[Effect]:
    config, sections = files.config, files.sections
    out = []
    if config.steps:
        out.append(_schedule(files))
    if config.tunnel:
        out.append(_tunnel(config.tunnel, sections))
    out += [_sysctls(host, settings, sections.get(host, "")) for host, settings in config.sysctls.items() if settings]
    if config.module_params:
        out += [_module_params(host, config.module_params, sections.get(host, "")) for host in PARAM_HOSTS]
    if words := config.client_qdisc_words:
        out.append(_client_qdisc(words[0], sections.get("cli", "")))
    if udp := config.udp_rate:
        out.append(_udp(files, udp.bps))
    return out


def _schedule(files: CellFiles) -> Effect:
    """Every step planned within Flent's run is in the schedule's log, at its time; tc
    reported no error (its warnings, such as htb's on a class quantum above 200000 bytes
    at 25 Mbit/s and more, change nothing); the upload class ends at the last step's rate."""
    config, mid = files.config, files.sections.get("mid", "")
    _, logged = schedule_log(command_output(mid, SCHEDULE_LOG_SHOW) or "")
    due = [s for s in config.steps if s.at_s <= config.flent_s - STEP_LATE_S]
    problems = []
    if len(logged) < len(due):
        problems.append(f"{len(due) - len(logged)} of {len(due)} steps missing from the schedule's log")
    late = [f"t={s.t_s!r} planned {s.planned.at_s!r}" for s in logged if s.t_s - s.planned.at_s > STEP_LATE_S]
    problems += [f"late: {', '.join(late)}"] if late else []
    said = (command_output(mid, SCHEDULE_OUT_SHOW) or "").strip().splitlines()
    if errors := [line for line in said if not line.startswith(TC_WARNING)]:
        problems.append(f"the schedule printed: {errors[-1][:120]}")
    final, last = _final_rate(files), due[-1].up if due else None
    if last is not None and final is not None and not last.self_shaping and abs(final - last.rate_bps) > 0.01 * last.rate_bps:
        problems.append(f"the upload class ended at {final / 1e6:g} Mbit/s, not the last step's {last.rate}")
    steps = ", ".join(f"t={s.t_s!r} for {s.planned.at_s!r}" for s in logged)
    evidence = f"{len(logged)} of {len(due)} steps logged" + (f" ({steps})" if steps else "")
    return Effect(feature="rate schedule", evidence="; ".join([evidence, *problems]), ok=not problems)


def _final_rate(files: CellFiles) -> float | None:
    """The upload port's HTB class rate after the test (bits/s), from tc's own report."""
    port = files.bottleneck_ports.get("up")
    m = _CLASS_RATE_RE.search(device_blocks(files.sections.get("mid", "")).get(port or "", ""))
    try:
        return Rate.parse(m.group(1)).bps if m else None
    except ValueError:
        return None


def _tunnel(kind: str, sections: dict[str, str]) -> Effect:
    """The tunnel device carried packets both ways on both ends (ip -s link)."""
    counts = {}
    for host in ("cli", "srv"):
        m = re.search(_LINK_RE.format(dev=re.escape(TUNNEL_DEV)), sections.get(host, ""), re.M)
        counts[host] = (int(m.group(1)), int(m.group(2))) if m else None
    ok = all(c is not None and min(c) > 0 for c in counts.values())
    evidence = "; ".join(f"{h} {TUNNEL_DEV}: " + (f"{c[0]} packets received, {c[1]} sent" if c else "no counters")
                         for h, c in counts.items())
    return Effect(feature=f"tunnel {kind}", evidence=evidence, ok=ok)


def _sysctls(host: str, settings: dict[str, str], section: str) -> Effect:
    """The declared values, read back after the test."""
    read = sysctl_values(section)
    wrong = [f"{k} = {read.get(k, 'missing')} (declared {v})" for k, v in settings.items()
             if read.get(k) != " ".join(str(v).split())]
    declared = "; ".join(f"{k} = {v}" for k, v in settings.items())
    return Effect(feature=f"sysctls {host}", ok=not wrong,
                  evidence="read back after the test: " + ("; ".join(wrong) if wrong else f"{declared}, as declared"))


def _module_params(host: str, declared: dict[str, dict[str, str]], section: str) -> Effect:
    """The declared module parameters, read back from sysfs after the test ("PATH:VALUE")."""
    read = dict(line.rsplit(":", 1) for line in (command_output(section, MODULE_PARAMS) or "").splitlines() if ":" in line)
    wanted = {module_param_path(m, p): v for m, params in declared.items() for p, v in params.items()}
    wrong = [f"{path} = {read.get(path, 'missing')} (declared {v})" for path, v in wanted.items() if read.get(path) != v]
    shown = "; ".join(f"{m}.{p} = {v}" for m, params in declared.items() for p, v in params.items())
    return Effect(feature=f"module parameters {host}", ok=not wrong,
                  evidence="read back after the test: " + ("; ".join(wrong) if wrong else f"{shown}, as declared"))


def _client_qdisc(kind: str, cli: str) -> Effect:
    """The client's root qdisc is the declared KIND, and packets went through it."""
    roots = [q for found in device_qdiscs(cli).values() for q in found if q["kind"] == kind]
    sent = sum(q.get("sent_pkts", 0) for q in roots)
    return Effect(feature="client qdisc", ok=sent > 0,
                  evidence=f"{kind} on the client sent {sent} packets" if roots else f"no {kind} on the client")


def _udp(files: CellFiles, declared_bps: float) -> Effect:
    """The competing UDP flow ran at its rate: iperf's client sent the declared rate
    (±5 %) and its server received datagrams (its report)."""
    flow = udp_flow(files.text(cell_folder.UDP_LOG), declared_bps)
    if isinstance(flow, str):
        return Effect(feature="udp flow", evidence=flow, ok=False)
    sent = flow.sent_mbit or 0.0
    ok = abs(sent - flow.declared_mbit) <= UDP_RATE_TOLERANCE * flow.declared_mbit and flow.received > 0
    return Effect(feature="udp flow", ok=ok,
                  evidence=f"iperf sent {sent:.2f} Mbit/s (declared {flow.declared_mbit:g}); its server received "
                           f"{flow.received_mbit:.2f} ({flow.received} datagrams, {flow.loss_pct:.2f} % lost)")
