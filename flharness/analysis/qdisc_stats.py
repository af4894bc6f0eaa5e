"""The bottleneck qdiscs' own totals for a whole cell, from the teardown log (the
middlebox's `tc -s -d qdisc show` after the test; the qdiscs are fresh per cell, so their
counters are the cell's). The declared qdisc of a port is handle 10: under fl's HTB, else
the root 1: (as in analysis/queue.py); the ports are cell.json's (CellFiles.bottleneck_ports).

An AQM adds its own statistics after its counters (iproute2 7.3, Linux 7.3), which give
every kind's early drops (the AQM's), forced drops (a full queue) and ECN marks under one
name each:
    dualpi2   prob 0.000000 delay_c 0us delay_l 0us
              pkts_in_c 30281 pkts_in_l 3281 maxq 45
              ecn_mark 1541 step_mark 1445
              credit -54240 (L-queue)
              memory_used 0 (max 110768) of memory limit 30280000
    pie       prob 0.180714 delay 0us
              pkts_in 5691 overlimit 0 dropped 661 maxq 16 ecn_mark 0
    red       marked 77 early 1 pdrop 6 other 0
    fq_codel  maxpacket 68130 drop_overlimit 0 new_flow_count 1 ecn_mark 308
    cake      (a table, a column per tin) marks 0 70 0
(PIE drops an ECN-capable packet too once its probability is above 10 %, RFC 8033.)

Cells recorded since 2026-12-02 carry the same statistics as tc's JSON (teardown_format's
QDISC_JSON), read here under the same names; the text is read for older cells' logs. Both
readings of one qdisc agree (tests/unit/test_qdisc_stats.py, on tc's output for each kind).
"""
from __future__ import annotations

import json
import re
from typing import Any

from .. import layout
from ..results.cell_record import Direction
from ..teardown_format import QDISC_JSON
from .teardown_log import command_output, device_blocks

_QDISC_RE = re.compile(r"^qdisc (\S+) ([0-9a-f]+:) (?:root|parent \S+)")
_SENT_RE = re.compile(r"Sent (\d+) bytes (\d+) pkt \(dropped (\d+), overlimits (\d+) requeues (\d+)\)")
_BACKLOG_RE = re.compile(r"backlog (\d+)b (\d+)p")
#: Statistics a qdisc prints after its counters, as "name value" pairs (fl's name → tc's),
#: per kind; dualpi2's for every other kind (what they print of it).
_XSTATS = {
    "prob": r"prob ([\d.]+)", "delay_c_us": r"delay_c (\d+)us", "delay_l_us": r"delay_l (\d+)us",
    "pkts_in_c": r"pkts_in_c (\d+)", "pkts_in_l": r"pkts_in_l (\d+)", "maxq": r"maxq (\d+)",
    "ecn_marks": r"ecn_mark (\d+)", "step_marks": r"step_mark (\d+)", "credit": r"credit (-?\d+)",
    "max_memory_used": r"\(max (\d+)\)",
}
_KIND_XSTATS = {
    "pie": {"prob": r"prob ([\d.]+)", "maxq": r"maxq (\d+)", "ecn_marks": r"ecn_mark (\d+)",
            "early_drops": r"overlimit \d+ dropped (\d+)", "forced_drops": r"overlimit (\d+) dropped"},
    "red": {"ecn_marks": r"marked (\d+)", "early_drops": r"early (\d+)", "forced_drops": r"pdrop (\d+)"},
    "fq_codel": {"ecn_marks": r"ecn_mark (\d+)", "forced_drops": r"drop_overlimit (\d+)"},
}

_CAKE_MARKS_RE = re.compile(r"^\s+marks((?:\s+\d+)+)\s*$", re.M)
#: tc's JSON: its names for the counters every qdisc has, and each kind's statistics
#: (the same as the text's above, as fl names them); iproute2 prints times in µs.
_JSON_COUNTERS = {"bytes": "sent_bytes", "packets": "sent_pkts", "drops": "drops", "overlimits": "overlimits",
                  "requeues": "requeues", "backlog": "backlog_bytes", "qlen": "backlog_pkts"}
