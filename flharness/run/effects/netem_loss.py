"""netem loss: did the declared share of packets go missing, in the declared direction?

The TCP packets the sending side's capture has are looked up in the receiving side's
(analysis/capture.py identity); those not found were lost on the path: by netem, or
by the bottleneck queue, whose own drop counter (the teardown log; it counts every
packet, so it bounds its TCP drops from above) is taken off. The netem loss among N
packets with a declared probability p is binomial: a count outside p·N ± 5 standard
deviations (and a packet) is far outside what chance gives. Only independent loss is
judged (`loss P` or `loss random P`); a correlation, a Gilbert-Elliott or state model,
or netem's `ecn` (marks instead of drops) is not binomial and is reported unjudged.
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

from ...analysis.capture import identity
from ...analysis.cell_files import CellFiles
from ...analysis.qdisc_stats import bottleneck_totals, device_qdiscs
from ...results.cell_record import Direction, Effect

Z = 5.0  # standard deviations: "far outside" the binomial
_PERCENT = re.compile(r"^(\d+(?:\.\d+)?)%$")
#: direction → (sending host, receiving host)
SIDES = {"up": ("cli", "srv"), "down": ("srv", "cli")}


def declared_loss(words: Sequence[str]) -> float | str | None:
    """The independent loss probability in netem WORDS; None without loss; a reason
    (text) when the loss is not a binomial one."""
    if "loss" not in words:
        return None
    if {"gemodel", "state", "ecn"} & set(words):
        return "a loss model or netem's ecn marking: not binomial"
    rest = list(words[words.index("loss") + 1:])
    if rest and rest[0] == "random":
        rest.pop(0)
    m = _PERCENT.match(rest[0]) if rest else None
    if not m:
        return "loss without a percentage"
    if len(rest) > 1 and _PERCENT.match(rest[1]):
        return "correlated loss: not binomial"
    return float(m.group(1)) / 100


def check(files: CellFiles) -> list[Effect]:
    netem = files.config.netem
    if netem is None:
        return []
    out = []
    ways: tuple[tuple[Direction, list[str]], ...] = (("up", netem.up), ("down", netem.down))
    for direction, words in ways:
        p = declared_loss(words)
        if p is None:
            continue
        feature = f"netem loss {direction}"
        if isinstance(p, str):
            out.append(Effect(feature=feature, evidence=f"not judged ({p})", ok=True))
        else:
            out.append(_judge(files, direction, p, feature))
    return out


def _judge(files: CellFiles, direction: Direction, p: float, feature: str) -> Effect:
    sender, receiver = (files.capture(h) for h in SIDES[direction])
    if sender is None or receiver is None:
        return Effect(feature=feature, evidence="a capture is missing: not verified", ok=False)
    server = files.server_addr
    ways = (sender.dst == server, receiver.dst == server) if direction == "up" else \
        (sender.src == server, receiver.src == server)
    sent, came = np.flatnonzero(ways[0]), np.flatnonzero(ways[1])
    n = len(sent)
    lost = n - len(np.intersect1d(identity(sender, sent), identity(receiver, came)))
    queue_drops = bottleneck_totals(files.sections.get("mid", ""), files.bottleneck_ports).get(direction, {}).get("drops", 0)
    sd = math.sqrt(n * p * (1 - p))
    low, high = p * n - Z * sd - 1, p * n + Z * sd + 1
    ok = n > 0 and max(lost - queue_drops, 0) <= high and lost >= low
    evidence = (f"{lost} of {n} TCP packets lost between the captures ({lost / n:.2%}; the bottleneck "
                f"queue dropped {queue_drops}); declared {p:.2%}: {max(low, 0):.0f}-{high:.0f} expected"
                if n else "no TCP packet in that direction")
    if counted := _netem_counter(files, direction):
        evidence += f"; netem's own count: {counted[1]} dropped of {sum(counted)}"
    return Effect(feature=feature, evidence=evidence, ok=ok)


def _netem_counter(files: CellFiles, direction: Direction) -> tuple[int, int] | None:
    """(sent, dropped) of the netem qdiscs on the IFB that DIRECTION's packets enter
    the middlebox through (the port that queues the other direction)."""
    entering = files.bottleneck_ports.get("down" if direction == "up" else "up")
    if not entering:
        return None
    devices = device_qdiscs(files.sections.get("mid", ""))
    netems = [q for dev, found in devices.items() if dev != entering and dev.endswith(entering)
              for q in found if q["kind"] == "netem"]
    if not netems:
        return None
    return sum(q.get("sent_pkts", 0) for q in netems), sum(q.get("drops", 0) for q in netems)
