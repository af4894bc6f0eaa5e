"""The scenario file schema: one pydantic model defines every key and every axis.

A setting written at the top level has one value; the same setting under ``matrix:``
lists the values to sweep. Cells are the cross product of the matrix, pruned by
``include``/``exclude`` rules, times ``repetitions``.
"""
from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from .values import Point, check_name, check_vars, parse_point

#: Axes in the order they appear in cell names; 'rtt' and 'length' have defaults.
AXES = ("cc", "qdisc", "rate", "rtt", "test", "flows", "length", "sysctls")
NAMED_AXES = ("cc", "qdisc", "rate", "rtt")  # always part of a cell name
REQUIRED_AXES = ("test", "rate", "qdisc", "cc")
DEFAULTS: dict[str, Any] = {"rtt": "0ms", "length": 60}


def _point(axis: str) -> Any:
    return Annotated[Point, BeforeValidator(lambda raw: parse_point(axis, raw, ""))]


def _axis_list(axis: str) -> Any:
    return Annotated[list[_point(axis)] | None, Field(default=None, min_length=1)]


_STRICT = ConfigDict(extra="forbid", arbitrary_types_allowed=True, frozen=True)


class Matrix(BaseModel):
    """Axes to sweep: each key lists the values one cell coordinate takes."""

    model_config = _STRICT
    cc: _axis_list("cc")
    qdisc: _axis_list("qdisc")
    rate: _axis_list("rate")
    rtt: _axis_list("rtt")
    test: _axis_list("test")
    flows: _axis_list("flows")
    length: _axis_list("length")
    sysctls: _axis_list("sysctls")

    @field_validator(*AXES)
    @classmethod
    def _no_duplicates(cls, points: list[Point] | None) -> list[Point] | None:
        seen: dict[str, int] = {}
        for i, p in enumerate(points or []):
            for key in {repr(p.value), p.slug}:
                if key in seen:
                    raise ValueError(f"value {p.raw!r} (item {i}) repeats item {seen[key]}")
                seen[key] = i
        return points

    @model_validator(mode="after")
    def _not_empty(self) -> "Matrix":
        if not self.declared():
            raise ValueError("the matrix is empty: list at least one axis, e.g. rate: [10mbit, 50mbit]")
        return self

    def declared(self) -> list[str]:
        return [a for a in AXES if getattr(self, a) is not None]


class Scenario(BaseModel):
    """A scenario file after ``extends`` are merged."""

    model_config = _STRICT
    name: Annotated[str | None, BeforeValidator(lambda v: v if v is None else check_name(v, "name"))] = None
    description: str = ""
    extends: list[str] = []
    test: _point("test") | None = None
    rate: _point("rate") | None = None
    rtt: _point("rtt") | None = None
    qdisc: _point("qdisc") | None = None
    cc: _point("cc") | None = None
    flows: _point("flows") | None = None
    length: _point("length") | None = None
    sysctls: _point("sysctls") | None = None
    step_size: float = Field(0.05, ge=0.01, le=10)
    repetitions: int = Field(1, ge=1, le=1000)
    qdiscs: dict[Annotated[str, BeforeValidator(check_name)], _point("qdisc")] = {}
    vars: Annotated[dict[str, Any], BeforeValidator(check_vars)] = {}
    matrix: Matrix | None = None
    include: list[dict[str, Any]] = []
    exclude: list[dict[str, Any]] = []

    def check_axes(self) -> tuple[str, str] | None:
        """(key, problem) if an axis is set twice or a required one is missing."""
        swept = self.swept_axes()
        for axis in AXES:
            if axis in swept and getattr(self, axis) is not None:
                return axis, "set both here and under matrix: keep one"
        for axis in REQUIRED_AXES:
            if axis not in swept and getattr(self, axis) is None:
                return axis, f"missing: give '{axis}:' or list values under 'matrix.{axis}:'"
        return None

    def axes(self) -> dict[str, list[Point]]:
        """Every axis with its values (one value for fixed settings), key paths filled in."""
        out: dict[str, list[Point]] = {}
        for axis in AXES:
            swept = getattr(self.matrix, axis) if self.matrix else None
            if swept is not None:
                out[axis] = [dataclasses.replace(p, key=f"matrix.{axis}[{i}]") for i, p in enumerate(swept)]
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

    def swept_axes(self) -> list[str]:
        return self.matrix.declared() if self.matrix else []
