"""The testbed role's scripts as Ansible renders them from its templates
(playbooks/render.yml) without touching any host: for tests of the templates. A cell's
scripts need no Ansible: fl renders them itself (cell_scripts.py, flent_script.py), and
`fl run --dry-run` shows them (run/dry_run.py)."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import yaml

from ..errors import FlError
from .ansible import run_playbook
from .inventory import Inventory, testbed_inventory
from .plan import playbook_extra_vars
from .playbook_vars import RunVars

DRY_RUN_ID = "fl-000000"  # the testbed id shown in rendered scripts
DRY_RUN_ROOT = "/run/fl"  # and the state root


def render_testbed(inv: Inventory, run_vars: RunVars, templates: dict[str, list[str]]) -> dict[str, dict[str, str]]:
    """The testbed role's TEMPLATES (per host), rendered: {host: {script: text}} (script =
    template name without .j2)."""
    with tempfile.TemporaryDirectory(prefix="fl-render-") as tmp:
        folder = Path(tmp)
        inventory = folder / "inventory.yml"
        inventory.write_text(yaml.safe_dump(testbed_inventory(inv), sort_keys=False))
        out = folder / "out"
        out.mkdir()
        result = run_playbook("render", inventory, {
            **playbook_extra_vars(DRY_RUN_ID, DRY_RUN_ROOT, inv, run_vars),
            "fl_render_testbed": templates, "fl_render_dir": str(out)}, folder / "ansible.log")
        if not result.ok:
            raise FlError(f"rendering the testbed's scripts failed: {result.reason()}")
        per_host = json.loads((out / "rendered.json").read_text())
    return {host: scripts[""] for host, scripts in per_host.items() if scripts}