_JSON_XSTATS = {
    "dualpi2": {"prob": "prob", "delay-c": "delay_c_us", "delay-l": "delay_l_us", "pkts-in-c": "pkts_in_c",
                "pkts-in-l": "pkts_in_l", "maxq": "maxq", "ecn-mark": "ecn_marks", "step-mark": "step_marks",
                "credit": "credit", "max-memory-used": "max_memory_used"},
    "pie": {"prob": "prob", "maxq": "maxq", "ecn_mark": "ecn_marks", "dropped": "early_drops",
            "overlimit": "forced_drops"},
    "red": {"marked": "ecn_marks", "early": "early_drops", "pdrop": "forced_drops"},
    "fq_codel": {"ecn_mark": "ecn_marks", "drop_overlimit": "forced_drops"},
}
_JSON_OTHER = {"ecn_mark": "ecn_marks"}  # codel's, fq_pie's


def device_qdiscs(section: str) -> dict[str, list[dict[str, Any]]]:
    """Each device's qdiscs in a host's part of a teardown log, as qdiscs() gives them:
    from tc's JSON where the host printed it whole, else from the text."""
    try:
        shown = json.loads(command_output(section, QDISC_JSON) or "null")
    except json.JSONDecodeError:  # cut short (a host lost mid-teardown): the text has what it has
        shown = None
    if not isinstance(shown, list):
        return {dev: qdiscs(text) for dev, text in device_blocks(section).items()}
    out: dict[str, list[dict[str, Any]]] = {}
    for q in shown:
        out.setdefault(q.get("dev", ""), []).append(json_qdisc(q))
    return out


def json_qdisc(q: dict[str, Any]) -> dict[str, Any]:
    """One qdisc of tc's JSON under fl's names (kind, handle, counters, statistics)."""
    out: dict[str, Any] = {"kind": q["kind"], "handle": q["handle"]}
    names = {**_JSON_COUNTERS, **_JSON_XSTATS.get(q["kind"], _JSON_OTHER)}
    out.update({name: q[key] for key, name in names.items() if isinstance(q.get(key), int | float)})
    if "prob" in out:
        out["prob"] = float(out["prob"])
    if q["kind"] == "cake":
        out["ecn_marks"] = sum(tin.get("ecn_mark", 0) for tin in q.get("tins", []))
    return out


def qdiscs(block: str) -> list[dict[str, Any]]:
    """The qdiscs of one device's output: kind, handle, counters and extra statistics
    (a qdisc's lines run from its "qdisc …" line to the next qdisc or class: cake's table
    of tins follows a blank line)."""
    blocks: list[list[str]] = []
    inside = False
    for line in block.splitlines():
        if line.startswith("qdisc "):
            blocks.append([line])
            inside = True
        elif line.startswith("class "):
            inside = False
        elif inside:
            blocks[-1].append(line)
    return [q for q in map(_qdisc, blocks) if q]


def _qdisc(lines: list[str]) -> dict[str, Any]:
    head = _QDISC_RE.match(lines[0])
    if not head:
        return {}
    text = "\n".join(lines[1:])
    out: dict[str, Any] = {"kind": head.group(1), "handle": head.group(2)}
    if m := _SENT_RE.search(text):
        out.update(zip(("sent_bytes", "sent_pkts", "drops", "overlimits", "requeues"), map(int, m.groups())))
    if m := _BACKLOG_RE.search(text):
        out["backlog_bytes"], out["backlog_pkts"] = int(m.group(1)), int(m.group(2))
    for name, pattern in _KIND_XSTATS.get(out["kind"], _XSTATS).items():
        if m := re.search(pattern, text):
            out[name] = float(m.group(1)) if name == "prob" else int(m.group(1))
    if out["kind"] == "cake" and (m := _CAKE_MARKS_RE.search(text)):
        out["ecn_marks"] = sum(map(int, m.group(1).split()))
    return out


def bottleneck_totals(mid: str, ports: dict[Direction, str]) -> dict[Direction, dict[str, Any]]:
    """direction → the declared qdisc's totals for the cell, from the middlebox's part of
    the teardown log (MID) and PORTS (direction → device); a direction whose device the
    log lacks has none ({} when the logs lack them all)."""
    devices = device_qdiscs(mid)
    out = {}
    for direction, dev in ports.items():
        by_handle = {q["handle"]: q for q in devices.get(dev, [])}
        if q := by_handle.get(layout.CHILD) or by_handle.get(layout.ROOT):
            out[direction] = q
    return out
