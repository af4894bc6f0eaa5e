"""A finished cell's files, each read and split at most once per cell: what the checks
(run/evaluate.py, calibration.py, effects/) and the metrics (metrics.py) read of a cell,
through one value. Nothing else of fl opens a cell's files to judge or measure it."""
from __future__ import annotations

import dataclasses
import ipaddress
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from ..hosts import SERVER
from ..results import cell_folder
from ..results.cell_record import BottleneckPorts, CellConfig, CellRecord, Direction
from . import flent_data, flentlib, pcap, queue, ss_samples
from .capture import Datagrams, Echoes, Packets, read, read_echoes, read_udp
from .clock import Offset
from .probe import ProbeSamples
from .probe import load as load_probe
from .teardown_log import host_sections

_Timed = TypeVar("_Timed", Packets, Datagrams)


@dataclass
class CellFiles:
    """The cell's teardown log per host (read at once), its Flent data (once evaluate
    found it), and its socket samplers' logs, captures, queue samples and side flows'
    records (read when first asked for)."""

    name: str  # the cell's (its Flent data file is NAME.flent.gz)
    config: CellConfig
    dir: Path
    server: str  # the address Flent talks to (inside the tunnel, if any)
    flent: dict[str, Any] | None = None
    ports: BottleneckPorts | None = None  # cell.json's (None in cells recorded before it had them)
    sections: dict[str, str] = field(init=False)  # host → its part of teardown.log ({} without one)
    _texts: dict[str, str | None] = field(default_factory=dict, init=False)
    _captures: dict[str, Packets | None] = field(default_factory=dict, init=False)
    _conns: dict[str, dict[pcap.Key, pcap.Conn]] = field(default_factory=dict, init=False)
    server_clock: Offset | None = field(default=None, init=False)
    """Set before the server's capture is first read, where the hosts keep clocks of their
    own: its timestamps are then read on the client's clock (analysis/clock.py)."""

    def __post_init__(self) -> None:
        self.sections = host_sections(self.text(cell_folder.TEARDOWN_LOG) or "")

    @classmethod
    def of(cls, cell_dir: Path, record: CellRecord) -> CellFiles:
        """The files of the cell RECORD describes, in CELL_DIR."""
        server = record.endpoints.server if record.endpoints else ""
        return cls(record.cell, record.config, cell_dir, server, ports=record.ports)

    def text(self, name: str) -> str | None:
        """A log of the cell's folder, or None if there is none."""
        if name not in self._texts:
            path = self.dir / name
            self._texts[name] = path.read_text(errors="replace") if path.is_file() else None
        return self._texts[name]

    @cached_property
    def lead_s(self) -> float:
        """Flent's lead-in (s): the test starts this long after its t = 0."""
        assert self.flent is not None
        return flent_data.lead_in(self.flent)

    @cached_property
    def test_window(self) -> tuple[float, float]:
        """The test, lead-in to its end (epoch s), on the Flent data's clock."""
        assert self.flent is not None
        start = flent_data.t0(self.flent) + self.lead_s
        return start, start + self.config.length

    @property
    def server_addr(self) -> int:
        return int(ipaddress.IPv4Address(self.server))

    def capture_path(self, host: str) -> Path:
        """HOST's capture: compressed once the cell is done, plain before."""
        path = self.dir / cell_folder.capture(host)
        return path if path.is_file() else path.with_suffix("")

    def capture(self, host: str) -> Packets | None:
        if host not in self._captures:
            path = self.capture_path(host)
            try:
                pk = read(path) if path.is_file() else None
                self._captures[host] = self._on_client_clock(host, pk) if pk is not None else None
            except ValueError:
                self._captures[host] = None
        return self._captures[host]

    # --- what the metrics read ---------------------------------------------------------------

    @cached_property
    def resultset(self) -> Any | None:
        """Flent's data as its own ResultSet (None without a data file)."""
        path = self.dir / cell_folder.flent_data(self.name)
        return flentlib.load(path) if path.is_file() else None

    def connections(self, host: str) -> tuple[Packets, dict[pcap.Key, pcap.Conn]] | None:
        """HOST's capture and its TCP connections (None without a capture; one that
        cannot be read raises what reading it said: the metrics are not made without it)."""
        pk = self.capture(host)
        if pk is None:
            if self.capture_path(host).is_file():
                read(self.capture_path(host))
            return None
        if host not in self._conns:
            self._conns[host] = pcap.connections(pk)
        return pk, self._conns[host]

    def scheme_events(self, flow: int, side: str) -> list[dict[str, Any]]:
        """A scheme side's JSON lines (testbed/scheme_scripts.py): its start, its CPU time
        before it was stopped, and its exit if it ended by itself."""
        text = self.text(cell_folder.scheme_events(flow, side)) or ""
        try:
            return [e for line in text.splitlines() if line.strip() and isinstance(e := json.loads(line), dict)]
        except ValueError:
            return []

    def datagrams(self, host: str) -> Datagrams | str:
        """HOST's captured UDP datagrams (read with its TCP packets), or why there are none."""
        try:
            return self._on_client_clock(host, read_udp(self.capture_path(host)))
        except (OSError, ValueError) as e:
            return f"the {host} capture could not be read ({e})"

    def echoes(self, host: str) -> Echoes | str:
        """HOST's captured ICMP echoes (Flent's pings), by its own clock, or why there are none."""
        try:
            return read_echoes(self.capture_path(host))
        except (OSError, ValueError) as e:
            return f"the {host} capture could not be read ({e})"

    def _on_client_clock(self, host: str, got: _Timed) -> _Timed:
        """GOT (the capture's arrays, shared: never written) with the server's timestamps
        on the client's clock, where server_clock is set."""
        if host != SERVER or self.server_clock is None:
            return got
        return dataclasses.replace(got, ts=self.server_clock.to_client(got.ts))

    @cached_property
    def bottleneck_ports(self) -> dict[Direction, str]:
        """Direction → the middlebox's port that queues it: cell.json's, or in a cell
        recorded before cell.json had them, the queue samples' header's."""
        if self.ports is not None:
            return self.ports.by_direction()
        return queue.header_ports(self.text(cell_folder.QUEUE_LOG) or "")

    def ss_path(self, host: str) -> Path | None:
        """HOST's socket sampler's log, if it has one."""
        path = self.dir / cell_folder.ss_log(host)
        return path if path.is_file() else None

    @cached_property
    def ss(self) -> dict[str, ss_samples.SocketSamples]:
        """Host → its ss sampler's samples per connection."""
        return {host: ss_samples.samples(path) for host in ("cli", "srv") if (path := self.ss_path(host))}

    @cached_property
    def queues(self) -> dict[str, queue.QueueSeries]:
        """The middlebox's queue samples per direction ({} without any)."""
        path = self.dir / cell_folder.QUEUE_LOG
        return queue.load(path, self.ports.by_direction() if self.ports else None) if path.is_file() else {}

    @cached_property
    def probe(self) -> ProbeSamples | str:
        """The latency probe's round trips, or why there are none."""
        return load_probe(self.dir / cell_folder.PROBE)
