"""Per-flow ECN rewrites: did each flow's packets arrive as its actions say?

The client's capture shows the flow's packets before the middlebox (in tunnelled cells,
after the rewrites at the tunnel entrance, which apply twice to the same result). They
are replayed through the declared actions (flharness/ecn.py) and compared, packet by
packet, with the same packets in the server's capture: the SYN's AE, CWR and ECE
exactly; the ECN field allowing a queue's CE mark on ECT. Each rule's own counter (the
teardown log) must lie between what the replay says it matched among the packets that
arrived and among all the client sent (netem may drop some before nftables sees them)
and must not be 0. A stripped negotiation must also show: the server's SYN-ACK
negotiates nothing and the client sends its data Not-ECT.
"""
from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ...analysis.capture import Packets, identity
from ...analysis.cell_files import CellFiles
from ...analysis.teardown_log import rule_counters
from ...ecn import ACK, ACTIONS, CE, CODEPOINTS, CWR, ECE, ECT0, ECT1, NOT_ECT, SYN, Headers, replay, rule_comment
from ...results.cell_record import Effect
from ...testbed.ecn_rules import FlowRule, cell_rules

COUNT_TOLERANCE = (2, 0.01)  # packets, share: a counter beyond the replay's range by more is wrong
ECN_MISMATCH = (2, 0.01)  # packets, share of the compared ones arriving with another ECN field


def check(files: CellFiles) -> list[Effect]:
    rules = cell_rules(files.config.flows)
    if not rules:
        return []
    cli, srv = files.capture("cli"), files.capture("srv")
    if cli is None or srv is None:
        return [Effect(feature=_name(r), evidence="a capture is missing: not verified", ok=False) for r in rules]
    at_mid = files.config.tunnel is None
    counters = rule_counters(files.sections.get("mid" if at_mid else "cli", ""))
    out = []
    for r in rules:
        out += _flow(r, cli, srv, files.server_addr, counters, at_mid)
    return out


def _name(r: FlowRule) -> str:
    return f"flow {r.flow}: {'+'.join(r.actions)}"


def _headers(pk: Packets, idx: NDArray[np.intp]) -> Headers:
    return Headers(pk.tos[idx] & np.uint8(3), pk.flags[idx].copy(), pk.ae[idx].copy())


def _flow(r: FlowRule, cli: Packets, srv: Packets, server: int, counters: dict[str, int],
          at_mid: bool) -> list[Effect]:
    sent = np.flatnonzero((cli.dst == server) & ((cli.tos >> 2) == r.dscp))
    if not len(sent):
        return [Effect(feature=_name(r), ok=False, evidence=f"no packet from the client carried the flow's "
                       f"DSCP {r.dscp}: its rules match nothing")]
    came = np.flatnonzero((srv.dst == server) & ((srv.tos >> 2) == r.dscp))
    before = _headers(cli, sent)
    expected, matched = replay(list(r.actions), before)
    _, i_sent, i_came = np.intersect1d(identity(cli, sent), identity(srv, came), return_indices=True)
    out = [_arrivals(r, before.take(i_sent), expected.take(i_sent), _headers(srv, came[i_came]))]
    out += [_counter(r.flow, action, counters, matched[action], i_sent, at_mid) for action in r.actions]
    if "strip-negotiation" in r.actions:
        out.append(_negotiation(r, cli, srv, sent, server, check_data=at_mid))
    return out


def _arrivals(r: FlowRule, before: Headers, expected: Headers, got: Headers) -> Effect:
    """The flow's packets at the server against the replay of the client's."""
    ecn_bad = (got.ecn != expected.ecn) & ~((got.ecn == CE) & np.isin(expected.ecn, (ECT0, ECT1)))
    tcp_bad = (((got.flags ^ expected.flags) & (ECE | CWR)) != 0) | (got.ae != expected.ae)
    changed = np.count_nonzero((before.ecn != expected.ecn) | (before.flags != expected.flags) | (before.ae != expected.ae))
    n, bad_ecn, bad_tcp = len(got.ecn), int(np.count_nonzero(ecn_bad)), int(np.count_nonzero(tcp_bad))
    absolute, share = ECN_MISMATCH
    ok = bad_tcp == 0 and bad_ecn <= max(absolute, share * n) and n > 0
    evidence = (f"{n} packets found in both captures, {changed} of them rewritten by the actions; "
                f"arrived otherwise: {bad_ecn} in the ECN field, {bad_tcp} in a SYN's AE/CWR/ECE")
    if bad_ecn:
        evidence += (f" (e.g. {CODEPOINTS[int(expected.ecn[ecn_bad][0])]} expected, "
                     f"{CODEPOINTS[int(got.ecn[ecn_bad][0])]} arrived)")
    return Effect(feature=_name(r), evidence=evidence, ok=ok)


def _counter(flow: int, action: str, counters: dict[str, int], matched: NDArray[np.bool_], i_sent: NDArray[np.intp],
             at_mid: bool) -> Effect:
    """The rule's own counter against the replay: at the middlebox it saw at least the
    packets that arrived and at most all the client sent; at a tunnel entrance the
    client's capture is already rewritten, so only a counter of 0 is judged."""
    name = rule_comment(flow, action)
    count = counters.get(name)
    feature = f"{name} (rule)"
    if count is None:
        return Effect(feature=feature, evidence="its counter is not in the teardown log", ok=False)
    if count == 0:
        return Effect(feature=feature, evidence=f"matched no packet ({ACTIONS[action].description}; "
                      f"the client sent {int(np.count_nonzero(matched))} it applies to)", ok=False)
    if not at_mid:
        return Effect(feature=feature, evidence=f"matched {count} packet(s) at the tunnel entrance", ok=True)
    low, high = int(np.count_nonzero(matched[i_sent])), int(np.count_nonzero(matched))
    absolute, share = COUNT_TOLERANCE
    slack = max(absolute, share * high)
    return Effect(feature=feature, ok=low - slack <= count <= high + slack,
                  evidence=f"matched {count} packet(s); the client's capture has {high} it applies to "
                           f"({low} of them reached the server)")


def _negotiation(r: FlowRule, cli: Packets, srv: Packets, sent: NDArray[np.intp], server: int,
                 check_data: bool) -> Effect:
    """A stripped negotiation's outcome: the server's SYN-ACKs to the flow's port carry
    no AE, CWR or ECE, and (before any rewrite: middlebox cells) its data left Not-ECT."""
    port = int(cli.sport[sent[0]])
    synack = np.flatnonzero((srv.src == server) & (srv.dport == port) & ((srv.flags & (SYN | ACK)) == SYN | ACK))
    asked = np.count_nonzero(((srv.flags[synack] & (ECE | CWR)) != 0) | (srv.ae[synack] != 0))
    data = sent[cli.payload[sent] > 0]
    ect = int(np.count_nonzero((cli.tos[data] & 3) != NOT_ECT)) if check_data else 0
    ok = len(synack) > 0 and asked == 0 and ect == 0
    evidence = f"{len(synack)} SYN-ACKs from the server, {asked} with AE/CWR/ECE"
    if check_data:
        evidence += f"; {ect} of the client's {len(data)} data packets left ECN-capable"
    return Effect(feature=f"flow {r.flow}: no ECN negotiated", evidence=evidence, ok=ok)

