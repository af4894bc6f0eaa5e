"""What a cell is: its place in the scenario (name, coordinates) and its one typed,
fully resolved configuration (results/cell_record.py's CellConfig: what is hashed,
recorded in cell.json and rendered into each host's commands)."""
from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass
from typing import Any

from pydantic import BaseModel

from ..flent_tests import FlentTest
from ..results.cell_record import CellConfig
from ..scenario.values import LinkRate, Point, QdiscSpec
from ..units import Duration, Rate

#: DSCPs with no standard meaning (odd, not LE), so no qdisc gives a flow special
#: treatment; flow i is marked with the i-th when flows must be told apart on the path.
FLOW_DSCPS = (19, 35, 51, 3, 5, 7, 9, 11, 13, 15, 17, 21, 23, 25, 27, 29, 31, 33, 37, 39)


@dataclass(frozen=True)
class Cell:
    scenario: str
    name: str
    repetition: int
    coords: dict[str, Point]  # every axis, fixed ones included
    swept: tuple[str, ...]
    config: CellConfig  # the fully resolved configuration, as hashed and recorded
    config_hash: str

    @property
    def test(self) -> FlentTest:
        return self.config.flent_test

    def coordinates(self) -> dict[str, Any]:
        """Typed coordinates for cell.json and Flent metadata: label and value per axis."""
        out = {axis: {"label": p.label, "value": jsonable(p.value)} for axis, p in self.coords.items()}
        out["repetition"] = {"label": f"r{self.repetition}", "value": self.repetition}
        return out


def jsonable(value: Any) -> Any:
    """Typed values as JSON: rates and durations with their numbers."""
    if isinstance(value, LinkRate):
        return {"up": value.up.text, "down": value.down.text, "up_bps": value.up.bps, "down_bps": value.down.bps}
    if isinstance(value, QdiscSpec):
        return {"spec": value.template, "shaper": value.shaper}
    if isinstance(value, FlentTest):
        return value.name
    if isinstance(value, Duration):
        return {"text": value.text, "ms": value.ms}
    if isinstance(value, Rate):
        return {"text": value.text, "bps": value.bps}
    if isinstance(value, (tuple, list)):
        return [jsonable(v) for v in value]
    if is_dataclass(value):
        return {f.name: jsonable(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, BaseModel):  # a part of the cell's configuration (the video flow)
        return value.model_dump(mode="json", exclude_none=True)
    return value
