"""Provenance: which fl (git commit, dirty), on which host, when."""
from __future__ import annotations

import platform
import socket
import subprocess
import sys

from . import REPO, __version__


def fl_source() -> dict[str, object]:
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True,
                                  text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""

    commit = git("rev-parse", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no")) if commit else None
    return {"version": __version__, "commit": commit or None, "dirty": dirty}


def controller() -> dict[str, str]:
    return {"hostname": socket.gethostname(), "kernel": platform.release(),
            "python": sys.version.split()[0]}
