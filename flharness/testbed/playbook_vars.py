"""What the playbooks receive from fl, typed: the run's fl_run and each cell's fl_cell
(built in plan.py). The roles read these keys (tests/unit/test_playbook_vars.py checks
every `fl_run.X` and `fl_cell.X.Y` of roles/ and playbooks/ against the models); the
hand-over dumps them with `to_ansible()`, which is the JSON the hosts get."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer, model_validator


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


class EcnVars(PlaybookVars):
    """Where a cell's per-flow ECN rewrites happen."""

    at: Literal["cli", "mid"]
    """The middlebox, or the client's tunnel entrance in tunnelled cells."""
    dev: str
    """The device whose filters rewrite."""
    tc: bool
    """tc filters do some of them (the teardown shows their counters)."""


class TunnelVars(PlaybookVars):
    """A WireGuard or FOU tunnel between cli and srv (its keys, if any, are made on the hosts)."""

    kind: Literal["wireguard", "fou"]
    overhead: int
    """Bytes the tunnel adds to a packet: its MTU is the underlay's less this."""


class IpsecVars(PlaybookVars):
    """An IPsec tunnel: its keys are made by fl per cell and fill the placeholders of tunnel.ip."""

    kind: Literal["ipsec"]
    overhead: int
    fill: dict[str, str]
    """Placeholder in tunnel.ip → its key (each sender's SA: authentication and encryption)."""


class QueuePorts(PlaybookVars):
    """The middlebox's ports the queue sampler reads, by the direction each queues
    (commands.Ports.queues: the ports cell.json records)."""

    up: str
    down: str


class HostPlace(PlaybookVars):
    """Where one host of a cell writes and captures, decided in plan.py (cell_hosts)."""

    cell_dir: str
    """Where the host writes the cell's files: the results folder where it shares the
    controller's (and does not stage them), else its scratch folder's cell/."""
    staged: bool
    """The host writes them into its own folder (cell_dir, emptied before the test), not the
    results folder: a VM guest, or a host without the controller's filesystem."""
    moves: bool
    """After the test the host moves its staged files into the results folder (fl_cell.dir:
    a VM guest, which shares it); staged otherwise, fl fetches them (roles/cell/tasks/fetch.yml)."""
    capture_dev: str | None
    """cli, srv: the interface tcpdump and the ss sampler watch (the tunnel device in
    tunnelled cells: the inner packets, flow by flow); None on mid."""

    @model_validator(mode="after")
    def _moves_what_it_staged(self) -> HostPlace:
        if self.moves and not self.staged:
            raise ValueError("a host moves only the files it staged")
        return self


class CellHostVars(HostPlace):
    """What one host of a cell works with (fl_cell.hosts[inventory_hostname]): its place and
    the two scripts the cell role runs on it as they are (testbed/cell_scripts.py)."""

    setup: str
    """Its setup script: writes its command files, configures the cell, starts its captures."""
    collect: str
    """Its collection script: stops them, records its state (teardown.log), removes the tunnel."""


class TunnelEndVars(PlaybookVars):
    """One end of the cli-srv tunnel on a testbed (fl_tunnel_ends[inventory_hostname]; also
    outside cells: the testbed's teardown removes a tunnel left behind)."""

    peer: Literal["cli", "srv"]
    """The other end."""
    local: str
    """This end's testbed address (outer packets)."""
    remote: str
    """The other end's."""
    peer_inner: str | None
    """The other end's address inside the tunnel, without its prefix length (None where the
    inventory has none: no cell of it can have a tunnel)."""


class CellVars(PlaybookVars):
    """fl_cell: everything the roles need for one cell."""

    name: str
    scenario: str
    config_hash: str
    dir: str
    """The cell's results folder as the hosts see it."""
    sysctls: dict[str, dict[str, str]]
    """Per host: the sysctls set for the cell."""
    files: dict[str, dict[str, str]]
    """Per host: its command files (file name → text: commands.py's; state.sh, its state
    script for the teardown log: state_script.py; on cli flent.sh, the test: flent_script.py)."""
    summary: str
    """One line for the setup log."""
    ecn: EcnVars | None
    tunnel: IpsecVars | TunnelVars | None
    schedule: bool
    """The bottleneck's rate changes during the test."""
    client_qdisc: list[str] | None
    target: str
    """The server address the tools talk to (inside the tunnel, if any)."""
    step_size: float
    samplers: list[str]
    """The hosts whose sockets are sampled."""
    queue_interval: float
    """Seconds between the middlebox's queue samples: the scenario's step, or more where each sample costs (VMs)."""
    queue_ports: QueuePorts
    """The bottleneck ports whose qdiscs the middlebox's queue sampler reads."""
    queue_wait_filter: str
    """A pcap filter for the test's first packet at the middlebox (its queue sampler waits for it)."""
    bottleneck_devs: list[str]
    """The middlebox's interfaces whose qdiscs fl owns: its ports, and their IFBs where the run has them."""
    hosts: dict[str, CellHostVars]
    """Per host: the values it works with (CellHostVars)."""
