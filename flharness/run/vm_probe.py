"""What a VM's kernel can do, for `fl check --vm` and `fl list --vm`: one boot, the probe
run in the guest through Ansible, the VM removed."""
from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from ..capabilities import Capabilities
from ..testbed.inventory import load_inventory
from ..testbed.probe import Request
from ..testbed.testbed import Testbed
from ..testbed.vm import VmConfig

LOG = logging.getLogger(__name__)


def probe_in_vm(cfg: VmConfig, inventory: Path, request: Request) -> Capabilities:
    LOG.info("booting %s (%s, %s clock) to probe it", cfg.release, cfg.accel, cfg.clock)
    with tempfile.TemporaryDirectory(prefix="fl-vm-probe-") as tmp:
        tb = Testbed(load_inventory(inventory), None, Path(tmp) / "fl.log", vm=cfg, results=Path(tmp))
        try:
            tb.boot()
            tb.ready()
            return Capabilities(tb.probe(request)["nsroot"])
        finally:
            tb.down()
