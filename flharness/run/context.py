"""What all scenarios and cells of one `fl run` share: its options, the first testbed's
inventory, the kernel's capabilities and the run's provenance."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import REPO
from ..capabilities import Capabilities
from ..testbed.inventory import Inventory
from ..testbed.vm import VmConfig

VIRTUAL_CLOCK_DILATION = 20.0  # timeouts in guest time stretch by this on QEMU's virtual clock

#: How long an ssh host lost mid-run may take to answer again (run/dispatch.py) unless
#: `fl run --host-wait` says.
HOST_WAIT_S = 60.0


@dataclass
class RunOptions:
    run: str = "default"
    only: list[str] = field(default_factory=list)
    force: bool = False
    dry_run: bool = False
    inventory: Path = REPO / "inventory.ini"
    results: Path = REPO / "results"
    parallel: int | None = None  # testbeds at once (default: 1; an ssh inventory's testbeds)
    vm: VmConfig | None = None  # run in VMs booted with this kernel
    load_modules: bool = False  # fl's modules loaded into the testbeds' kernels first (run/kit_loading.py)
    host_wait_s: float = HOST_WAIT_S


@dataclass
class Run:
    """What all scenarios and cells of one `fl run` share."""

    opts: RunOptions
    inventory: Inventory  # the first testbed's (ports, addresses for dry runs)
    caps: Capabilities
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def virtual_clock(self) -> bool:
        return bool(self.opts.vm and self.opts.vm.virtual_clock)

    @property
    def dilation(self) -> float:
        """Timeouts are stretched on QEMU's virtual clock (I/O waits skip guest time)."""
        return VIRTUAL_CLOCK_DILATION if self.virtual_clock else 1.0

    @property
    def root(self) -> Path:
        return self.opts.results / self.opts.run
