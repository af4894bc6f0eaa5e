"""What the effect checks read of a finished cell."""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from ...analysis.capture import Packets, read
from ...analysis.teardown_log import host_sections
from ...cells import Cell


@dataclass
class CellFiles:
    """What the checks read of a finished cell: its teardown log per host, and its
    captures (read once, when a check first needs them)."""

    cell: Cell
    dir: Path
    server: str  # the address Flent talks to (inside the tunnel, if any)
    sections: dict[str, str] = field(init=False)
    _captures: dict[str, Packets | None] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        log = self.dir / "teardown.log"
        self.sections = host_sections(log.read_text(errors="replace")) if log.is_file() else {}

    @property
    def server_addr(self) -> int:
        return int(ipaddress.IPv4Address(self.server))

    def capture(self, host: str) -> Packets | None:
        if host not in self._captures:
            path = self.dir / f"{host}.pcap.xz"
            path = path if path.is_file() else path.with_suffix("")
            try:
                self._captures[host] = read(path) if path.is_file() else None
            except ValueError:
                self._captures[host] = None
        return self._captures[host]
