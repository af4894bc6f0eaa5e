"""Checks on a finished cell: is everything there, and did the flows run as declared?"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..analysis import datagrams, flent_data, sockets
from ..analysis.cell_files import CellFiles
from ..analysis.flows import MIN_DATA_PACKETS
from ..analysis.teardown_log import command_output
from ..cells import Cell
from ..hosts import ENDPOINTS, SCHEME_PORT
from ..results import cell_folder
from ..results.cell_record import BottleneckPorts, CcCheck, Checks, Direction, Endpoints, FlowConfig, Status
from ..testbed.ansible import PlaybookResult
from .calibration import calibration

#: A flow whose data begins this much after its declared start is reported (connection
#: delayed): the larger of 1 s and 2 % of the test. Flows begin within 0.2 s of their start
#: (the corpus, namespaces and VMs alike); a 60 s s6 cell whose flows began 4.2 s late, and
#: whose goodput then read 92 % of the capacity, went unflagged under the former 6 s.
LATE_START_S, LATE_START_SHARE = 1.0, 0.02
#: A flow whose data begins this much (at most half the lead-in) before its declared start
#: means Flent's time axis is off (its lead-in did not happen): the cell fails, and is run once more.
EARLY_START_S = 2.5
#: A scheme's program that ends by itself more than this before the test's end fails its
#: cell (one stopped by fl at the end leaves no exit; one that ends a moment early does not count).
SCHEME_EARLY_S = 1.0
REQUIRED_FILES = (cell_folder.SETUP_LOG, cell_folder.TEARDOWN_LOG, cell_folder.FLENT_LOG, *cell_folder.CAPTURES)


@dataclass
class Verdict:
    status: Status = "ok"
    reasons: list[str] = field(default_factory=list)
    checks: Checks = field(default_factory=Checks)  # recorded in cell.json
    utilisation: dict[Direction, float] = field(default_factory=dict)  # per direction, for the progress line
    analysis_error: str | None = None
    retry: bool = False  # the failure is the testbed's timing, not the cell's: run it again

    def fail(self, reason: str) -> None:
        self.status = "failed"
        self.reasons.append(reason)

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)


def evaluate(cell: Cell, cell_dir: Path, result: PlaybookResult, ends: Endpoints,
             ports: BottleneckPorts | None) -> Verdict:
    """The checks of a cell whose files are in CELL_DIR; ENDS and PORTS: cell.json's."""
    v = Verdict()
    if not result.ok:
        v.fail(result.reason())
    exit_status = _flent_exit(cell_dir / cell_folder.FLENT_LOG)
    v.checks.flent_exit = exit_status
    if exit_status != 0:
        v.fail(f"flent exited with status {exit_status}: {_last_line(cell_dir / cell_folder.FLENT_LOG)}")
    missing = [f for f in REQUIRED_FILES if not (cell_dir / f).is_file() or (cell_dir / f).stat().st_size == 0]
    if missing:
        v.fail(f"missing or empty: {', '.join(missing)}")
    files = CellFiles(cell.name, cell.config, cell_dir, ends.server, ports=ports)
    _check_captures(files, v)
    files.flent = _check_flent_data(cell, cell_dir, v)
    _check_schemes(cell, files, v)
    _check_ccs(cell, cell_dir, ends.netperf_port, v)
    if files.flent is not None:
        v.checks.calibration = calibration(files)
    return v


def _check_schemes(cell: Cell, files: CellFiles, v: Verdict) -> None:
    """Each scheme flow's two programs started, neither ended by itself before the test did
    (its wrapper's JSON lines: scheme_scripts.py), and its sender's data is in the client's
    capture: a scheme that cannot run fails its cell with the reason, in its own words."""
    config = cell.config
    t0 = flent_data.t0(files.flent) if files.flent is not None else None
    start = None if t0 is None else t0 + config.lead_s
    for n, flow, scheme in config.scheme_flows:
        for side in ("sender", "receiver"):
            events = files.scheme_events(n, side)
            log = files.dir / cell_folder.scheme_log(n, side)
            who = f"flow {n}'s {side} ({scheme.label}, scheme {flow.cc})"
            ended = next((e for e in events if e.get("event") == "exit"), None)
            if not any(e.get("event") == "start" for e in events):
                v.fail(f"{who} never started: {_last_line(log) or 'no output'}")
            elif ended is not None and start is not None and float(ended.get("at", 0)) < start + config.length - SCHEME_EARLY_S:
                v.fail(f"{who} ended by itself {float(ended['at']) - start:.1f} s into the {config.length} s test, "
                       f"status {ended.get('status')}: {_last_line(log) or 'no output'}")
        sent = files.datagrams("cli")
        if scheme.transport == "udp" and not isinstance(sent, str) and files.server:
            count = len(datagrams.data(sent, files.server_addr, SCHEME_PORT + n))
            if count < MIN_DATA_PACKETS:
                v.fail(f"flow {n} ({scheme.label}, scheme {flow.cc}) sent {count} datagrams to the server: it never sent")


def _check_captures(files: CellFiles, v: Verdict) -> None:
    """A tcpdump stopped by fl prints its counts (the teardown log); one that died during
    the test (killed, crashed, its disk full) does not, and its capture is incomplete."""
    for host, section in files.sections.items():
        if host in ENDPOINTS and "packets captured" not in (command_output(section, "tcpdump statistics") or ""):
            v.fail(f"the capture on {host} ended before the test did (its tcpdump died): its packets are incomplete")


