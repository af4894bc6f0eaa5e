"""What the playbooks receive from fl, typed: the extra vars of every playbook on a
testbed (TestbedVars: its id, hosts' folders and scripts, the run's fl_run), each cell's
fl_cell (built in plan.py), and the extra vars of the kernel probe (probe.yml) and of loading
fl's modules (modules.yml). The roles read these keys (tests/unit/test_playbook_vars.py
checks every `fl_run.X` and `fl_cell.X.Y` of roles/ and playbooks/, and every `fl_probe_*`
and `fl_kit*` name, against the models); the hand-over dumps them with `to_ansible()`,
which is the JSON the hosts get."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from ..results import cell_folder


class PlaybookVars(BaseModel):
    """A part of what a playbook receives: an unknown key is an error; values are fixed once made."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    def to_ansible(self) -> dict[str, Any]:
        """The plain data Ansible gets (extra vars, next.json)."""
        return self.model_dump(mode="json")


class RunVars(PlaybookVars):
    """fl_run: what the testbed must provide for all cells of a run."""

    ifb: bool
    """IFBs for path delay on the middlebox (some cell needs path netem and the kernel has them)."""
    nft: bool
    """nftables (firewall counters, ECN rewrites)."""
    udp: bool
    """Some cell has a competing UDP flow: the servers run iperf's."""
    video: bool
    """Some cell has a video flow: the servers run a second iperf UDP server for it."""
    tunnels: list[str]
    """The tunnel kinds the cells use."""
    sysctl_keys: dict[str, list[str]]
    """Per host: every sysctl some cell sets (saved at setup, restored at teardown)."""
    htb_args: list[str]
    """Extra words for htb qdiscs."""
    module_params: dict[str, list[str]]
    """Per host (cli, srv): the module parameter files some cell sets; {} if none does."""
    wait_timeout: int
    """Seconds to wait for a daemon or a capture to start (dilated)."""
    dilation: float
    shared_fs: bool
    """The hosts share the controller's results folder (else fl fetches each cell's files)."""
    stage_cells: bool
    """A VM guest: cells are written locally, then moved to the shared folder (plan.py
    decides each host's CellHostVars.staged and moves from it and shared_fs)."""
    xz_level: int
    queue_interval_min: float
    """Shortest interval between the middlebox's queue samples, seconds."""
    batches: int | None = None
    """Session batches of cells (set when the run starts its testbeds; left out until then)."""
    batch: int | None = None
    """Cells per batch (idem)."""

    @model_serializer(mode="wrap")
    def _batches_when_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        return {k: v for k, v in out.items() if k not in ("batches", "batch") or v is not None}

    def batched(self, batches: int, batch: int) -> RunVars:
        return self.model_copy(update={"batches": batches, "batch": batch})


class CellHostVars(PlaybookVars):
    """What one host of a cell works with (fl_cell.hosts[inventory_hostname]): where it
    writes the cell's files, and the two scripts the cell role runs on it as they are
    (testbed/cell_scripts.py)."""

    cell_dir: str
    """Where the host writes the cell's files (plan.HostPlace): fetch.yml reads them there."""
    setup: str
    """Its setup script: writes its command files, configures the cell, starts its captures."""
    collect: str
    """Its collection script: stops them, records its state (teardown.log), removes the tunnel."""


class CellVars(PlaybookVars):
    """fl_cell: what the roles read for one cell: everything a host does is in its scripts
    (hosts). Fields not sent (exclude) are for fl's own use."""

    name: str = Field(exclude=True)
    """The cell (for fl's own messages; no role reads it)."""
    dir: str
    """The cell's results folder as the hosts see it (fetch.yml copies into it)."""
    tunnel: Literal["wireguard", "fou", "ipsec"] | None = Field(exclude=True)
    """The cell's tunnel kind (for the dry run; no role reads it)."""
    hosts: dict[str, CellHostVars]
    """Per host: the values it works with (CellHostVars)."""
    files: dict[str, dict[str, str]] = Field(exclude=True)
    """Per host: its command files (file name → text: commands.py's; state.sh, its state
    script for the teardown log: state_script.py; on cli flent.sh, the test: flent_script.py).
    Not sent: each host's setup script writes them; kept for the dry run and the tests."""


#: The hosts a probe or a module load runs on: an ssh testbed's, or a VM guest's root namespace.
Hosts = Literal["testbed", "nsroot"]


class ProbeVars(PlaybookVars):
    """probe.yml's extra vars (testbed/probing.py)."""

    fl_probe_on: Hosts
    fl_probe_script: str
    """probe.py on the controller (Ansible's script module copies it)."""
    fl_probe_request: dict[str, Any]
    """What to probe (probe.Request: a TypedDict the hosts' python3 reads alone)."""
    fl_probe_timeout_s: int
    """The probe's bound on the controller's clock (a VM guest's own clock may leap)."""


class KitVars(PlaybookVars):
    """One kernel release's kit of fl's modules (image/kit.py)."""

    files: list[str]
    """The module files on the controller."""
    specs: list[str]
    """fl-load-modules' arguments: each module, in load order."""


class ModulesVars(PlaybookVars):
    """modules.yml's extra vars (run/kit_loading.py)."""

    fl_kit_on: Hosts
    fl_kit_loader: str
    """fl-load-modules on the controller (Ansible's script module copies it: host/)."""
    fl_kit_dir: str
    """Where each host keeps the kit's files."""
    fl_kits: dict[str, KitVars]
    """Kernel release → its kit; each host loads the one of its own release."""


class HostScripts(PlaybookVars):
    """One host's testbed scripts (testbed_scripts.py), run as they are by roles/testbed."""

    helpers: str
    """Installs fl's helper programs in the host's scratch folder."""
    down: str
    """Removes the testbed from the host: what fl made there, its sysctls restored."""
    up: str | None = None
    """Builds the host's part of the testbed; none before a run has its fl_run (fl clean)."""


class TestbedVars(PlaybookVars):
    """The extra vars of every playbook on a testbed (plan.playbook_extra_vars)."""

    __test__ = False  # no test class to pytest, whatever its name
    fl_testbed_id: str
    """The testbed's id; inventories of namespaces name them with it."""
    fl_host_dirs: dict[str, str]
    """Each host's scratch folder: pid files, generated scripts, sysctl baselines."""
    fl_run: RunVars | None
    """What the run needs of the testbed; none (`{}` for Ansible) before a run has one."""
    fl_servers_argv: list[str] | None = None
    """fl-servers' arguments once the run has its fl_run: the server's folder and address."""
    fl_tunnel_down: dict[str, str]
    """Per tunnel end, the script that removes a tunnel left behind (cell_scripts.tunnel_down)."""
    fl_testbed: dict[str, HostScripts]
    """Per host, its testbed scripts."""
    fl_cell_files: list[str] = list(cell_folder.HOST_WRITTEN)
    """The patterns of a cell's files a host writes, which fl fetches from a host that keeps them."""

    def to_ansible(self) -> dict[str, Any]:
        out = self.model_dump(mode="json", exclude={"fl_run"}, exclude_none=True)
        return {**out, "fl_run": self.fl_run.to_ansible() if self.fl_run else {}}
