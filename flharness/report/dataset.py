"""The run as a tidy dataset: one row per cell × flow (a single row for cells without
flows), every axis a column, every metric a column; and a run-level summary.json."""
from __future__ import annotations

import csv
import json
import shlex
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..results.cell_metrics import CellMetrics, FlowMetrics, QdiscTotals, QueueSummary
from ..results.cell_record import CcModule, CellRecord
from .collect import UNREADABLE, CellResult, RunResult

ECN = ("not_ect", "ect0", "ect1", "ce")
#: The competing UDP flow's figures (metrics' udp), as columns udp_<name> of its cell's rows.
UDP = ("declared_mbit", "sent_mbit", "received_mbit", "sent", "lost", "loss_pct", "jitter_ms")
#: The video flow's figures (metrics' video), as columns video_<name>.
VIDEO = ("declared_mbit", "declared_fps", "sent_mbit", "received_mbit", "sent_fps", "received_fps", "frames_sent",
         "frames_received", "frame_loss_pct", "codepoint_pct", "ce_pct")


def rows(result: RunResult) -> list[dict[str, Any]]:
    axes = sorted({a for c in result.cells() for a in c.record.coordinates})
    out = []
    for c in result.cells():
        base = _cell_columns(result, c, axes)
        flows: list[FlowMetrics | None] = list(c.metrics.flows) if c.metrics and c.metrics.flows else [None]
        queues = c.metrics.queue if c.metrics else {}
        totals = c.metrics.qdisc_totals if c.metrics else {}
        out += [{**base, **_flow_columns(f), **_queue_columns(queues.get(f.direction) if f else None),
                 **_totals_columns(totals.get(f.direction) if f else None)} for f in flows]
    out += [{"run": result.name, "scenario": s.name, "cell": name, "status": UNREADABLE, "reason": why}
            for s in result.scenarios for name, why in s.unreadable.items()]
    out += [{"run": result.name, "scenario": name, "status": UNREADABLE, "reason": why} for name, why in result.unreadable.items()]
    return out


def _cell_columns(result: RunResult, c: CellResult, axes: list[str]) -> dict[str, Any]:
    m = c.metrics or CellMetrics(cell=c.name)
    loaded = m.ping_ms.loaded if m.ping_ms and m.ping_ms.loaded else None
    rec = c.record
    cols: dict[str, Any] = {
        "run": result.name, "scenario": c.scenario, "cell": c.name, "config_hash": rec.config_hash,
        "status": c.status, "reason": c.damage or rec.reason, "valid": c.valid, "invalid": "; ".join(c.invalid),
        "flags": "; ".join(map(str, c.flags)), "flag_codes": " ".join(f.code for f in c.flags),
        "backend": rec.backend.kind, "clock": rec.backend.clock,
        "kernel": rec.kernel, "fl_commit": rec.fl.commit, "fl_dirty": rec.fl.dirty, "cc_modules": _cc_modules(rec),
        "calibration": _calibration(c), **_effects(c),
    }
    cols.update({f"axis_{a}": c.label(a) for a in axes})
    cols.update({"jain": m.jain, "ratio": m.ratio,
                 "utilisation_up": m.utilisation.get("up"), "utilisation_down": m.utilisation.get("down"),
                 "ping_base_ms": m.ping_ms.base_median if m.ping_ms else None,
                 "ping_median_ms": loaded.median if loaded else None, "ping_p95_ms": loaded.p95 if loaded else None,
                 "ping_p99_ms": loaded.p99 if loaded else None, "steady_window_s": m.steady_window_s})
    udp = m.udp
    cols.update({f"udp_{k}": getattr(udp, k) if udp else None for k in UDP})
    video = m.video
    cols.update({f"video_{k}": getattr(video, k) if video else None for k in VIDEO})
    delay = video.frame_delay_ms if video else None
    cols.update({f"video_frame_delay_{k}_ms": getattr(delay, k) if delay else None for k in ("median", "p95", "p99")})
    probe = m.probe
    queued = probe.queueing_ms if probe else None
    cols.update({f"probe_queueing_{k}_ms": getattr(queued, k) if queued else None for k in ("median", "p99", "p999")})
    cols.update({"probe_rtt_median_ms": probe.rtt_ms.median if probe and probe.rtt_ms else None,
                 "probe_lost_pct": probe.lost_pct if probe else None})
    return cols


def _cc_modules(rec: CellRecord) -> str:
    """The cell's congestion-control modules: 'tcp_cubic 2.3; tcp_prague 3 sha256:977be5d6709e
    ai_cwnd_limited=1 …', with the parameters of those built outside the kernel, as the
    client read them (a module_params cell's own in place, --vm-append's too), each value
    shell-quoted where it has spaces."""
    def one(m: CcModule) -> str:
        words = [m.module, m.version or "", f"sha256:{m.sha256[:12]}" if m.sha256 else ""]
        if m.file and m.sha256:
            words += [f"{k}={shlex.quote(v)}" for k, v in sorted(m.parameters.items())]
        return " ".join(w for w in words if w)
    return "; ".join(one(m) for _, m in sorted(rec.cc_modules.items()))