def _check_flent_data(cell: Cell, cell_dir: Path, v: Verdict) -> dict[str, Any] | None:
    data_files = sorted(p for p in cell_dir.glob(cell_folder.FLENT_DATA_GLOB) if p.name != cell_folder.flent_data(cell.name))
    if len(data_files) == 1:
        data_files[0].rename(cell_dir / cell_folder.flent_data(cell.name))
    path = cell_dir / cell_folder.flent_data(cell.name)
    cut_off = _runners_cut_off(cell_dir / cell_folder.FLENT_LOG)
    if not path.is_file():
        v.fail("Flent wrote no data file")
        _cut_off(cut_off, v)
        return None
    data = flent_data.load(path)
    failed = int(data.get("metadata", {}).get("FAILED_RUNNERS") or 0)  # Flent counts them
    v.checks.failed_runners = failed
    if failed:
        v.fail(f"{failed} Flent runner(s) failed")
    _cut_off(cut_off, v)
    series = flent_data.flow_series(data)
    goodput = {name: flent_data.goodput_mbit(data, name) for name in series}
    v.checks.netperf_mbit = goodput  # the sender's count: whether each flow moved data
    empty = [n for n, g in goodput.items() if not g]
    kernel = cell.config.kernel_flows  # a scheme's flows are not Flent's: checked from the captures
    if len(series) != len(kernel) or empty:
        v.fail(f"expected {len(kernel)} flows with data, Flent has {len(series) - len(empty)}")
    _check_test_window(cell, data, list(series), v)
    return data


def _check_test_window(cell: Cell, data: dict[str, Any], names: list[str], v: Verdict) -> None:
    """Flows whose data began late (their connection could not start in time)."""
    origin, lead, length = flent_data.t0(data), flent_data.lead_in(data), cell.config.length
    late: dict[str, float] = {}
    early: dict[str, float] = {}
    for flow, name in _series_of(cell, names):
        begun = flent_data.first_data_s(data.get("raw_values", {}).get(name, []), origin)
        delay = None if begun is None else begun - (lead + flow.start_s)
        if delay is not None and delay > max(LATE_START_S, LATE_START_SHARE * length):
            late[name] = round(delay, 1)
        elif delay is not None and delay < -min(EARLY_START_S, cell.config.lead_s / 2):
            early[name] = round(-delay, 1)
    v.checks.late_start_s = late
    if early:
        v.fail("Flent started " + ", ".join(f"{n} {s:g} s" for n, s in early.items()) + " before its lead-in "
               "ended: its time axis, the idle ping and the test window are off (in a VM on the virtual clock "
               "the guest's time leaps while a program waits for the host)")
        v.retry = True


def _series_of(cell: Cell, names: list[str]) -> list[tuple[FlowConfig, str]]:
    """The cell's flows with their Flent series, in declared order per direction."""
    pools = {d: [n for n in names if n.startswith(f"TCP {d}load")] for d in ("up", "down")}
    return [(f, pools[f.direction].pop(0)) for f in cell.config.kernel_flows if pools[f.direction]]


def _check_ccs(cell: Cell, cell_dir: Path, control_port: int, v: Verdict) -> None:
    declared, observed = [], []
    for direction, host in (("up", "cli"), ("down", "srv")):
        want = sorted(f.cc for f in cell.config.kernel_flows if f.direction == direction)
        if not want:
            continue
        log = cell_dir / cell_folder.ss_log(host)
        got = sockets.sender_ccs(log, control_port) if log.is_file() else []
        declared += want
        observed += got
    ok = sockets.check_ccs(declared, observed)
    v.checks.cc = CcCheck(declared=declared, observed=observed, ok=ok)
    if not ok:
        v.fail(f"flows ran {observed or 'nothing'} but the cell declares {declared}")
    _check_receiver_ccs(cell, cell_dir, control_port, v)


def _check_receiver_ccs(cell: Cell, cell_dir: Path, control_port: int, v: Verdict) -> None:
    """Flows whose receiver runs a CC of its own (receiver_cc): the receiving host's
    socket samples name it."""
    for direction, host in (("up", "srv"), ("down", "cli")):
        want = sorted(f.receiver_cc for f in cell.config.flows if f.direction == direction and f.receiver_cc)
        if not want:
            continue
        log = cell_dir / cell_folder.ss_log(host)
        got = sockets.receiver_ccs(log, control_port) if log.is_file() else []
        if not sockets.check_ccs(want, got):
            v.fail(f"the receivers ran {got or 'nothing'} but the cell declares receiver_cc {want}")


def _flent_exit(log: Path) -> int | None:
    try:
        first = log.read_text(errors="replace").splitlines()[0]
    except (OSError, IndexError):
        return None
    return cell_folder.flent_exit(first)


def _cut_off(runners: list[str], v: Verdict) -> None:
    if runners:
        v.fail(f"Flent stopped {', '.join(runners)} before it reported (flent.log: 'Return code: None'): the test's "
               "time ran out before the program had data (on a VM's virtual clock the guest's time leaps while a "
               "program's pages come from the host; a server that ignores pings does it too)")
        v.retry = True


def _runners_cut_off(log: Path) -> list[str]:
    """The runners (class names) that Flent stopped while they still ran and had no data
    (its "Return code: None"): the test's time ran out before they started, a testbed's
    timing (CI: a VM's first cell, whose netperf and fping never sent a packet, or whose
    socket sampler never printed), not the cell's."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return []
    return re.findall(r"^Runner class: (\S+)\n(?:(?!Runner class:).*\n)*?Return code: None$", text, re.M)


def _last_line(log: Path) -> str:
    try:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""
