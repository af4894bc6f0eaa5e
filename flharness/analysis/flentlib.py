"""Flent's own data loading (its ResultSet), from the Debian package's module path."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

FLENT_PATHS = ("/usr/share/flent",)  # Debian installs the flent package here


def resultset_module() -> Any:
    try:
        from flent import resultset
    except ImportError:
        for p in FLENT_PATHS:
            if Path(p, "flent").is_dir() and p not in sys.path:
                sys.path.append(p)
        from flent import resultset
    return resultset


def load(path: Path) -> Any:
    """A Flent ResultSet: x_values, series(name), raw_series(name, raw_key=…), metadata."""
    return resultset_module().load(str(path))
