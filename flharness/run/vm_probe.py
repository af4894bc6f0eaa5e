"""What a VM's kernel, or an ssh inventory's hosts, can do, for `fl check` and `fl list`
(--vm, --inventory): the probe run through Ansible in the guest (one boot, the VM
removed after) or on each host of the inventory's first testbed."""
from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from ..capabilities import Capabilities
from ..programs.probe import Request
from ..results import run_folder
from ..testbed.inventory import Inventory, load_inventory
from ..testbed.probe_reply import ProbeReply
from ..testbed.testbed import Testbed
from ..testbed.vm import VmConfig
from .signals import signals_as_interrupt

LOG = logging.getLogger(__name__)


def probe_in_vm(cfg: VmConfig, inventory: Path, request: Request) -> Capabilities:
    LOG.info("booting %s (%s, %s clock) to probe it", cfg.release, cfg.accel, cfg.clock)
    with signals_as_interrupt(), tempfile.TemporaryDirectory(prefix="fl-vm-probe-") as tmp:
        tb = Testbed(load_inventory(inventory), None, Path(tmp) / run_folder.FL_LOG, vm=cfg, results=Path(tmp))
        try:
            tb.boot()
            tb.ready()
            return Capabilities(tb.probe(request)["nsroot"])
        finally:
            tb.down()


def ssh_inventory(inventory: Path | None) -> Inventory | None:
    """INVENTORY's first testbed if its hosts are reached over ssh (a namespaces
    inventory is probed in-process, on this machine)."""
    if inventory is None or not inventory.is_file():
        return None
    inv = load_inventory(inventory)
    return inv if inv.backend == "ssh" else None


def probe_ssh(inv: Inventory, request: Request) -> dict[str, ProbeReply]:
    """The probe on each host of an ssh testbed: host name → its reply."""
    LOG.info("probing the hosts of %s over ssh", inv.path)
    with signals_as_interrupt(), tempfile.TemporaryDirectory(prefix="fl-ssh-probe-") as tmp:
        tb = Testbed(inv, None, Path(tmp) / run_folder.FL_LOG)
        try:
            tb.boot()
            tb.ready()
            return tb.probe(request)
        finally:
            tb.down()
