"""The per-flow ECN rewrites as commands (flharness/testbed/ecn_rules.py), against
checked-in expected command files (tests/fixtures/commands/; FL_UPDATE_GOLDEN=1 rewrites
them, to be reviewed as a diff), and the actions' semantics (flharness/ecn.py) on packets."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from flharness.ecn import ACK, CE, CWR, ECE, ECT0, ECT1, NOT_ECT, SYN, Headers, cookie_flow, replay, tc_cookie
from flharness.testbed.ecn_rules import commands, flow_rules

EXPECTED = Path(__file__).parents[1] / "fixtures" / "commands"
#: The behaviours test's four flows (tests/scenarios/behaviours-paths.yml), DSCPs as fl marks them.
FLOWS = [(1, 19, "ect1"), (2, 35, "strip-negotiation+force-ect1"), (3, 51, "strip-negotiation+force-ect1+ect0"),
         (4, 3, "strip-negotiation"), (5, None, "none")]


def matches_file(name: str, made) -> None:
    text = "# nft rule bodies\n" + "\n".join(made.nft) + "\n# tc batch lines\n" + "\n".join(made.tc) + "\n"
    path = EXPECTED / name
    if os.environ.get("FL_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"{path} differs (FL_UPDATE_GOLDEN=1 rewrites it)"


def test_middlebox_rules_with_tc_for_the_syn():
    """Kernels with pedit and csum: IP ECN rewrites in nftables, a SYN's flags in one tc
    filter per flow on the client port's ingress, which gets its ingress qdisc."""
    matches_file("ecn-mid-tc.txt", commands(flow_rules(FLOWS), "mid.l", "mid", "tc"))


def test_middlebox_rules_where_the_path_delay_made_the_ingress_qdisc():
    made = commands(flow_rules(FLOWS), "mid.l", "mid", "tc", ingress_exists=True)
    assert not any(line.startswith("qdisc add") for line in made.tc) and len(made.tc) == 3


def test_middlebox_rules_with_nftables_for_the_syn():
    """Kernels without pedit whose nftables writes to the TCP header take effect."""
    matches_file("ecn-mid-nft.txt", commands(flow_rules(FLOWS), "mid.l", "mid", "nft"))


def test_tunnel_entrance_rules():
    """In tunnelled cells: the client's output hook and its tunnel device's egress."""
    matches_file("ecn-tunnel-tc.txt", commands(flow_rules(FLOWS), "fl-tun", "cli", "tc"))


def test_no_way_to_rewrite_a_syn_is_an_error_not_a_silent_rule():
    with pytest.raises(ValueError, match="strip-negotiation"):
        commands(flow_rules(FLOWS), "mid.l", "mid", None)
    assert commands(flow_rules([(1, 19, "bleach")]), "mid.l", "mid", None).nft  # IP rewrites need none


def test_cookies_name_their_flow_and_fit_tc():
    for flow in (1, 12):
        assert cookie_flow(tc_cookie(flow)) == flow and len(bytes.fromhex(tc_cookie(flow))) <= 16
    assert cookie_flow("666c6f772031") is None and cookie_flow("zz") is None


def headers(*packets: tuple[int, int, int]) -> Headers:
    ecn, flags, ae = zip(*packets)
    return Headers(np.array(ecn, np.uint8), np.array(flags, np.uint8), np.array(ae, np.uint8))


def test_the_actions_on_packets():
    """A classic ECN SYN, an AccECN SYN, a SYN-ACK, data ECT(0), data CE, data Not-ECT."""
    h = headers((NOT_ECT, SYN | ECE | CWR, 0), (NOT_ECT, SYN | ECE | CWR, 1), (NOT_ECT, SYN | ACK | ECE, 0),
                (ECT0, ACK, 0), (CE, ACK, 0), (NOT_ECT, ACK | ECE, 0))
    out, matched = replay(["strip-negotiation"], h)
    assert list(out.flags[:3]) == [SYN, SYN, SYN | ACK | ECE] and list(out.ae) == [0] * 6
    assert list(matched["strip-negotiation"]) == [True, True, False, False, False, False]
    out, _ = replay(["force-ect1", "ect0"], h)
    assert list(out.ecn) == [NOT_ECT, NOT_ECT, NOT_ECT, ECT0, CE, ECT0]
    assert list(replay(["ect1"], h)[0].ecn) == [NOT_ECT] * 3 + [ECT1, CE, NOT_ECT]
    assert list(replay(["ce-bleach"], h)[0].ecn) == [NOT_ECT] * 3 + [ECT0, ECT0, NOT_ECT]
    assert list(replay(["bleach"], h)[0].ecn) == [NOT_ECT] * 6
    assert list(h.ecn) == [NOT_ECT] * 3 + [ECT0, CE, NOT_ECT]  # the input is left as it was
