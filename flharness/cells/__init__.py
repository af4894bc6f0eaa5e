"""Cells: the scenario's matrix expanded into runs with typed coordinates, names, hashes."""
from .expand import expand
from .model import FLOW_DSCPS, Cell

__all__ = ["FLOW_DSCPS", "Cell", "expand"]
