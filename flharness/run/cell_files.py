"""A finished cell's files as the checks read them (evaluate.py, calibration.py,
effects/): each file read and split at most once per cell."""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ..analysis import flent_data
from ..analysis.capture import Packets, read
from ..analysis.teardown_log import host_sections
from ..cells import Cell


@dataclass
class CellFiles:
    """The cell's teardown log per host (read at once), its Flent data (once evaluate
    found it), and its socket samplers' logs and captures (read when first asked for)."""

    cell: Cell
    dir: Path
    server: str  # the address Flent talks to (inside the tunnel, if any)
    flent: dict[str, Any] | None = None
    sections: dict[str, str] = field(init=False)  # host → its part of teardown.log ({} without one)
    _texts: dict[str, str | None] = field(default_factory=dict, init=False)
    _captures: dict[str, Packets | None] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.sections = host_sections(self.text("teardown.log") or "")

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
        return start, start + self.cell.config.length

    @property
    def server_addr(self) -> int:
        return int(ipaddress.IPv4Address(self.server))

    def capture_path(self, host: str) -> Path:
        """HOST's capture: compressed once the cell is done, plain before."""
        path = self.dir / f"{host}.pcap.xz"
        return path if path.is_file() else path.with_suffix("")

    def capture(self, host: str) -> Packets | None:
        if host not in self._captures:
            path = self.capture_path(host)
            try:
                self._captures[host] = read(path) if path.is_file() else None
            except ValueError:
                self._captures[host] = None
        return self._captures[host]
