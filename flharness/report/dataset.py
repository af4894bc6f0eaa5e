"""The run as a tidy dataset: one row per cell × flow (a single row for cells without
flows), every axis a column, every metric a column; and a run-level summary.json."""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from .collect import CellResult, RunResult

ECN = ("not_ect", "ect0", "ect1", "ce")


def rows(run: RunResult) -> list[dict[str, Any]]:
    axes = sorted({a for c in run.cells() for a in c.record["coordinates"]})
    out = []
    for c in run.cells():
        base = _cell_columns(run, c, axes)
        flows = (c.metrics or {}).get("flows") or [None]
        queues = (c.metrics or {}).get("queue") or {}
        out += [{**base, **_flow_columns(f), **_queue_columns(queues.get(f["direction"]) if f else None)}
                for f in flows]
    return out


def _cell_columns(run: RunResult, c: CellResult, axes: list[str]) -> dict[str, Any]:
    m = c.metrics or {}
    ping = m.get("ping_ms", {})
    loaded = ping.get("loaded") or {}
    backend = c.record.get("backend") or {}
    cols: dict[str, Any] = {
        "run": run.name, "scenario": c.scenario, "cell": c.name, "config_hash": c.record["config_hash"],
        "status": c.status, "reason": c.record.get("reason"), "valid": c.valid,
        "invalid": "; ".join(c.invalid), "flags": "; ".join(c.flags), "backend": backend.get("kind"), "clock": backend.get("clock"),
        "kernel": c.record.get("kernel"), "calibration": _calibration(c),
    }
    cols.update({f"axis_{a}": c.label(a) for a in axes})
    cols.update({"jain": m.get("jain"), "ratio": m.get("ratio"),
                 "utilisation_up": m.get("utilisation", {}).get("up"),
                 "utilisation_down": m.get("utilisation", {}).get("down"),
                 "ping_base_ms": ping.get("base_median"), "ping_median_ms": loaded.get("median"),
                 "ping_p95_ms": loaded.get("p95"), "ping_p99_ms": loaded.get("p99"),
                 "steady_window_s": m.get("steady_window_s")})
    return cols


def _calibration(c: CellResult) -> str | None:
    """"ok", or the reasons the cell's path did not behave as declared: the verdict the
    run stored, and what the analysis found (bulk flows that never filled the link)."""
    verdict = (c.record.get("checks") or {}).get("calibration")
    if verdict is None:
        return None
    found = [f.removeprefix("calibration: ") for f in (c.metrics or {}).get("flags", []) if f.startswith("calibration: ")]
    return "; ".join(dict.fromkeys(verdict["reasons"] + found)) or "ok"


def _flow_columns(f: dict[str, Any] | None) -> dict[str, Any]:
    if f is None:
        return {}
    rtt = f.get("tcp_rtt_ms") or {}
    pcap = f.get("pcap") or {}
    ecn = pcap.get("ecn_received", {})
    owd = f.get("owd_ms") or {}
    return {"flow": f["index"], "direction": f["direction"], "cc": f["cc"], "flow_rtt_ms": f["rtt_ms"],
            "start_s": f["start_s"], "first_data_s": f.get("first_data_s"), "mean_mbit": f["mean_mbit"],
            "goodput_mbit": f["mean_mbit"], "goodput_source": f.get("goodput_source"),
            "netperf_mbit": f.get("netperf_mbit"), "steady_mbit": f["steady_mbit"],
            "owd_p50_ms": owd.get("median"), "owd_p95_ms": owd.get("p95"), "owd_p99_ms": owd.get("p99"),
            "loss_pct": None if owd.get("loss") is None else 100 * owd["loss"],
            "owd_unavailable": f.get("owd_unavailable"), "retrans": pcap.get("retrans"),
            "tcp_rtt_median_ms": rtt.get("median"), "tcp_rtt_p95_ms": rtt.get("p95"),
            "tcp_rtt_p99_ms": rtt.get("p99"), "packets_sent": pcap.get("sent"),
            "packets_received": pcap.get("received"), "retransmits": pcap.get("retrans"),
            "loss": pcap.get("loss"), **{f"received_{k}": ecn.get(k, 0) if pcap else None for k in ECN}}


def _queue_columns(q: dict[str, Any] | None) -> dict[str, Any]:
    """The bottleneck queue the flow went through (its direction's), while every flow ran."""
    if not q:
        return {"queue_delay_mean_ms": None, "queue_delay_p95_ms": None}
    delay, pkts = q.get("delay_ms") or {}, q.get("backlog_pkts") or {}
    return {"queue_delay_mean_ms": delay.get("mean"), "queue_delay_p95_ms": delay.get("p95"),
            "queue_backlog_mean_pkts": pkts.get("mean"), "queue_backlog_p95_pkts": pkts.get("p95"),
            "queue_drops": q.get("drops"), "queue_marks": q.get("marks"),
            **{f"queue_{k}": q[k] for k in ("pkts_in_c", "pkts_in_l", "step_marks") if k in q},
            **{f"queue_{k[:-3]}_p95_ms": (q[k] or {}).get("p95") for k in ("delay_c_ms", "delay_l_ms", "delay_avg_ms") if k in q}}


def write_csv(data: list[dict[str, Any]], path: Path) -> None:
    columns: list[str] = []
    for r in data:
        columns += [k for k in r if k not in columns]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(data)


def summary(run: RunResult) -> dict[str, Any]:
    per = {s.name: {"cells": len(s.cells), "by_status": s.status_counts(), **s.findings()}
           for s in run.scenarios}
    return {"run": run.name, "provenance": run.provenance, "scenarios": per}


def write_summary(run: RunResult, path: Path) -> None:
    path.write_text(json.dumps(summary(run), indent=1, default=str))
