"""Strict YAML for fl's input files (scenarios, reference files): duplicate keys refused,
problems reported with the file and line (ScenarioError)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..errors import ScenarioError


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys instead of silently keeping the last."""


def _mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def read_yaml(path: Path, keys: str = "a scenario file is a mapping of keys (name, test, rate, matrix, …)") -> dict[str, Any]:
    try:
        data = yaml.load(path.read_text(), Loader=_StrictLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}" if mark else ""
        raise ScenarioError(path, where, f"{e.problem or e.context}") from None
    except (OSError, yaml.YAMLError) as e:
        raise ScenarioError(path, "", str(e)) from None
    if data is None:
        raise ScenarioError(path, "", "the file is empty")
    if not isinstance(data, dict):
        raise ScenarioError(path, "", keys)
    return data
