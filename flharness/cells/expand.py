"""Matrix expansion: the union of the scenario's cross products, pruned by its rules."""
from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from ..errors import ScenarioError
from ..results import run_folder
from ..scenario.schema import Scenario
from ..scenario.schemes import Scheme, load_schemes
from ..scenario.values import Point
from .model import Cell
from .resolve import make_cell


def expand(scenario: Scenario, path: Path) -> list[Cell]:
    """All cells of a scenario, in matrix order; raises ScenarioError on inconsistent input."""
    axes_list = scenario.axes_list()
    schemes = scenario_schemes(scenario, path)
    combos = [(dict(zip(axes, values)), reps) for axes, reps in zip(axes_list, scenario.repetitions_list())
              for values in itertools.product(*axes.values())]
    kept = _prune(combos, scenario, _union(axes_list), path)
    cells: dict[str, Cell] = {}
    for combo, reps in kept:
        for rep in range(1, reps + 1):
            cell = make_cell(scenario, combo, rep, path, repeated=reps > 1, schemes=schemes)
            other = cells.get(cell.name)
            if other is not None and other.config_hash != cell.config_hash:
                raise ScenarioError(path, cell.coords["qdisc"].key,
                                    f"two different cells get the name {cell.name!r}: give the "
                                    "values distinct labels ({value: ..., label: ...})")
            if other is not None and len(axes_list) == 1:
                raise ScenarioError(path, cell.coords["qdisc"].key,
                                    f"two axis values give the same cell {cell.name!r}")
            cells[cell.name] = cell  # a cell two sub-matrices share is run once
    return list(cells.values())


def scenario_schemes(scenario: Scenario, path: Path) -> dict[str, Scheme]:
    """The shipped schemes and the files the scenario names (relative to its folder); never
    a file in a results folder (one with a run.json above it): what a run left is not run."""
    named = []
    for i, name in enumerate(scenario.schemes):
        file = (path.parent / name).resolve()
        if not file.is_file():
            raise ScenarioError(path, f"schemes[{i}]", f"no scheme file {file}")
        if any((d / run_folder.RUN_RECORD).is_file() for d in file.parents):
            raise ScenarioError(path, f"schemes[{i}]", f"{file} is in a results folder: fl runs no scheme file from one")
        named.append(file)
    return load_schemes(named)


def _union(axes_list: list[dict[str, list[Point]]]) -> dict[str, list[Point]]:
    union: dict[str, list[Point]] = {}
    for axes in axes_list:
        for axis, points in axes.items():
            union.setdefault(axis, []).extend(points)
    return union


def _prune(combos: list[tuple[dict[str, Point], int]], scenario: Scenario, axes: dict[str, list[Point]],
           path: Path) -> list[tuple[dict[str, Point], int]]:
    includes = [_check_rule(r, f"include[{i}]", axes, path) for i, r in enumerate(scenario.include)]
    excludes = [_check_rule(r, f"exclude[{i}]", axes, path) for i, r in enumerate(scenario.exclude)]
    for i, e in enumerate(scenario.expect):  # they select cells as include does
        if e.rule:
            _check_rule(e.rule, f"expect[{i}]", axes, path)
        if e.baseline:
            _check_rule(e.baseline, f"expect[{i}].baseline", axes, path)

    def hit(rule: dict[str, list[Any]], combo: dict[str, Point]) -> bool:
        return all(any(combo[a].matches(v) for v in vals) for a, vals in rule.items())

    kept = [(c, n) for c, n in combos if (not includes or any(hit(r, c) for r in includes))
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
                known = ", ".join(dict.fromkeys(p.label for p in axes[axis]))
                raise ScenarioError(path, f"{key}.{axis}", f"{v!r} is none of the {axis} values ({known})")
        out[axis] = values
    return out
