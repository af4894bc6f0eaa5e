"""Locate and read scenario files: strict YAML, ``extends`` merging, schema validation."""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .. import REPO
from ..errors import FlError, ScenarioError
from .findings import findings_path, load_findings
from .reference import load_reference
from .schema import AXES, Matrix, Scenario
from .values import valid_name
from .yaml_file import read_yaml

SCENARIO_DIR = REPO / "scenarios"
SUFFIXES = (".yml", ".yaml")


def find_scenario(name: str, base: Path = SCENARIO_DIR) -> Path:
    """NAME is a scenario in scenarios/ (without suffix) or a path to a scenario file."""
    if "/" in name or name.endswith(SUFFIXES):
        path = Path(name)
        if not path.is_file():
            raise FlError(f"{name}: no such scenario file")
        return path.resolve()
    valid_name(name, "scenario name")
    for suffix in SUFFIXES:
        if (path := base / f"{name}{suffix}").is_file():
            return path
    known = ", ".join(list_scenarios(base)) or "none"
    raise FlError(f"no scenario {name!r} in {base} (available: {known})")


def list_scenarios(base: Path = SCENARIO_DIR) -> list[str]:
    return sorted(p.stem for p in base.iterdir() if p.suffix in SUFFIXES) if base.is_dir() else []


def load_scenario(path: Path) -> Scenario:
    """Read, merge and validate a scenario; any problem raises ScenarioError(file, key)."""
    data = read_merged(path)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = tuple(err["loc"])
        if loc[:1] == ("matrix",) and len(loc) > 1 and loc[1] == 0 and not isinstance(data.get("matrix"), list):
            loc = loc[:1] + loc[2:]  # one matrix, written as a mapping
        raise ScenarioError(path, _key_path(loc), _message({**err, "loc": loc})) from None
    if (problem := scenario.check_axes()) is not None:
        raise ScenarioError(path, *problem)
    if scenario.reference:
        load_reference(scenario.reference, path)
    _check_findings(scenario, path)
    return scenario


def _check_findings(scenario: Scenario, path: Path) -> None:
    """Each `expect:` entry's finding is one of the scenario's findings file."""
    stated = [(i, e.finding) for i, e in enumerate(scenario.expect) if e.finding is not None]
    if not scenario.findings:
        if stated:
            raise ScenarioError(path, f"expect[{stated[0][0]}].finding", "the scenario names no findings file (findings:)")
        return
    known = load_findings(scenario.findings, path)
    for i, finding in stated:
        if known.get(finding) is None:
            raise ScenarioError(path, f"expect[{i}].finding", f"{finding} is not a finding of "
                                f"{findings_path(scenario.findings)} ({', '.join(str(f.id) for f in known.findings)})")


def read_merged(path: Path) -> dict[str, Any]:
    """The scenario's settings with its ``extends`` merged in; the name defaults to the file's."""
    data = _read_merged(path, ())
    data.setdefault("name", path.stem)
    return data


def _read_merged(path: Path, chain: tuple[Path, ...]) -> dict[str, Any]:
    """The file's settings on top of those of the files it ``extends`` (in order)."""
    path = path.resolve()
    if path in chain:
        raise ScenarioError(path, "extends", "extends itself through " + " → ".join(p.name for p in chain))
    data = read_yaml(path)
    parents = data.get("extends", [])
    if isinstance(parents, str):
        parents = [parents]
    if not isinstance(parents, list) or not all(isinstance(p, str) for p in parents):
        raise ScenarioError(path, "extends", "a file name or a list of file names")
    for i, parent in enumerate(parents):
        _check_parent_name(path, i, parent)
    merged: dict[str, Any] = {}
    for i, parent in enumerate(parents):
        merged = _merge(merged, _read_parent(path, i, parent, chain + (path,)))
    merged.pop("name", None)  # a name is never inherited
    return {**_merge(merged, data), "extends": parents}


def _check_parent_name(path: Path, i: int, parent: str) -> None:
    """extends names scenario files only: fl runs as root, and nothing else may be read
    (or quoted in an error) because a scenario names it; a link must lead to one too."""
    if not parent.endswith(SUFFIXES) or not (path.parent / parent).resolve().name.endswith(SUFFIXES):
        raise ScenarioError(path, f"extends[{i}]", f"{parent!r} is not a scenario file (.yml or .yaml)")


def _read_parent(path: Path, i: int, parent: str, chain: tuple[Path, ...]) -> dict[str, Any]:
    """The merged settings of PATH's extends[I]. A file whose keys are not scenario
    settings is refused without quoting them: it may be no scenario at all."""
    parent_path = path.parent / parent
    if not parent_path.is_file():
        raise ScenarioError(path, f"extends[{i}]", f"no such file {parent_path}")
    data = _read_merged(parent_path, chain)
    if isinstance(data.get("schemes"), list):  # a parent's scheme files, as its folder names them
        data["schemes"] = [os.path.relpath(parent_path.parent / f, path.parent) if isinstance(f, str) else f
                           for f in data["schemes"]]
    if unknown := [k for k in data if k not in Scenario.model_fields]:
        raise ScenarioError(path, f"extends[{i}]", f"{parent} is not a scenario file: {len(unknown)} of its "
                            f"keys are no scenario setting (`fl list {parent}` names them)")
    return data


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge mappings; an axis set in ``over`` (fixed or swept) replaces it in ``base``."""
    out = dict(base)
    matrix = over.get("matrix")
    over_matrix: dict[str, Any] = matrix if isinstance(matrix, dict) else {}  # else the schema says what is wrong
    if isinstance(out.get("matrix"), dict):
        out["matrix"] = {k: v for k, v in out["matrix"].items() if k not in over}
    for axis in AXES:
        if axis in over_matrix:
            out.pop(axis, None)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key != "sysctls":
            out[key] = _merge(out[key], value) if key != "matrix" else {**out[key], **value}
        else:
            out[key] = value
    return out


def _key_path(loc: tuple[Any, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item != "[key]":
            parts.append(("." if parts else "") + str(item))
    return "".join(parts) or "(top level)"


def _message(err: Mapping[str, Any]) -> str:
    if err["type"] == "extra_forbidden":
        model = Matrix if err["loc"][:1] == ("matrix",) else Scenario
        allowed = ", ".join(f for f in model.model_fields if f != "matrix_is_list")
        return f"unknown key {err['loc'][-1]!r} (allowed here: {allowed})"
    msg = str(err["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(prefix)
    if err["type"] in ("missing",):
        return "required key is missing"
    return msg
