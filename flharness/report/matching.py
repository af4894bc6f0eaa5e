"""Which cells of several runs are one experiment, for `fl compare`.

A comparison has sides: the runs named (the first is the baseline), or, with `--by AXIS`,
the cells of one run that share a value of AXIS. Cells are matched by scenario and by
their labels on the key axes: the axes any side sweeps in that scenario (a fixed axis's
value is its coordinate too), with `--match` adding axes and `--ignore` taking some away
(and `--by`'s axis, which tells the sides apart). Everything else a matched cell has, a
fixed rate, a qdisc's arguments, the kernel, is what the comparison compares. The
repetitions of a cell are pooled: they are its samples.
"""
from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import FlError
from ..scenario.schema import AXES
from .collect import CellResult, RunResult

REPETITION = "repetition"  # a coordinate of every cell, never a key axis: repetitions pool


@dataclass(frozen=True)
class Key:
    """A matched cell: its scenario and its labels on the scenario's key axes."""

    scenario: str
    labels: tuple[tuple[str, str], ...]  # (axis, label)

    @property
    def cell(self) -> str:
        """The cell's name as far as the key tells it (the labels, as fl names cells)."""
        return "-".join(label for _, label in self.labels) or "(one cell)"


@dataclass
class Side:
    """One column of a comparison: a run, or the cells of a run on one value of --by's axis."""

    name: str
    run: RunResult
    cells: list[CellResult]
    labels: tuple[str, ...] = ()  # with --by: the labels of the axis's value (one, or one per rendering)
    groups: dict[Key, list[CellResult]] | None = None  # by match(), repetitions together

    @property
    def value(self) -> str:
        """With --by, the value's labels as one text: pfifo_206/pfifo_1032."""
        return "/".join(self.labels)


@dataclass(frozen=True)
class Matching:
    """How the sides' cells were matched: the key axes per scenario."""

    axes: dict[str, list[str]]
    by: str | None = None


def check_axes(names: list[str], option: str) -> list[str]:
    unknown = [a for a in names if a not in AXES]
    if unknown:
        raise FlError(f"{option}: no axis {', '.join(map(repr, unknown))} (axes: {', '.join(AXES)})")
    return names


def run_sides(runs: list[RunResult]) -> list[Side]:
    names = [r.name for r in runs]
    if len(set(names)) < len(names):
        raise FlError(f"two runs have one name ({', '.join(names)}): compare runs of different labels")
    return [Side(r.name, r, r.cells()) for r in runs]


def axis_sides(result: RunResult, axis: str, baseline: str | None) -> list[Side]:
    """The cells of RESULT per value of AXIS, in the order the cells list them (BASELINE, one
    of a value's labels, first). A value is the one written in the scenario: a qdisc
    whose label is rendered per cell (pfifo_206 at 10 Mbit/s, pfifo_1032 at 50) is one."""
    values: dict[str, list[CellResult]] = defaultdict(list)
    for c in result.cells():
        if axis in c.record.swept and (coordinate := c.record.coordinates.get(axis)) is not None:
            values[json.dumps(coordinate.value, sort_keys=True)].append(c)
    if len(values) < 2:
        swept = sorted({a for c in result.cells() for a in c.record.swept})
        raise FlError(f"--by {axis}: {result.name} does not sweep {axis} (it sweeps: {', '.join(swept) or 'nothing'})")
    sides = []
    for cells in values.values():
        labels = tuple(dict.fromkeys(c.label(axis) or "–" for c in cells))
        sides.append(Side(f"{axis}={'/'.join(labels)}", result, cells, labels))
    if baseline is not None:
        chosen = [s for s in sides if baseline in s.labels]
        if not chosen:
            raise FlError(f"--baseline {baseline!r}: {result.name}'s {axis} takes {', '.join(s.value for s in sides)}")
        sides.remove(chosen[0])
        sides.insert(0, chosen[0])
    return sides


def match(sides: list[Side], extra: Sequence[str] = (), ignore: Sequence[str] = (), by: str | None = None) -> Matching:
    """Group each side's cells by key (in place: Side.groups); a side whose two different
    cells fall on one key is an error naming both and the axes that tell them apart."""
    scenarios = {c.scenario for s in sides for c in s.cells}
    axes = {sc: key_axes([c for s in sides for c in s.cells if c.scenario == sc], extra, [*ignore, *([by] if by else [])])
            for sc in sorted(scenarios)}
    for side in sides:
        side.groups = _groups(side, axes)
    return Matching(axes, by)


def key_axes(cells: list[CellResult], extra: Sequence[str], ignore: Sequence[str]) -> list[str]:
    swept = {a for c in cells for a in c.record.swept} | set(extra)
    return [a for a in AXES if a in swept and a not in ignore]


def key_of(cell: CellResult, axes: list[str]) -> Key:
    return Key(cell.scenario, tuple((a, cell.label(a) or "–") for a in axes))


def base_name(c: CellResult) -> str:
    """The cell's name without the repetition suffix fl adds to repeated cells."""
    return c.name.removesuffix(f"-r{c.record.config.repetition}")


def _groups(side: Side, axes: dict[str, list[str]]) -> dict[Key, list[CellResult]]:
    out: dict[Key, list[CellResult]] = defaultdict(list)
    for c in side.cells:
        key = key_of(c, axes[c.scenario])
        if out[key] and base_name(first := out[key][0]) != base_name(c):
            apart = _apart(first, c)
            raise FlError(f"{side.name}: cells {base_name(first)} and {base_name(c)} of {c.scenario} fall on one key "
                          f"({_describe(key)}); they differ in {', '.join(apart) or 'their configuration'}"
                          + (f": add --match {apart[0]}" if apart else ""))
        out[key].append(c)
    return dict(out)


def _apart(a: CellResult, b: CellResult) -> list[str]:
    """The axes on which two cells' labels differ (repetitions aside)."""
    return [x for x in AXES if x != REPETITION and a.label(x) != b.label(x)]


def _describe(key: Key) -> str:
    return ", ".join(f"{a}={v}" for a, v in key.labels) or "no key axis"


def differing_coordinates(base: list[CellResult], other: list[CellResult], axes: list[str]) -> list[tuple[str, str, str]]:
    """The labels that differ between two matched cells on axes outside the key: (axis,
    baseline's, other's)."""
    a, b = base[0], other[0]
    return [(x, a.label(x) or "–", b.label(x) or "–") for x in AXES
            if x not in axes and x != REPETITION and (a.label(x) or "–") != (b.label(x) or "–")]
