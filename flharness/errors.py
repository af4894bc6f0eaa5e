"""User-facing errors: one line, naming the file and key where possible."""
from __future__ import annotations

from pathlib import Path


class FlError(Exception):
    """An error the user can fix; printed as one line, exit status 1."""


class ScenarioError(FlError):
    """Invalid scenario input: names the file and the offending key."""

    def __init__(self, path: Path | str, key: str, message: str) -> None:
        self.path, self.key, self.message = str(path), key, message
        where = f"{self.path}: {key}: " if key else f"{self.path}: "
        super().__init__(where + message)
