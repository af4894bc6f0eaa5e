"""`fl run --load-modules`: fl's modules (a kit per kernel release, image/kit.py, built on
this machine where missing) loaded into the kernels of a run's testbeds before they are
probed: this machine's (namespaces), a VM guest's, or each ssh host's, by
flharness/programs/fl-load-modules, in-process or through Ansible (playbooks/modules.yml)."""
from __future__ import annotations

import json
import logging
import platform
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from ..errors import FlError
from ..image.kit import DEFAULT_RECIPE, Kit, build_kit, kit_folder
from ..image.recipe import load_recipe
from ..programs import LOADER
from ..programs.probe import KIT_DIR
from ..testbed.ansible import run_playbook
from ..testbed.playbook_vars import KitVars, ModulesVars
from ..testbed.testbed import Testbed

LOG = logging.getLogger(__name__)
#: A kit module whose source is the kernel's own (kernel_source): the kernel's build of it
#: where the kernel has one, else fl's (fl-load-modules).
KERNEL_FIRST = ":kernel-first"


def load_modules(testbeds: list[Testbed], releases: Callable[[Testbed], set[str]],
                 recipe: str = DEFAULT_RECIPE) -> list[dict[str, str]]:
    """Build the kits the testbeds' kernels need (RELEASES: a testbed's hosts' kernel
    releases), then load them on every testbed; returns what each module's loading said."""
    kits = {r: build_kit(r, recipe) for tb in testbeds for r in sorted(releases(tb))}
    said = []
    for tb in testbeds:
        said += _load_local(kits) if tb.inv.backend == "netns" and not tb.vm else _load_remote(tb, kits)
    for line in said:
        LOG.info("module %s on %s: %s%s", line["module"], line["host"], line["status"],
                 f" ({line['detail']})" if line["detail"] else "")
    if bad := [x for x in said if x["status"] in ("refused", "failed")]:
        raise FlError("fl's modules could not be loaded: " + "; ".join(
            f"{x['host']}: {x['module']} {x['status']}: {x['detail']}" for x in bad))
    return said


def this_machine() -> set[str]:
    return {platform.release()}


def specs(kit: Kit) -> list[str]:
    """fl-load-modules' arguments: the kit's modules in order, each marked as fl's own or
    of the kernel's source (the recipe says which)."""
    sources = {m.name: m.source for m in load_recipe(kit.recipe).recipe.modules}
    return [m.name + (KERNEL_FIRST if sources[m.name].kernel_source else "") for m in kit.modules]


def _load_local(kits: dict[str, Kit]) -> list[dict[str, str]]:
    release = platform.release()
    kit = kits[release]
    target = Path(KIT_DIR)
    target.mkdir(parents=True, exist_ok=True)
    target.chmod(0o700)
    for f in kit.module_files(kit_folder(release)):
        shutil.copy(f, target / f.name)
    p = subprocess.run([str(LOADER), str(target), *specs(kit)], capture_output=True, text=True)
    return _said(p.stdout, "this machine", p.stderr)


def _load_remote(tb: Testbed, kits: dict[str, Kit]) -> list[dict[str, str]]:
    """Through Ansible on the VM's guest (nsroot) or the ssh hosts (testbed)."""
    handed = ModulesVars(fl_kit_on="nsroot" if tb.vm else "testbed", fl_kit_loader=str(LOADER), fl_kit_dir=KIT_DIR, fl_kits={
        r: KitVars(files=[str(f) for f in k.module_files(kit_folder(r))], specs=specs(k)) for r, k in kits.items()})
    result = run_playbook("modules", tb.inventory, handed.to_ansible(), tb.folder / "modules.log")
    if not result.ok:
        raise FlError(f"loading fl's modules failed: {result.reason()}")
    printed = result.outputs.get("fl_kit_out", {})
    return [line for host, out in sorted(printed.items()) for line in _said(out, host)]


def _said(stdout: str, host: str, stderr: str = "") -> list[dict[str, str]]:
    """fl-load-modules' JSON lines, each with the host it ran on."""
    lines = []
    for raw in stdout.splitlines():
        try:
            lines.append({**json.loads(raw), "host": host})
        except json.JSONDecodeError:
            raise FlError(f"fl-load-modules on {host} printed {raw!r} {stderr}".strip()) from None
    return lines