def _effects(c: CellResult) -> dict[str, int | None]:
    """How many declared path features were checked for their effect, and seen to take it."""
    verdict = c.record.checks.calibration
    seen = verdict.effects if verdict else []
    return {"effects_checked": len(seen) if verdict else None, "effects_ok": sum(e.ok for e in seen) if verdict else None}


def _calibration(c: CellResult) -> str | None:
    """"ok", or the reasons the cell's path did not behave as declared: the verdict the
    run stored, and what the analysis found (bulk flows that never filled the link)."""
    verdict = c.record.checks.calibration
    if verdict is None:
        return None
    found = [f.text for f in [*verdict.reasons, *c.flags] if f.kind == "calibration"]
    return "; ".join(dict.fromkeys(found)) or "ok"


def _flow_columns(f: FlowMetrics | None) -> dict[str, Any]:
    if f is None:
        return {}
    rtt, pcap, owd = f.tcp_rtt_ms, f.pcap, f.owd_ms
    return {"flow": f.index, "direction": f.direction, "cc": f.cc, "flow_rtt_ms": f.rtt_ms,
            "start_s": f.start_s, "first_data_s": f.first_data_s,
            "goodput_mbit": f.mean_mbit, "goodput_source": f.goodput_source,
            "netperf_mbit": f.netperf_mbit, "steady_mbit": f.steady_mbit, "steady_excluded": f.steady_excluded,
            "socket_source": f.socket_source,
            "owd_p50_ms": owd.median if owd else None, "owd_p95_ms": owd.p95 if owd else None,
            "owd_p99_ms": owd.p99 if owd else None, "loss_pct": 100 * owd.loss if owd else None,
            "owd_unavailable": f.owd_unavailable, "retrans": pcap.retrans if pcap else None,
            "tcp_rtt_median_ms": rtt.median if rtt else None, "tcp_rtt_p95_ms": rtt.p95 if rtt else None,
            "tcp_rtt_p99_ms": rtt.p99 if rtt else None, "packets_sent": pcap.sent if pcap else None,
            "packets_received": pcap.received if pcap else None,
            "loss": pcap.loss if pcap else None,
            "loss_pantheon_pct": 100 * owd.loss_by_end if owd and owd.loss_by_end is not None else None,
            **{f"received_{k}": pcap.ecn_received.get(k, 0) if pcap else None for k in ECN}}


def _queue_columns(q: QueueSummary | None) -> dict[str, Any]:
    """The bottleneck queue the flow went through (its direction's), while every flow ran."""
    if q is None:
        return {"queue_delay_mean_ms": None, "queue_delay_p95_ms": None}
    delay, pkts = q.delay_ms, q.backlog_pkts
    cols = {"queue_delay_mean_ms": delay.mean if delay else None, "queue_delay_p95_ms": delay.p95 if delay else None,
            "queue_backlog_mean_pkts": pkts.mean if pkts else None, "queue_backlog_p95_pkts": pkts.p95 if pkts else None,
            "queue_drops": q.drops, "queue_marks": q.marks}
    own = {"pkts_in_c": q.pkts_in_c, "pkts_in_l": q.pkts_in_l, "step_marks": q.step_marks,
           "delay_c_p95_ms": q.delay_c_ms and q.delay_c_ms.p95, "delay_l_p95_ms": q.delay_l_ms and q.delay_l_ms.p95,
           "delay_avg_p95_ms": q.delay_avg_ms and q.delay_avg_ms.p95}
    return cols | {f"queue_{k}": v for k, v in own.items() if v is not None}  # where the qdisc reports them


#: The declared qdisc's totals over the cell (tc's counters after the test): columns
#: qdisc_total_* for every qdisc, dualpi2_* where dualpi2 reports them.
TOTALS = ("sent_pkts", "drops", "backlog_pkts")
DUALPI2 = ("pkts_in_c", "pkts_in_l", "ecn_marks", "step_marks", "maxq", "credit", "prob", "delay_c_us", "delay_l_us")


def _totals_columns(q: QdiscTotals | None) -> dict[str, Any]:
    """The flow's direction's qdisc over the whole cell."""
    if q is None:
        return {}
    cols = {f"qdisc_total_{k}": getattr(q, k) for k in TOTALS}
    return cols | {f"dualpi2_{k}": getattr(q, k) for k in DUALPI2 if q.kind == "dualpi2"}


def write_csv(data: list[dict[str, Any]], path: Path) -> None:
    columns: list[str] = []
    for r in data:
        columns += [k for k in r if k not in columns]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(data)


def summary(result: RunResult) -> dict[str, Any]:
    per = {s.name: {"cells": len(s.cells) + len(s.unreadable), "by_status": s.status_counts(), **s.findings()}
           for s in result.scenarios}
    return {"run": result.name, "provenance": result.provenance.model_dump(mode="json"), "scenarios": per,
            "unreadable_scenarios": result.unreadable}


def write_summary(result: RunResult, path: Path) -> None:
    path.write_text(json.dumps(summary(result), indent=1, default=_jsonable))


def _jsonable(o: object) -> object:
    """Models (flags) as their data, anything else as its text."""
    return o.model_dump(mode="json") if isinstance(o, BaseModel) else str(o)
