"""The scenario file schema: one pydantic model defines every key and every axis.

A setting written at the top level has one value; the same setting under ``matrix:``
lists the values to sweep. ``matrix`` may also be a list of such mappings: the cells
are then the union of their cross products (e.g. one file for several experiments).
Cells are pruned by ``include``/``exclude`` rules and repeated ``repetitions`` times.
"""
from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, create_model, field_validator, model_validator

from ..flent_tests import FLENT_LEAD_S
from .expectations import Expectation, parse_expectation
from .values import AXIS_PARSERS, Point, check_name, check_vars, parse_point, parse_seconds

#: Every axis, in the order they appear in cell names (from the parsers' registry).
AXES = ("cc", "qdisc", "rate", "rtt", *[a for a in AXIS_PARSERS if a not in ("cc", "qdisc", "rate", "rtt")])
NAMED_AXES = ("cc", "qdisc", "rate", "rtt")  # always part of a cell name
REQUIRED_AXES = ("test", "rate", "qdisc", "cc")
DEFAULTS: dict[str, Any] = {"rtt": "0ms", "length": 60, "start": "0s", "ecn": "none",
                            "client_qdisc": "none", "udp": "none", "video": "none", "probe": "none", "receiver_cc": "same",
                            "tunnel": "none", "replay_window": 32}


def _point(axis: str) -> Any:
    return Annotated[Point, BeforeValidator(lambda raw: parse_point(axis, raw, ""))]


_STRICT = ConfigDict(extra="forbid", arbitrary_types_allowed=True, frozen=True)


def _no_duplicates(cls: type, points: list[Point] | None) -> list[Point] | None:
    seen: dict[str, int] = {}
    for i, p in enumerate(points or []):
        for key in {repr(p.value), p.slug}:
            if key in seen:
                raise ValueError(f"value {p.raw!r} (item {i}) repeats item {seen[key]}")
            seen[key] = i
    return points


class _MatrixBase(BaseModel):
    model_config = _STRICT
    #: runs of each of this sub-matrix's cells (a list of matrices only; default: the scenario's)
    repetitions: int | None = Field(None, ge=1, le=1000)

    def declared(self) -> list[str]:
        return [a for a in AXES if getattr(self, a) is not None]


def _swept(axis: str) -> Any:
    return Annotated[list[_point(axis)] | None, Field(min_length=1)]  # type: ignore[misc]


_SWEPT: dict[str, Any] = {a: (_swept(a), None) for a in AXES}
_FIXED: dict[str, Any] = {a: (_point(a) | None, None) for a in AXES}
#: Axes to sweep: each key lists the values one cell coordinate takes.
Matrix = create_model("Matrix", __base__=_MatrixBase,
                      __validators__={"no_duplicates": field_validator(*AXES)(_no_duplicates)}, **_SWEPT)
#: Every axis as a top-level key with one value.
_Axes = create_model("_Axes", __config__=_STRICT, **_FIXED)
if TYPE_CHECKING:
    QdiscPoint = Point
else:
    QdiscPoint = _point("qdisc")


def _scheme_path(raw: Any) -> str:
    """A scheme file a scenario names: a path (relative to the scenario's folder) of a .yml file."""
    text = str(raw)
    if not re.match(r"^[\w.+/-]{1,300}\.ya?ml\Z", text):
        raise ValueError(f"{text!r}: a scheme file's path, relative to the scenario's folder or absolute "
                         "(letters, digits, _ . + - /), ending in .yml")
    return text


def _matrices(raw: Any) -> Any:
    """One matrix is a list of one; an empty matrix is an error."""
    items = raw if isinstance(raw, list) else [raw]
    if not items or any(isinstance(m, dict) and not m for m in items):
        raise ValueError("the matrix is empty: list at least one axis, e.g. rate: [10mbit, 50mbit]")
    return items


