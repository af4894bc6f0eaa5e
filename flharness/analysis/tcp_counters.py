"""An endpoint's TCP counters over a cell, from its part of the teardown log: the network
namespace's MIB (retransmitted segments, retransmission timeouts, tail loss probes …,
teardown_format.TCP_COUNTERS) as the cell's setup found them and after the test. The
namespaces live for the whole run, so the growth is the cell's; on an ssh host the
counters are the whole host's, whatever else it sent meanwhile."""
from __future__ import annotations

from ..teardown_format import TCP_COUNTERS, TCP_COUNTERS_SHOW, TCP_COUNTERS_UP
from .teardown_log import command_output


def tcp_counters(section: str) -> dict[str, int] | None:
    """Counter → its growth over the cell, for the host whose part of the teardown log is
    SECTION; None where either reading is missing (cells run before fl kept them)."""
    before, after = (_counters(command_output(section, c)) for c in (TCP_COUNTERS_UP, TCP_COUNTERS_SHOW))
    if not before or not after:
        return None
    return {k: after[k] - before[k] for k in TCP_COUNTERS if k in before and k in after}


def _counters(text: str | None) -> dict[str, int]:
    """The "NAME VALUE" lines of one reading (a counter the kernel lacks reads "-": left out)."""
    pairs = (line.split() for line in (text or "").splitlines())
    return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[1].isdigit()}
