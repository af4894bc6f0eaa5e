"""Did every declared path feature take effect? One check per feature, each against
something fl did not configure itself:

* per-flow ECN rewrites (ecn.py): the client's capture replayed through the declared
  actions against the server's capture, packet by packet, and each rule's own counter;
* netem loss (netem_loss.py): the packets lost between the two captures against the
  declared rate's binomial bounds;
* rate schedule, tunnel, sysctls and the client's qdisc (state.py): the schedule's own
  log and the bottleneck class after the test, the tunnel device's counters, the values
  read back after the test, the client qdisc's counters;
* the video flow (video.py): its frames in the client's capture against the declared
  frame rate, mean rate and codepoint, and in the server's;
* the latency probe (probe.py): irtt's round trips, its packets' codepoint in the
  client's capture;
* a scalable CC (l4s.py): each prague connection's data ECT(1) in the sender's capture
  where the server's SYN/ACK accepted AccECN, Not-ECT where it did not.

Every check yields an Effect (cell.json, checks.calibration.effects); one that failed
is a reason of the cell's calibration verdict, so a declared feature that silently did
nothing never passes unnoticed.
"""
from __future__ import annotations

from ...analysis.cell_files import CellFiles
from ...results.cell_record import Effect
from . import ecn, l4s, netem_loss, probe, state, video


def effects(files: CellFiles) -> list[Effect]:
    """Every declared path feature's effect in the finished cell."""
    return [*ecn.check(files), *netem_loss.check(files), *state.check(files), *video.check(files), *probe.check(files), *l4s.check(files)]