class Analysis(BaseModel):
    """How `fl plot` summarises the scenario (never part of a cell's configuration)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    #: steady-state window, ending 1 s before each flow's last sample (default: min(60 s, 2/3 of the test))
    steady_window: Annotated[float | None, BeforeValidator(lambda v: v if v is None else parse_seconds(v))] = None
    fairness: Literal["jain", "ratio"] = "jain"  # the last column of the fairness table


class Scenario(_Axes):
    """A scenario file after ``extends`` are merged."""

    name: Annotated[str | None, BeforeValidator(lambda v: v if v is None else check_name(v, "name"))] = None
    description: str = ""
    extends: list[str] = []
    step_size: float = Field(0.05, ge=0.01, le=10)
    #: Flent's lead-in and lead-out (-d), whole seconds: its ping alone before and after the flows
    lead: int = Field(FLENT_LEAD_S, ge=1, le=60)
    repetitions: int = Field(1, ge=1, le=1000)
    qdiscs: dict[Annotated[str, BeforeValidator(check_name)], QdiscPoint] = {}
    vars: Annotated[dict[str, Any], BeforeValidator(check_vars)] = {}
    matrix: Annotated[list[Matrix] | None, BeforeValidator(_matrices)] = None
    matrix_is_list: bool = False  # set by fl: the file wrote a list of matrices
    analysis: Analysis = Analysis()
    include: list[dict[str, Any]] = []
    exclude: list[dict[str, Any]] = []
    #: thresholds on the cells' metrics, judged by `fl plot` (scenario/expectations.py)
    expect: list[Annotated[Expectation, BeforeValidator(parse_expectation)]] = []
    #: published values this scenario reproduces: references/NAME.yml (scenario/reference.py)
    reference: Annotated[str | None, BeforeValidator(lambda v: v if v is None else check_name(v, "reference"))] = None
    #: the claims its `expect:` entries state (`finding: N`): references/findings/NAME.yml
    findings: Annotated[str | None, BeforeValidator(lambda v: v if v is None else check_name(v, "findings"))] = None
    #: scheme files beside the shipped ones (schemes/), relative to the scenario's folder (scenario/schemes.py)
    schemes: list[Annotated[str, BeforeValidator(_scheme_path)]] = []

    @model_validator(mode="before")
    @classmethod
    def _note_matrix_form(cls, data: Any) -> Any:
        if isinstance(data, dict):
            if "matrix_is_list" in data:
                raise ValueError("unknown key 'matrix_is_list'")
            data = {**data, "matrix_is_list": isinstance(data.get("matrix"), list)}
        return data

    def matrices(self) -> list[Any]:
        return self.matrix or []

    def swept_axes(self) -> list[str]:
        """Axes swept in any sub-matrix, in name order."""
        swept = {a for m in self.matrices() for a in m.declared()}
        return [a for a in AXES if a in swept]

    def check_axes(self) -> tuple[str, str] | None:
        """(key, problem) if an axis is set twice or a required one is missing."""
        for i, m in enumerate(self.matrices() or [None]):
            declared = m.declared() if m else []
            where = f"matrix[{i}]" if self.matrix_is_list else "matrix"
            if m is not None and m.repetitions is not None and not self.matrix_is_list:
                return "matrix.repetitions", "a single matrix repeats with the top-level 'repetitions:'"
            for axis in AXES:  # in a list of matrices, a sub-matrix may override a setting
                if axis in declared and getattr(self, axis) is not None and not self.matrix_is_list:
                    return axis, f"set both here and under {where}: keep one"
            for axis in REQUIRED_AXES:
                if axis not in declared and getattr(self, axis) is None:
                    return axis, f"missing: give '{axis}:' or list values under '{where}.{axis}:'"
        return None

    def repetitions_list(self) -> list[int]:
        """Per sub-matrix, how many times each of its cells runs."""
        return [(m.repetitions if m is not None else None) or self.repetitions for m in self.matrices() or [None]]

    def axes_list(self) -> list[dict[str, list[Point]]]:
        """Per sub-matrix, every axis with its values (one value for fixed settings)."""
        return [self._axes(m, f"matrix[{i}]" if self.matrix_is_list else "matrix")
                for i, m in enumerate(self.matrices() or [None])]

    def _axes(self, matrix: Any, where: str) -> dict[str, list[Point]]:
        out: dict[str, list[Point]] = {}
        for axis in AXES:
            swept = getattr(matrix, axis) if matrix is not None else None
            if swept is not None:
                out[axis] = [dataclasses.replace(p, key=f"{where}.{axis}[{i}]") for i, p in enumerate(swept)]
            elif (fixed := getattr(self, axis)) is not None:
                out[axis] = [dataclasses.replace(fixed, key=axis)]
            elif axis in DEFAULTS:
                out[axis] = [parse_point(axis, DEFAULTS[axis], f"{axis} (default)")]
        return self._resolve_presets(out)

    def _resolve_presets(self, axes: dict[str, list[Point]]) -> dict[str, list[Point]]:
        """A qdisc value naming an entry of ``qdiscs:`` takes that preset (label = its name)."""
        resolved = []
        for p in axes["qdisc"]:
            preset = self.qdiscs.get(p.raw) if isinstance(p.raw, str) else None
            if preset is not None:
                label = preset.label if preset.explicit_label else p.raw
                p = dataclasses.replace(preset, label=label, key=p.key, explicit_label=True,
                                        vars={**preset.vars, **p.vars})
            resolved.append(p)
        axes["qdisc"] = resolved
        return axes
