"""The latency probe took effect (scenario key probe): irtt completed round trips, and
the client's capture holds its packets to the server's irtt port, at least 99 % of
them with the declared ECN codepoint."""
from __future__ import annotations

from ...analysis.cell_files import CellFiles
from ...results.cell_record import CODEPOINT_WORDS, Effect

CODEPOINT_MIN_PCT = 99.0


def check(files: CellFiles) -> list[Effect]:
    probe = files.config.probe
    if probe is None:
        return []
    samples = files.probe
    if isinstance(samples, str):
        return [Effect(feature="latency probe", ok=False, evidence=samples)]
    sent = files.datagrams("cli")
    if isinstance(sent, str):
        return [Effect(feature="latency probe", ok=False, evidence=sent)]
    mine = (sent.dport == samples.port) & (sent.dst == files.server_addr)
    marked = int(((sent.tos[mine] & 3) == CODEPOINT_WORDS[probe.codepoint]).sum())
    share = 100 * marked / int(mine.sum()) if mine.any() else 0.0
    ok = len(samples.rtt) > 0 and share >= CODEPOINT_MIN_PCT
    return [Effect(feature="latency probe", ok=ok,
                   evidence=f"{len(samples.rtt)} of {samples.sent} round trips completed; {int(mine.sum())} probe "
                            f"packets in the client's capture, {probe.codepoint} on {share:.1f} %")]
