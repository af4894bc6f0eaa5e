"""Matrix expansion: scenario axes → cells with typed coordinates, a name and a config hash."""
from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ScenarioError
from .flent_tests import FlentTest, flow_count
from .qdisc import QdiscContext, default_label, is_self_shaping, render
from .scenario.schema import AXES, NAMED_AXES, Scenario
from .scenario.values import LinkRate, Point, QdiscSpec, slug
from .units import Duration, Rate

#: Bumped when the meaning of a resolved configuration changes (invalidates resume).
CONFIG_FORMAT = 1
#: DSCPs with no standard meaning (odd, not LE), so no qdisc gives a flow special
#: treatment; flow i is marked with the i-th when flows must be told apart on the path.
FLOW_DSCPS = (19, 35, 51, 3, 5, 7, 9, 11, 13, 15, 17, 21, 23, 25, 27, 29, 31, 33, 37, 39)


@dataclass(frozen=True)
class Flow:
    index: int  # 1-based, as in Flent's "TCP upload::1"
    direction: str  # 'up' (cli → srv) or 'down'
    cc: str
    rtt: Duration
    tos: int | None  # TOS byte set by the sender (DSCP << 2), None = unmarked


@dataclass(frozen=True)
class Link:
    """The bottleneck in one direction: a rate and the qdisc that holds the queue."""

    rate: Rate
    qdisc: tuple[str, ...]
    self_shaping: bool

    def as_json(self) -> dict[str, Any]:
        return {"rate": self.rate.text, "rate_bps": self.rate.bps, "qdisc": " ".join(self.qdisc),
                "self_shaping": self.self_shaping}


@dataclass(frozen=True)
class Cell:
    scenario: str
    name: str
    repetition: int
    coords: dict[str, Point]  # every axis, fixed ones included
    swept: tuple[str, ...]
    test: FlentTest
    length: float
    step_size: float
    flows: tuple[Flow, ...]
    up: Link
    down: Link
    sysctls: dict[str, dict[str, str]]
    config: dict[str, Any]  # the fully resolved configuration, JSON
    config_hash: str

    @property
    def per_flow_rtt(self) -> bool:
        return len({f.rtt for f in self.flows}) > 1

    @property
    def max_rtt(self) -> Duration:
        return max((f.rtt for f in self.flows), default=Duration.of_seconds(0))

    def coordinates(self) -> dict[str, Any]:
        """Typed coordinates for cell.json and Flent metadata: label and value per axis."""
        out = {axis: {"label": p.label, "value": _jsonable(p.value)} for axis, p in self.coords.items()}
        out["repetition"] = {"label": f"r{self.repetition}", "value": self.repetition}
        return out


def expand(scenario: Scenario, path: Path) -> list[Cell]:
    """All cells of a scenario, in matrix order; raises ScenarioError on inconsistent input."""
    axes = scenario.axes()
    names = list(axes)
    combos = [dict(zip(names, values)) for values in itertools.product(*axes.values())]
    kept = _prune(combos, scenario, axes, path)
    cells: dict[str, Cell] = {}
    for combo in kept:
        for rep in range(1, scenario.repetitions + 1):
            cell = _make_cell(scenario, combo, rep, path)
            if (other := cells.get(cell.name)) is not None:
                raise ScenarioError(path, cell.coords["qdisc"].key,
                                    f"two different cells get the name {cell.name!r}: give the "
                                    "values distinct labels ({value: ..., label: ...})"
                                    if other.config_hash != cell.config_hash else
                                    f"two axis values give the same cell {cell.name!r}")
            cells[cell.name] = cell
    return list(cells.values())


def _prune(combos: list[dict[str, Point]], scenario: Scenario, axes: dict[str, list[Point]],
           path: Path) -> list[dict[str, Point]]:
    includes = [_check_rule(r, f"include[{i}]", axes, path) for i, r in enumerate(scenario.include)]
    excludes = [_check_rule(r, f"exclude[{i}]", axes, path) for i, r in enumerate(scenario.exclude)]

    def hit(rule: dict[str, list[Any]], combo: dict[str, Point]) -> bool:
        return all(any(combo[a].matches(v) for v in vals) for a, vals in rule.items())

    kept = [c for c in combos if (not includes or any(hit(r, c) for r in includes))
            and not any(hit(r, c) for r in excludes)]
    if not kept:
        raise ScenarioError(path, "exclude" if excludes else "include",
                            "the include/exclude rules leave no cells to run")
    return kept


def _check_rule(rule: Any, key: str, axes: dict[str, list[Point]], path: Path) -> dict[str, list[Any]]:
    if not isinstance(rule, dict) or not rule:
        raise ScenarioError(path, key, "a rule maps axis names to a value or a list of values")
    out = {}
    for axis, wanted in rule.items():
        if axis not in axes:
            raise ScenarioError(path, f"{key}.{axis}", f"not an axis (axes: {', '.join(axes)})")
        values = wanted if isinstance(wanted, list) else [wanted]
        for v in values:
            if not any(p.matches(v) for p in axes[axis]):
                known = ", ".join(p.label for p in axes[axis])
                raise ScenarioError(path, f"{key}.{axis}", f"{v!r} is none of the {axis} values ({known})")
        out[axis] = values
    return out


