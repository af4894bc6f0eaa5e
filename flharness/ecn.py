"""The per-flow ECN actions of the scenario key `ecn`: what each does to a packet from the
client. One definition serves the scenario's validation (descriptions), the testbed's
commands (testbed/ecn_rules.py) and the check that they took effect (run/effects.py),
which replays them on the client's capture.

Codepoints are the IP ECN field's values; TCP flags the header's byte 13; AE (RFC 9768,
formerly NS) the lowest bit of byte 12. A SYN asks for classic ECN with CWR and ECE
(RFC 3168) and for AccECN with AE, CWR and ECE; a server that implements AccECN answers
any other non-zero combination as AccECN too, so stripping the negotiation clears all
three.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

NOT_ECT, ECT1, ECT0, CE = 0, 1, 2, 3
CODEPOINTS = {NOT_ECT: "Not-ECT", ECT1: "ECT(1)", ECT0: "ECT(0)", CE: "CE"}
SYN, ACK, ECE, CWR = 0x02, 0x10, 0x40, 0x80
#: (AE, CWR, ECE) of a SYN/ACK that accepts AccECN, one per codepoint of the SYN (RFC 9768).
ACCECN_SYNACKS = frozenset({(0, 1, 0), (0, 1, 1), (1, 0, 0), (1, 1, 0)})
#: FIN, SYN, RST, PSH, ACK, URG: a packet whose only one of these is SYN opens a connection.
CONTROL_FLAGS = 0x3F


@dataclass
class Headers:
    """The fields the actions read and write, one array entry per packet."""

    ecn: NDArray[np.uint8]  # IP ECN field
    flags: NDArray[np.uint8]  # TCP flags (byte 13)
    ae: NDArray[np.uint8]  # TCP AE bit (byte 12, bit 0)

    def copy(self) -> Headers:
        return self.take(slice(None))

    def take(self, idx: NDArray[np.intp] | NDArray[np.bool_] | slice) -> Headers:
        return Headers(self.ecn[idx].copy(), self.flags[idx].copy(), self.ae[idx].copy())


def is_syn(h: Headers) -> NDArray[np.bool_]:
    syn: NDArray[np.bool_] = (h.flags & CONTROL_FLAGS) == SYN
    return syn


@dataclass(frozen=True)
class Action:
    description: str
    matches: Callable[[Headers], NDArray[np.bool_]]  # which packets the action's rule matches
    rewrite: Callable[[Headers, NDArray[np.bool_]], None]  # what it does to the matched ones
    header: str  # "ip" (the ECN field) or "tcp" (the SYN's flags)


def _set_ecn(value: int) -> Callable[[Headers, NDArray[np.bool_]], None]:
    def rewrite(h: Headers, m: NDArray[np.bool_]) -> None:
        h.ecn[m] = value
    return rewrite


def _strip(h: Headers, m: NDArray[np.bool_]) -> None:
    h.flags[m] &= ~(ECE | CWR) & 0xFF
    h.ae[m] = 0


ACTIONS: dict[str, Action] = {
    "bleach": Action("every packet Not-ECT", lambda h: np.ones(len(h.ecn), bool), _set_ecn(NOT_ECT), "ip"),
    "ect1": Action("ECT(0) becomes ECT(1)", lambda h: h.ecn == ECT0, _set_ecn(ECT1), "ip"),
    "ect0": Action("ECT(1) becomes ECT(0)", lambda h: h.ecn == ECT1, _set_ecn(ECT0), "ip"),
    "force-ect1": Action("every packet but SYNs ECT(1) (CE kept)",
                         lambda h: ((h.flags & SYN) == 0) & (h.ecn != CE), _set_ecn(ECT1), "ip"),
    "ce-bleach": Action("CE becomes ECT(0)", lambda h: h.ecn == CE, _set_ecn(ECT0), "ip"),
    "strip-negotiation": Action("AE, CWR and ECE cleared in the SYN: the flow negotiates neither "
                                "classic ECN nor AccECN", is_syn, _strip, "tcp"),
}
#: Scenario values: every action, and `none`.
DESCRIPTIONS = {"none": "leave ECN alone"} | {name: a.description for name, a in ACTIONS.items()}


def replay(actions: list[str], h: Headers) -> tuple[Headers, dict[str, NDArray[np.bool_]]]:
    """The packets H after a flow's ACTIONS, in order (as the middlebox applies them), and
    which packets each action's rule matched."""
    out, matched = h.copy(), {}
    for name in actions:
        action = ACTIONS[name]
        matched[name] = action.matches(out)
        action.rewrite(out, matched[name])
    return out, matched


def rule_comment(flow: int, action: str) -> str:
    """How a rule is named in its counter's line, the teardown log and the verdict."""
    return f"flow {flow}: {action}"


def tc_cookie(flow: int) -> str:
    """The tc action cookie naming a flow's strip-negotiation filter: hex, at most 16 bytes."""
    return f"fl-flow-{flow}".encode().hex()


def cookie_flow(cookie: str) -> int | None:
    """The flow a tc cookie names (tc_cookie), or None for any other cookie."""
    try:
        text = bytes.fromhex(cookie).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    number = text.removeprefix("fl-flow-")
    return int(number) if number != text and number.isdigit() else None
