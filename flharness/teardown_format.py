"""The teardown log's markers, defined once: what the hosts' state scripts print
(testbed/state_script.py renders them, run/cell_logs.py gathers them) and what the
analysis finds in it (analysis/teardown_log.py, ipsec_stats.py, run/effects/).

A teardown log is, per host, a HOST_HEADER line ("======== HOST ========") followed by
what the host printed: each command's header line ("$ COMMAND", command_header), then
its output, then an empty line. A header may end in a note ("   # …") for the human
reader; the parsers look a command up by its start, so notes never matter to them.
"""
from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict

#: What starts a command's header line: the shell's prompt, as a human reads the log.
COMMAND_PREFIX = "$ "
#: Where one command's output ends: the next command's header line.
NEXT_COMMAND = "\n" + COMMAND_PREFIX
#: A host's part of the log starts with this line.
HOST_HEADER = "======== {host} ========"

#: The commands the analysis looks up, as the state scripts name them.
UNAME = "uname -r"
TCP_METRICS = "ip tcp_metrics show"
#: Every qdisc of the host as tc's JSON (one line; each qdisc names its "dev"), which the
#: analysis reads (analysis/qdisc_stats.py); the text of device_stats is the human's.
QDISC_JSON = "tc -s -d -j qdisc show"
MODULE_PARAMS = "grep -H ."  # then the parameters' files
XFRM_STATE = "ip -s xfrm state"
XFRM_POLICY = "ip -s xfrm policy"
XFRM_STAT = "cat /proc/net/xfrm_stat"
XFRM_STAT_FILE = "xfrm_stat.up"  # in the host's scratch folder: IPsec's counters as the tunnel came up (cell_scripts.py's setup)
XFRM_STAT_UP = f"cat {XFRM_STAT_FILE}"
#: An endpoint's TCP counters (the network namespace's MIB, /proc/net/snmp and netstat):
#: "NAME VALUE" a line, as its setup found them (TCP_COUNTERS_FILE in its scratch folder)
#: and after the test; the growth is the cell's (the namespaces live for the whole run).
TCP_COUNTERS = ("RetransSegs", "TCPTimeouts", "TCPLossProbes", "TCPSpuriousRTOs", "TCPFastRetrans",
                "TCPSackRecovery", "TCPLostRetransmit")
TCP_COUNTERS_FILE = "tcp_counters.up"
TCP_COUNTERS_SHOW = "fl_tcp_counters"  # the state script's function that prints them
TCP_COUNTERS_UP = f"cat {TCP_COUNTERS_FILE}"
#: The middlebox's rate schedule (fl-schedule), in its scratch folder: schedule.log, one
#: JSON record a line (ScheduleStart, then a ScheduleTaken per step as applied), and what
#: tc printed while applying them (schedule.out).
SCHEDULE_LOG = "schedule.log"
SCHEDULE_OUT = "schedule.out"
SCHEDULE_LOG_SHOW = f"cat {SCHEDULE_LOG}"
SCHEDULE_OUT_SHOW = f"cat {SCHEDULE_OUT}"


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SchedulePlanned(_Record):
    """A step as planned: schedule.steps carries it (schedule_planned), fl-schedule logs it back."""
    step: int
    at_s: float
    """When it is due, s after Flent's start."""
    up: str
    down: str
    """What the step sets on each port: "RATE QDISC WORDS"."""


class ScheduleStart(_Record):
    """schedule.log's first record: t = 0, the epoch of Flent's first ping reply on its way
    to the client (by "ping"), or fl-schedule's own start when none came (by "clock")."""
    t0_epoch: float
    by: Literal["ping", "clock"]


class ScheduleTaken(_Record):
    """A step as applied: when its tc batch returned (s after t = 0), and the plan."""
    t_s: float
    planned: SchedulePlanned


def schedule_planned(step: int, at_s: float, up: str, down: str) -> str:
    """A step's record in schedule.steps (the rest of its line), which fl-schedule logs back
    inside its ScheduleTaken."""
    return SchedulePlanned(step=step, at_s=at_s, up=up, down=down).model_dump_json()


