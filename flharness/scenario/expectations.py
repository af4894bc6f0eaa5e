"""`expect:` in a scenario: thresholds on a cell's metrics that `fl plot` judges (✔/✘ in
the index, JUnit XML with --junit, a failing exit status with --strict).

    expect:
      - {qdisc: fq_codel, metric: jain, ">=": 0.95}
      - {metric: goodput_total_mbit, ">=": 0.9 * capacity_mbit}
      - {cc: cubic, metric: owd_p95_ms, flow: 1, "<": rtt_ms + 30}

Every key but `metric`, `flow`, `finding` (the number of the claim it states, in the
scenario's `findings:` file), `baseline` and one comparison selects cells as `include`
does (axis: value or list of values). The bound is a number or an expression of the
cell's physics: + - * / and parentheses over numbers and the names in PHYSICS, and with
`baseline: {axis: value, …}` the name `baseline`: the same metric (and flow) in the cell
that has those values and the judged cell's on every other axis, the mean over its
repetitions (a claim against a contrast: Cubic's share with a replay window "well below"
its share without one, `baseline: {replay_window: 0}`).
"""
from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: The metrics an expectation (or a reference file, or `fl compare`) can name: per flow
#: (a list in flow order) or per cell; report/measures.py defines how each is read.
METRICS = ("goodput_mbit", "dss_mbit", "owd_p50_ms", "owd_p95_ms", "owd_p99_ms", "loss_pct", "loss_pantheon_pct",
           "retrans", "goodput_total_mbit", "jain", "ratio", "utilisation", "queue_delay_p95_ms", "replay_drops",
           "rtt_peak_ms", "rtt_spike_ms", "rtt_spike_s", "probe_queueing_p50_ms", "probe_queueing_p99_ms",
           "probe_rtt_p99_ms", "video_received_mbit", "video_frame_loss_pct", "video_frame_delay_p99_ms")
#: The cell's physics an expectation's bound can use.
PHYSICS = {"capacity_mbit": "payload capacity of flow 1's direction (rate × 1448/1514) over the test, a rate "
                            "schedule's steps at their times (metrics.json capacity), Mbit/s",
           "rate_mbit": "bottleneck rate of flow 1's direction, Mbit/s",
           "rtt_ms": "the largest declared flow RTT, ms", "flows": "number of flows"}
OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}
_ARITH: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
BASELINE = "baseline"  # the bound's name for the metric in the baseline cell, and the key that names that cell
RESERVED = {"metric", "flow", "finding", BASELINE, *OPERATORS}


@dataclass(frozen=True)
class Expectation:
    rule: dict[str, list[Any]]  # axis → values, as an include rule
    metric: str
    flow: int | None  # 1-based; None: every flow of a per-flow metric
    op: str
    bound: str  # a number or an expression, as written
    finding: int | None = None  # the claim of the scenario's findings file it states
    baseline: dict[str, Any] | None = None  # axis → value: the cell the bound's `baseline` is read from

    @property
    def text(self) -> str:
        sel = ", ".join(f"{a} {'/'.join(map(str, v))}" for a, v in self.rule.items())
        flow = f" flow {self.flow}" if self.flow else ""
        claim = f" [finding {self.finding}]" if self.finding else ""
        base = ", ".join(f"{a} {v}" for a, v in (self.baseline or {}).items())
        return (f"{self.metric}{flow} {self.op} {self.bound}" + (f" ({sel})" if sel else "")
                + (f" [baseline: {base}]" if base else "") + claim)

    def limit(self, physics: dict[str, float]) -> float:
        return evaluate(self.bound, physics)


def parse_expectation(raw: Any) -> Expectation:
    """One item of `expect:`; ValueError (naming the key) when it is not one."""
    if not isinstance(raw, dict):
        raise ValueError("an expectation is a mapping: {metric: NAME, '>=': BOUND, axis: value, …}")
    ops = [k for k in raw if k in OPERATORS]
    if len(ops) != 1:
        raise ValueError(f"give exactly one comparison of {', '.join(OPERATORS)} (quote it in YAML: \">=\": 0.95)")
    metric = raw.get("metric")
    if metric not in METRICS:
        raise ValueError(f"metric {metric!r} is none of {', '.join(METRICS)}")
    flow = raw.get("flow")
    if flow is not None and (not isinstance(flow, int) or isinstance(flow, bool) or flow < 1):
        raise ValueError(f"flow {flow!r}: a flow number from 1")
    bound = raw[ops[0]]
    if isinstance(bound, bool) or not isinstance(bound, (int, float, str)):
        raise ValueError(f"{ops[0]}: {bound!r} is no number or expression")
    baseline = _baseline(raw.get(BASELINE))
    evaluate(str(bound), dict.fromkeys([*PHYSICS, *([BASELINE] if baseline else [])], 1.0))  # syntax, names, / 0
    finding = raw.get("finding")
    if finding is not None and (not isinstance(finding, int) or isinstance(finding, bool) or finding < 1):
        raise ValueError(f"finding {finding!r}: the number of a finding of the scenario's findings file")
    rule = {k: v if isinstance(v, list) else [v] for k, v in raw.items() if k not in RESERVED}
    return Expectation(rule, metric, flow, ops[0], str(bound), finding, baseline)


def _baseline(raw: Any) -> dict[str, Any] | None:
    """`baseline:`: axis → one value (the contrast cell), or None."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or not raw or any(isinstance(v, (list, dict)) or v is None for v in raw.values()):
        raise ValueError(f"{BASELINE}: a mapping of axes to one value each, the contrast cell's (replay_window: 0)")
    return {str(k): v for k, v in raw.items()}


#: The longest bound an expectation may write (a formula of a few names, not a program).
MAX_BOUND = 200


def evaluate(text: str, names: dict[str, float]) -> float:
    """TEXT (a number or + - * / over numbers and NAMES) as a finite number; ValueError
    for anything else (too long, dividing by zero, overflowing)."""
    if len(text) > MAX_BOUND:
        raise ValueError(f"{text[:40]!r}…: a bound of at most {MAX_BOUND} characters")
    try:
        value = _eval(ast.parse(text.strip(), mode="eval").body, text, names)
    except (SyntaxError, RecursionError, MemoryError):
        raise ValueError(f"{text!r} is no number or expression") from None
    except ZeroDivisionError:
        raise ValueError(f"{text!r} divides by zero") from None
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number")
    return value


def _eval(node: ast.AST, text: str, names: dict[str, float]) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.Name):
        if node.id not in names:
            hint = f"; '{BASELINE}' needs the expectation's {BASELINE}: key" if node.id == BASELINE else ""
            raise ValueError(f"{text!r}: unknown name {node.id!r} (names: {', '.join(names)}){hint}")
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        return _ARITH[type(node.op)](_eval(node.left, text, names), _eval(node.right, text, names))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, text, names)
    raise ValueError(f"{text!r}: only numbers, {', '.join(PHYSICS)}, + - * / and parentheses")
