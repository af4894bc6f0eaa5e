"""An IPsec tunnel's anti-replay drops, from each end's teardown log: `ip -s xfrm state`
prints every SA with its replay window and its own counts of the packets it dropped
(`stats: replay-window N replay N failed N`: behind the window, duplicates, failed
integrity; only an end's inbound SA checks replays, so the sum over its SAs is its
inbound SA's), and /proc/net/xfrm_stat the namespace's XfrmInStateSeqError, the
kernel's own count of both replay kinds over the namespace's life: read as the tunnel came
up (xfrm_stat.up) and after the test, its growth must equal that sum."""
from __future__ import annotations

import re

from ..results.cell_metrics import IpsecEnd
from ..teardown_format import XFRM_STAT, XFRM_STAT_UP, XFRM_STATE
from .teardown_log import command_output

#: An SA's window: "replay-window 32 seq …" (the legacy bitmap), or "replay_window 256,"
#: in its ESN replay context (above 32); not the stats line's "replay-window N replay N".
_WINDOW_RE = re.compile(r"\breplay[-_]window (\d+)(?!\d| replay)")
_STATS_RE = re.compile(r"^\s+stats:\s*\n\s+replay-window (\d+) replay (\d+) failed (\d+)", re.M)
_MIB_RE = re.compile(r"^(Xfrm\w+)\s+(\d+)$", re.M)


def ipsec_end(section: str) -> IpsecEnd | None:
    """The SAs of the host whose part of the teardown log is SECTION, and its kernel's
    replay counter; None without `ip -s xfrm state` in it."""
    states = command_output(section, XFRM_STATE)
    if states is None:
        return None
    windows = [int(w) for w in _WINDOW_RE.findall(states)]
    counts = [tuple(map(int, c)) for c in _STATS_RE.findall(states)]
    drops, duplicates, failed = (sum(c[i] for c in counts) for i in range(3))
    before, after = (_seq_errors(command_output(section, c)) for c in (XFRM_STAT_UP, XFRM_STAT))
    seq = after - before if before is not None and after is not None else None
    return IpsecEnd(replay_window=max(windows, default=0), sas=len(counts), behind_window=drops, duplicates=duplicates,
                    integrity_failed=failed, kernel_seq_errors=seq)


def _seq_errors(xfrm_stat: str | None) -> int | None:
    """XfrmInStateSeqError in a copy of /proc/net/xfrm_stat; None without one."""
    seq = dict(_MIB_RE.findall(xfrm_stat or "")).get("XfrmInStateSeqError")
    return int(seq) if seq is not None else None
