"""The scripts a cell would run on each host, rendered by Ansible from the cell role's
templates (playbooks/render.yml) without touching any host: for `fl run --dry-run`
and for tests of the templates."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import yaml

from ..errors import FlError
from ..hosts import HOSTS
from .ansible import run_playbook
from .inventory import Inventory, testbed_inventory
from .plan import playbook_extra_vars
from .playbook_vars import CellVars, RunVars

#: Per host, the templates of one cell's phases (roles/cell/templates/).
SCRIPTS = {h: ["setup.sh.j2", "collect.sh.j2"] for h in HOSTS}
DRY_RUN_ID = "fl-000000"  # the testbed id shown in rendered scripts
DRY_RUN_ROOT = "/run/fl"  # and the state root


def render_cells(inv: Inventory, run_vars: RunVars, cells: list[CellVars],
                 templates: dict[str, list[str]] | None = None,
                 testbed: dict[str, list[str]] | None = None) -> dict[str, dict[str, dict[str, str]]]:
    """Rendered scripts: {cell name: {host: {script: text}}} (script = template name without
    .j2); TESTBED's templates (the testbed role's, per host) under the name ''."""
    with tempfile.TemporaryDirectory(prefix="fl-render-") as tmp:
        folder = Path(tmp)
        inventory = folder / "inventory.yml"
        inventory.write_text(yaml.safe_dump(testbed_inventory(inv), sort_keys=False))
        out = folder / "out"
        out.mkdir()
        result = run_playbook("render", inventory, {
            **playbook_extra_vars(DRY_RUN_ID, DRY_RUN_ROOT, inv, run_vars),
            "fl_render_cells": [c.to_ansible() for c in cells], "fl_render_templates": templates or SCRIPTS,
            "fl_render_testbed": testbed or {}, "fl_render_dir": str(out)}, folder / "ansible.log")
        if not result.ok:
            raise FlError(f"rendering the cells' scripts failed: {result.reason()}")
        per_host = json.loads((out / "rendered.json").read_text())
    rendered: dict[str, dict[str, dict[str, str]]] = {}
    for host, cells_of in per_host.items():
        for cell, scripts in (cells_of or {}).items():
            rendered.setdefault(cell, {})[host] = scripts
    return rendered
