"""One cell from one combination of axis values: its configuration, name and hash."""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ScenarioError
from ..flent_tests import FLENT_LEAD_S, FlentTest, flow_count
from ..qdisc import QdiscContext, default_label, is_self_shaping, render, render_text
from ..results.cell_record import CellConfig, FlowConfig, LinkConfig, Links, NetemConfig, SchemeConfig, StepConfig
from ..scenario.schema import AXES, NAMED_AXES, Scenario
from ..scenario.schemes import Scheme
from ..scenario.values import Point, QdiscSpec, check_sysctl_value
from ..units import Duration, Rate
from .model import FLOW_DSCPS, Cell, jsonable

#: Bumped when the meaning of a resolved configuration changes (invalidates resume).
CONFIG_FORMAT = 1


def make_cell(scenario: Scenario, combo: dict[str, Point], rep: int, path: Path, repeated: bool = False,
              schemes: dict[str, Scheme] | None = None) -> Cell:
    """The cell of COMBO, run REP (1-based; REPEATED: its sub-matrix runs it more than once);
    SCHEMES: the user-space congestion controllers a flow's cc may name (scenario/schemes.py)."""
    test: FlentTest = combo["test"].value
    flows = _flows(test, _flow_total(test, combo, path), combo, path)
    used = _schemes(flows, schemes or {}, combo, path)
    variables = {**scenario.vars, **{k: v for p in combo.values() for k, v in p.vars.items()}}
    rtt = max((Duration.parse(f.rtt) for f in flows), key=lambda d: d.seconds, default=Duration.of_seconds(0))

    def links(up: Rate, down: Rate) -> dict[str, LinkConfig]:
        return {"up": _link(combo["qdisc"], up, "up", rtt, variables, path),
                "down": _link(combo["qdisc"], down, "down", rtt, variables, path)}

    bottleneck = Links(**links(combo["rate"].value.up, combo["rate"].value.down))
    config = _config(scenario, test, combo, rep, flows, bottleneck, links, variables, path)
    if used:
        config = config.model_copy(update={"schemes": used})
    coords = _with_rendered_qdisc_label(combo, bottleneck)
    swept = tuple(scenario.swept_axes())
    named = [a for a in AXES if a in swept and a in coords and a not in NAMED_AXES
             and not (a == "replay_window" and config.tunnel != "ipsec")]  # only IPsec has one
    parts = [coords[a].slug for a in NAMED_AXES] + [coords[a].slug for a in named]
    if repeated:
        parts.append(f"r{rep}")
    return Cell(scenario.name or path.stem, "-".join(parts), rep, coords, swept, config, config_hash(config))


def _schemes(flows: list[FlowConfig], known: dict[str, Scheme], combo: dict[str, Point],
             path: Path) -> dict[str, SchemeConfig]:
    """The schemes the flows name, as the cell runs them; a flow a scheme cannot run
    (another direction than client to server, a start delay, a mark on the path, another
    receiver's CC) is an error naming the key."""
    used = {f.cc: known[f.cc] for f in flows if f.cc in known}
    if not used:
        return {}
    if len({f.direction for f in flows if f.cc not in used}) > 1:
        raise ScenarioError(path, combo["test"].key, "a test with kernel flows both ways runs no scheme beside them")
    for i, f in enumerate(flows):
        if f.cc not in used:
            continue
        why = ("a scheme's sender runs on the client: its flow goes up (a test of uploads)" if f.direction != "up"
               else "a scheme's flow starts with the others (no start delay)" if f.start
               else "a scheme sets no DSCP, so its flow has the path's one treatment (one RTT, no per-flow ECN action)"
               if f.tos is not None or f.ecn else "a scheme's receiver is its own program" if f.receiver_cc else None)
        if why:
            axis = {"a scheme's receiver is its own program": "receiver_cc"}.get(why, "cc")
            raise ScenarioError(path, combo[axis].key, f"flow {i + 1} runs scheme {f.cc}: {why}")
    return {name: SchemeConfig(title=s.title, implementation=s.implementation, version=s.version,
                               transport=s.transport, listens=s.listens, needs=list(s.needs),
                               setup={side: [list(a) for a in cmds] for side, cmds in s.setup.items() if cmds},
                               sender=list(s.commands["sender"]), receiver=list(s.commands["receiver"]),
                               stdin=dict(s.stdin), stdout={k: v for k, v in s.stdout.items() if v != "log"},
                               env={side: dict(e) for side, e in s.env.items() if e}, stop=s.stop)
            for name, s in used.items()}


def _config(scenario: Scenario, test: FlentTest, combo: dict[str, Point], rep: int, flows: list[FlowConfig],
            bottleneck: Links, links: Callable[[Rate, Rate], dict[str, LinkConfig]], variables: dict[str, Any],
            path: Path) -> CellConfig:
    """The fully resolved configuration that is hashed and recorded (cell.json's config);
    features left at their defaults are left out, so adding a feature to fl never changes
    the hash of cells that do not use it."""
    netem, tunnel = combo["netem"].value if "netem" in combo else None, combo["tunnel"].value
    client_q, udp = combo["client_qdisc"].value, combo["udp"].value
    split = combo["rtt_split"].value if "rtt_split" in combo else "even"
    schedule = combo["rate_schedule"].value if "rate_schedule" in combo else ()
    extras = {
        "netem": NetemConfig(**jsonable(netem)) if netem else None,
        "rtt_split": split if split != "even" else None,
        "rate_schedule": [StepConfig(at=s.at.text, **links(s.up, s.down)) for s in schedule] or None,
        "tunnel": tunnel if tunnel != "none" else None,
        "replay_window": combo["replay_window"].value if tunnel == "ipsec" else None,
        "client_qdisc": " ".join(client_q.split()) if client_q else None,
        "udp": udp.text if udp else None,
        "video": combo["video"].value,
        "probe": combo["probe"].value,
        "lead": scenario.lead if scenario.lead != FLENT_LEAD_S else None,
        "module_params": combo["module_params"].value if "module_params" in combo else None,
    }
    sysctls = _sysctls(combo, [f.cc for f in flows], variables, path) if "sysctls" in combo else {}
    return CellConfig(format=CONFIG_FORMAT, test=test.name, length=combo["length"].value, step_size=scenario.step_size,
                      repetition=rep, flows=flows, bottleneck=bottleneck, sysctls=sysctls,
                      **{k: v for k, v in extras.items() if v is not None})