def _make_cell(scenario: Scenario, combo: dict[str, Point], rep: int, path: Path) -> Cell:
    test: FlentTest = combo["test"].value
    n = _flow_total(test, combo, path)
    flows = _flows(test, n, combo, path)
    variables = {**scenario.vars, **{k: v for p in combo.values() for k, v in p.vars.items()}}
    rtt = max((f.rtt for f in flows), default=Duration.of_seconds(0))
    up, down = (_link(combo["qdisc"], rate, rtt, variables, path)
                for rate in (combo["rate"].value.up, combo["rate"].value.down))
    coords = dict(combo)
    if not combo["qdisc"].explicit_label and "{{" in combo["qdisc"].value.template:
        up_l, down_l = default_label(" ".join(up.qdisc)), default_label(" ".join(down.qdisc))
        label = up_l if up_l == down_l else f"{up_l}-{down_l}"
        coords["qdisc"] = Point(combo["qdisc"].value, label, combo["qdisc"].raw, combo["qdisc"].key,
                                combo["qdisc"].vars)
    sysctls = combo["sysctls"].value if "sysctls" in combo else {}
    config = {
        "format": CONFIG_FORMAT, "test": test.name, "length": combo["length"].value,
        "step_size": scenario.step_size, "repetition": rep,
        "flows": [{"direction": f.direction, "cc": f.cc, "rtt": f.rtt.text, "tos": f.tos} for f in flows],
        "bottleneck": {"up": up.as_json(), "down": down.as_json()},
        "sysctls": sysctls,
    }
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]
    swept = tuple(scenario.swept_axes())
    parts = [coords[a].slug for a in NAMED_AXES] + [coords[a].slug for a in AXES
                                                    if a in swept and a not in NAMED_AXES]
    if scenario.repetitions > 1:
        parts.append(f"r{rep}")
    return Cell(scenario.name or path.stem, "-".join(parts), rep, coords, swept, test,
                combo["length"].value, scenario.step_size, flows, up, down, sysctls, config, digest)


def _flow_total(test: FlentTest, combo: dict[str, Point], path: Path) -> int:
    flows = combo.get("flows")
    if test.streams_param and flows is None:
        raise ScenarioError(path, combo["test"].key, f"{test.name} needs 'flows:' (the number of streams)")
    if not test.streams_param and flows is not None:
        raise ScenarioError(path, flows.key, f"{test.name} has a fixed number of flows; "
                            "'flows' is for tcp_nup and tcp_ndown")
    return flow_count(test, flows.value if flows else None)


def _flows(test: FlentTest, n: int, combo: dict[str, Point], path: Path) -> tuple[Flow, ...]:
    ccs, rtts = combo["cc"].value, combo["rtt"].value
    for point, items, what in ((combo["cc"], ccs, "congestion controls"), (combo["rtt"], rtts, "RTTs")):
        if len(items) not in (1, n):
            raise ScenarioError(path, point.key, f"{len(items)} {what} for {n} flow(s) of {test.name}: "
                                "give one for all flows or one per flow")
        if len(set(items)) > 1 and not test.per_flow:
            raise ScenarioError(path, point.key, f"{test.name} cannot set {what} per flow; "
                                "use one value, or a tcp_Nup/tcp_nup test")
    per_flow_rtt = len(set(rtts)) > 1
    if per_flow_rtt and n > len(FLOW_DSCPS):
        raise ScenarioError(path, combo["rtt"].key, f"per-flow RTTs support at most {len(FLOW_DSCPS)} flows")
    directions = ["up"] * test.up + ["down"] * test.down if not test.streams_param else \
        ["up" if test.streams_param == "upload_streams" else "down"] * n
    return tuple(Flow(i + 1, directions[i], ccs[i if len(ccs) > 1 else 0], rtts[i if len(rtts) > 1 else 0],
                      FLOW_DSCPS[i] << 2 if per_flow_rtt else None) for i in range(n))


def _link(point: Point, rate: Rate, rtt: Duration, variables: dict[str, Any], path: Path) -> Link:
    spec: QdiscSpec = point.value
    try:
        tokens = render(spec.template, QdiscContext(rate, rtt, variables))
    except ValueError as e:
        raise ScenarioError(path, point.key, str(e)) from None
    return Link(rate, tuple(tokens), is_self_shaping(tokens, spec.shaper))


def _jsonable(value: Any) -> Any:
    if isinstance(value, LinkRate):
        return {"up": value.up.text, "down": value.down.text, "up_bps": value.up.bps, "down_bps": value.down.bps}
    if isinstance(value, QdiscSpec):
        return {"spec": value.template, "shaper": value.shaper}
    if isinstance(value, FlentTest):
        return value.name
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, Duration):
        return {"text": value.text, "ms": value.ms}
    return value
