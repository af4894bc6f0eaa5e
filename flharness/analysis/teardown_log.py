"""The teardown log (teardown.log): per host, after a "======== HOST ========" line,
each command fl ran after the test ("$ COMMAND") and what it printed."""
from __future__ import annotations

import re

_HOST_RE = re.compile(r"^======== (\w+) ========$", re.M)
_TC_RE = re.compile(r"^\$ tc -s -d qdisc show dev (\S+);.*$", re.M)


def host_sections(log: str) -> dict[str, str]:
    """Each host's part of a teardown log."""
    parts = _HOST_RE.split(log)[1:]
    return dict(zip(parts[::2], parts[1::2]))


def device_blocks(section: str) -> dict[str, str]:
    """Each device's `tc -s -d qdisc show; tc -s -d class show` output in a host's part."""
    parts = _TC_RE.split(section)
    return {parts[i]: parts[i + 1].split("\n$ ", 1)[0] for i in range(1, len(parts) - 1, 2)}