def config_hash(config: CellConfig) -> str:
    """The configuration's canonical JSON, hashed: a rerun keeps a cell done with the same."""
    return hashlib.sha256(json.dumps(config.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()[:16]


def _with_rendered_qdisc_label(combo: dict[str, Point], bottleneck: Links) -> dict[str, Point]:
    """A qdisc with {{ }} and no label is named after what it renders to in this cell."""
    coords = dict(combo)
    point = combo["qdisc"]
    if not point.explicit_label and "{{" in point.value.template:
        up_l, down_l = default_label(bottleneck.up.qdisc), default_label(bottleneck.down.qdisc)
        label = up_l if up_l == down_l else f"{up_l}-{down_l}"
        coords["qdisc"] = Point(point.value, label, point.raw, point.key, point.vars)
    return coords


def _flow_total(test: FlentTest, combo: dict[str, Point], path: Path) -> int:
    flows = combo.get("flows")
    if test.streams_param and flows is None:
        raise ScenarioError(path, combo["test"].key, f"{test.name} needs 'flows:' (the number of streams)")
    if not test.streams_param and flows is not None:
        raise ScenarioError(path, flows.key, f"{test.name} has a fixed number of flows; "
                            "'flows' is for tcp_nup and tcp_ndown")
    return flow_count(test, flows.value if flows else None)


def _per_flow(combo: dict[str, Point], axis: str, what: str, test: FlentTest, n: int, path: Path) -> list[Any]:
    """An axis value given once for all flows or once per flow, as one value per flow."""
    point = combo[axis]
    items = list(point.value)
    if len(items) not in (1, n):
        raise ScenarioError(path, point.key, f"{len(items)} {what} for {n} flow(s) of {test.name}: "
                            "give one for all flows or one per flow")
    if len(set(items)) > 1 and not test.per_flow:
        raise ScenarioError(path, point.key, f"{test.name} cannot set {what} per flow; "
                            "use one value, or a tcp_Nup/tcp_nup test")
    return items * n if len(items) == 1 else items


def _flows(test: FlentTest, n: int, combo: dict[str, Point], path: Path) -> list[FlowConfig]:
    ccs = _per_flow(combo, "cc", "congestion controls", test, n, path)
    rtts = _per_flow(combo, "rtt", "RTTs", test, n, path)
    starts = _per_flow(combo, "start", "start times", test, n, path)
    ecns = _per_flow(combo, "ecn", "ECN actions", test, n, path)
    marked = len(set(rtts)) > 1 or any(e != "none" for e in ecns)  # flows told apart on the path
    if marked and n > len(FLOW_DSCPS):
        raise ScenarioError(path, combo["rtt"].key, f"per-flow path treatment supports at most "
                            f"{len(FLOW_DSCPS)} flows")
    directions = ["up"] * test.up + ["down"] * test.down if not test.streams_param else \
        ["up" if test.streams_param == "upload_streams" else "down"] * n

    receiver = combo["receiver_cc"].value if "receiver_cc" in combo else None
    if receiver and not test.per_flow and len(set(directions)) > 1:
        raise ScenarioError(path, combo["receiver_cc"].key, f"{test.name} sets one congestion control for flows "
                            "both ways: a receiver's own needs flows one way (tcp_1up, tcp_Nup, tcp_Ndown …)")

    def flow(i: int) -> FlowConfig:
        extra = ({"start": starts[i].text} if starts[i].seconds else {}) | ({"ecn": ecns[i]} if ecns[i] != "none" else {}) \
            | ({"receiver_cc": receiver} if receiver else {})
        return FlowConfig(direction=directions[i], cc=ccs[i], rtt=rtts[i].text,
                          tos=FLOW_DSCPS[i] << 2 if marked else None, **extra)
    return [flow(i) for i in range(n)]


def _sysctls(combo: dict[str, Point], ccs: list[str], variables: dict[str, Any],
             path: Path) -> dict[str, dict[str, str]]:
    """Sysctl values for this cell: {{ }} rendered with its CCs and vars, checked again."""
    point = combo["sysctls"]
    names = {**variables, "cc": ccs}
    out: dict[str, dict[str, str]] = {}
    try:
        for host, settings in point.value.items():
            out[host] = {k: check_sysctl_value(k, render_text(v, names, f"sysctl {k}").strip())
                         if "{{" in v else v for k, v in settings.items()}
    except ValueError as e:
        raise ScenarioError(path, point.key, str(e)) from None
    return out


def _link(point: Point, rate: Rate, direction: str, rtt: Duration, variables: dict[str, Any],
          path: Path) -> LinkConfig:
    spec: QdiscSpec = point.value
    try:
        tokens = render(spec.template, QdiscContext(rate, rtt, variables, direction))
    except ValueError as e:
        raise ScenarioError(path, point.key, str(e)) from None
    return LinkConfig(rate=rate.text, rate_bps=rate.bps, qdisc=" ".join(tokens),
                      self_shaping=is_self_shaping(tokens, spec.shaper))