def schedule_log(text: str) -> tuple[ScheduleStart | None, list[ScheduleTaken]]:
    """schedule.log read back: its start and the steps taken (a line that is neither, as a
    log cut short by a cell's end leaves, is skipped). Logs of cells recorded before
    2026-12-02 are text, "t=0 at EPOCH: …" then "t=T: up …, down … (planned t=AT)"."""
    start: ScheduleStart | None = None
    taken: list[ScheduleTaken] = []
    for line in text.splitlines():
        try:
            raw = json.loads(line) if line.startswith("{") else _text_record(line, len(taken) + 1)
            if isinstance(raw, dict) and "t0_epoch" in raw:
                start = ScheduleStart.model_validate(raw)
            else:
                taken.append(ScheduleTaken.model_validate(raw))
        except ValueError:  # pydantic's ValidationError is one
            continue
    return start, taken


def _text_record(line: str, step: int) -> dict[str, object]:
    """An old schedule log's line as the record it stands for (ValueError if none)."""
    head, sep, what = line.partition(": ")
    if not (head.startswith("t=") and sep):
        raise ValueError(line)
    if head.startswith("t=0 at "):
        return {"t0_epoch": head.removeprefix("t=0 at "), "by": "ping"}
    sets, _, planned = what.removesuffix(")").rpartition(" (planned t=")
    up, _, down = sets.removeprefix("up ").partition(", down ")
    return {"t_s": head.removeprefix("t="), "planned": {"step": step, "at_s": planned, "up": up, "down": down}}


def tcp_counters_function() -> str:
    """The shell function TCP_COUNTERS_SHOW: the namespace's TCP_COUNTERS, "NAME VALUE" a
    line (each of the MIB files is a header line and a line of values, by prefix)."""
    names = " ".join(TCP_COUNTERS)
    awk = ('$1 == p { for (i = 2; i <= NF; i++) v[h[i]] = $i; next } { p = $1; for (i = 2; i <= NF; i++) h[i] = $i } '
           f'END {{ n = split("{names}", k, " "); for (j = 1; j <= n; j++) print k[j], (k[j] in v ? v[k[j]] : "-") }}')
    return f"{TCP_COUNTERS_SHOW}() {{ awk '{awk}' /proc/net/snmp /proc/net/netstat; }}"


def command_header(command: str, note: str = "") -> str:
    """The line before COMMAND's output: "$ COMMAND", then "   # NOTE" if NOTE."""
    return COMMAND_PREFIX + command + (f"   # {note}" if note else "")


def host_header(host: str) -> str:
    return HOST_HEADER.format(host=host)


def header_host(line: str) -> str | None:
    """The host whose part of the log LINE starts (host_header's), None if it starts none."""
    before, _, after = HOST_HEADER.partition("{host}")
    if not (line.startswith(before) and line.endswith(after)) or len(line) <= len(before) + len(after):
        return None
    host = line[len(before):len(line) - len(after)]
    return host if host.replace("_", "").isalnum() else None


def device_stats(dev: str) -> str:
    """The command that shows DEV's qdiscs, then its classes, with their statistics."""
    return f"tc -s -d qdisc show dev {dev}; tc -s -d class show dev {dev}"


def stats_device(line: str) -> str | None:
    """The device whose statistics the command header LINE shows (device_stats'), else None."""
    command = line.removeprefix(COMMAND_PREFIX).split("   # ", 1)[0]
    dev = command.removeprefix("tc -s -d qdisc show dev ").partition(";")[0]
    return dev if line.startswith(COMMAND_PREFIX) and command == device_stats(dev) else None


def output_after(text: str, start: int) -> str:
    """What the command whose header line starts at START of TEXT printed: the lines after
    it, up to the next command's header line."""
    rest = text[start:]
    body = rest.split("\n", 1)[1] if "\n" in rest else ""
    return body.split(NEXT_COMMAND, 1)[0]
