"""The teardown log's markers, defined once: what the hosts' state scripts print
(testbed/state_script.py renders them, run/cell_logs.py gathers them) and what the
analysis finds in it (analysis/teardown_log.py, ipsec_stats.py, run/effects/).

A teardown log is, per host, a HOST_HEADER line ("======== HOST ========") followed by
what the host printed: each command's header line ("$ COMMAND", command_header), then
its output, then an empty line. A header may end in a note ("   # …") for the human
reader; the parsers look a command up by its start, so notes never matter to them.
"""
from __future__ import annotations

import re

#: What starts a command's header line: the shell's prompt, as a human reads the log.
COMMAND_PREFIX = "$ "
#: Where one command's output ends: the next command's header line.
NEXT_COMMAND = "\n" + COMMAND_PREFIX
#: A host's part of the log starts with this line.
HOST_HEADER = "======== {host} ========"
HOST_RE = re.compile(r"^======== (\w+) ========$", re.M)

#: The commands the analysis looks up, as the state scripts name them.
UNAME = "uname -r"
TCP_METRICS = "ip tcp_metrics show"
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
#: The middlebox's rate schedule (fl-schedule), in its scratch folder: one line per step as
#: applied, "t=SECONDS: WHAT" (WHAT: the step's line of schedule.steps, ending in
#: schedule_planned's note), and what tc printed while applying them.
SCHEDULE_LOG = "schedule.log"
SCHEDULE_OUT = "schedule.out"
SCHEDULE_LOG_SHOW = f"cat {SCHEDULE_LOG}"
SCHEDULE_OUT_SHOW = f"cat {SCHEDULE_OUT}"
SCHEDULE_STEP_RE = re.compile(r"^t=([\d.]+): up (\S+) .*\(planned t=([\d.]+)\)$", re.M)  # (at, up rate, planned)


def schedule_planned(at_s: float) -> str:
    """A step's note of when it was due (s after Flent's start), which SCHEDULE_STEP_RE reads."""
    return f"(planned t={float(at_s)!r})"


def tcp_counters_function() -> str:
    """The shell function TCP_COUNTERS_SHOW: the namespace's TCP_COUNTERS, "NAME VALUE" a
    line (each of the MIB files is a header line and a line of values, by prefix)."""
    names = " ".join(TCP_COUNTERS)
    awk = ('$1 == p { for (i = 2; i <= NF; i++) v[h[i]] = $i; next } { p = $1; for (i = 2; i <= NF; i++) h[i] = $i } '
           f'END {{ n = split("{names}", k, " "); for (j = 1; j <= n; j++) print k[j], (k[j] in v ? v[k[j]] : "-") }}')
    return f"{TCP_COUNTERS_SHOW}() {{ awk '{awk}' /proc/net/snmp /proc/net/netstat; }}"


#: One device's qdisc and class statistics (device_stats): what DEVICE_STATS_RE finds.
DEVICE_STATS_RE = re.compile(r"^" + re.escape(COMMAND_PREFIX) + r"tc -s -d qdisc show dev (\S+);.*$", re.M)


def command_header(command: str, note: str = "") -> str:
    """The line before COMMAND's output: "$ COMMAND", then "   # NOTE" if NOTE."""
    return COMMAND_PREFIX + command + (f"   # {note}" if note else "")


def host_header(host: str) -> str:
    return HOST_HEADER.format(host=host)


def device_stats(dev: str) -> str:
    """The command that shows DEV's qdiscs, then its classes, with their statistics."""
    return f"tc -s -d qdisc show dev {dev}; tc -s -d class show dev {dev}"


def output_after(text: str, start: int) -> str:
    """What the command whose header line starts at START of TEXT printed: the lines after
    it, up to the next command's header line."""
    rest = text[start:]
    body = rest.split("\n", 1)[1] if "\n" in rest else ""
    return body.split(NEXT_COMMAND, 1)[0]
