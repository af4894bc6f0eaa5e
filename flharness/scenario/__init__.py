"""Scenario files: locate, read (YAML + extends), validate (pydantic schema)."""
from .load import find_scenario, list_scenarios, load_scenario
from .schema import Scenario

__all__ = ["Scenario", "find_scenario", "list_scenarios", "load_scenario"]
