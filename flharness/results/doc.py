"""docs/results.md, generated from the results models' JSON schema (pydantic): every field
of cell.json, metrics.json and run.json with its type, default and description (the
models' attribute docstrings). A test keeps the page current:

    .venv/bin/python -m flharness.results.doc > docs/results.md
"""
from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from . import cell_folder, run_folder
from .cell_metrics import CellMetrics
from .cell_record import CellRecord
from .run_record import RunRecord

FILES: tuple[tuple[str, type[BaseModel]], ...] = (
    (cell_folder.CELL, CellRecord), (cell_folder.METRICS, CellMetrics), (run_folder.RUN_RECORD, RunRecord))
HEADER = """# Results files: field reference

Generated from the pydantic models in `flharness/results/` by `python -m flharness.results.doc`
(do not edit by hand). fl writes and reads these files only through the models; a key a
model does not know is refused. The folder's layout is in [results-folder.md](results-folder.md).
`series.npz` (numpy, per flow: `owd_t_N`, `owd_ms_N`, `goodput_t_N`, `goodput_mbit_N` and
`interval_s`) is described in `flharness/results/cell_series.py`.
"""


def render() -> str:
    parts = [HEADER]
    for name, model in FILES:
        schema = model.model_json_schema()
        defs = schema.get("$defs", {})
        parts.append(f"\n## {name}\n\n{_text(schema.get('description', ''))}\n\n")
        parts.append(_table(schema))
        for ref in _refs_in_order(schema, defs):
            sub = defs[ref]
            if not sub.get("properties"):
                continue  # a value type (JsonValue)
            parts.append(f"\n### {name}: {ref}\n\n" + (f"{_text(sub['description'])}\n\n" if sub.get("description") else ""))
            parts.append(_table(sub))
    return "".join(parts)


def _text(doc: str) -> str:
    return " ".join(doc.split())


def _refs_in_order(schema: dict[str, Any], defs: dict[str, Any]) -> list[str]:
    """The models SCHEMA refers to, depth first, each once."""
    seen: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "$ref" in node:
                ref = node["$ref"].rsplit("/", 1)[1]
                if ref not in seen:
                    seen.append(ref)
                    walk(defs[ref].get("properties", {}))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(schema.get("properties", {}))
    return seen


def _table(schema: dict[str, Any]) -> str:
    required = set(schema.get("required", []))
    rows = ["| Field | Type | Default | Description |", "|---|---|---|---|"]
    for field, prop in schema.get("properties", {}).items():
        default = "required" if field in required else _default(prop)
        rows.append(f"| `{field}` | {_type(prop)} | {default} | {_text(prop.get('description', ''))} |")
    return "\n".join(rows) + "\n"


def _default(prop: dict[str, Any]) -> str:
    return f"`{json.dumps(prop['default'])}`" if "default" in prop else "–"


def _type(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        return str(prop["$ref"]).rsplit("/", 1)[1]
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    if "enum" in prop:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in prop["enum"])
    if "anyOf" in prop:
        return " or ".join(_type(p) for p in prop["anyOf"])
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_type(prop.get('items', {}))}"
    if kind == "object" and isinstance(prop.get("additionalProperties"), dict):
        keys = prop.get("propertyNames", {})
        key = _type(keys) if keys else "string"
        return f"map of {key} → {_type(prop['additionalProperties'])}"
    return {"integer": "integer", "number": "number", "string": "string", "boolean": "boolean",
            "null": "null", "object": "object"}.get(kind, str(kind))


if __name__ == "__main__":
    print(render(), end="")
