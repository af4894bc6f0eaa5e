"""The programs fl runs on a testbed's hosts, in one place; none imports the rest of fl.

- fl-*: the helpers every host gets in its scratch folder (testbed_scripts.helpers_script):
  fl-flent, fl-servers, the samplers (fl-ss-sample, fl-qdisc-sample, on fl-tick's grid),
  fl-schedule, fl-first-ping, fl-wait-from, fl-start and fl-stop;
- fl-load-modules: loads a kit of fl's modules (run/kit_loading.py, playbooks/modules.yml);
- probe.py: the kernel probe (python3 alone: run in-process here, by Ansible elsewhere);
- vm_guest.sh: a VM guest's start (testbed/vm.py).
"""
from __future__ import annotations

from pathlib import Path

HOST_DIR = Path(__file__).resolve().parent
LOADER = HOST_DIR / "fl-load-modules"
PROBE = HOST_DIR / "probe.py"
VM_GUEST = HOST_DIR / "vm_guest.sh"


def helpers() -> list[Path]:
    """The helpers every testbed host gets (fl-*, but the module loader)."""
    return [p for p in sorted(HOST_DIR.glob("fl-*")) if p != LOADER]
