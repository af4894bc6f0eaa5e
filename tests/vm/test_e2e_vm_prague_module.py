"""fl's TCP Prague (images/modules/tcp_prague.c) provoked by hand in a guest of the l4s
image booted without IPv6 (tests/vm/prague_probe.sh, run by the l4s_lab fixture):
each response is read back from the kernel itself, never from the module's own account.
The flows' windows come from the kernel's tracepoints (tcp_probe: cwnd and ssthresh at
every ACK; tcp_cong_state_set; tcp_retransmit_skb), the pacing state from an fprobe on
tcp_sendmsg, the parameters from sysfs and the kernel log.

Each test failed on version 1 of the module (docs/prague.md, "Defects fixed in version
2"), but the one on windows below 2 segments, which version 1 never showed here either.
"""
from __future__ import annotations

import re
from itertools import pairwise

import pytest
from flrun import needs_vm
from ftrace import CWR, INFINITE_SSTHRESH, OPEN, RECOVERY, Event, read_trace, with_states
from guest import KERNEL_TROUBLE

pytestmark = [pytest.mark.vm, needs_vm()]
REFUSED = {"pacing_ca_pct": ("0", "100", 100, 1000), "alpha_shift": ("40", "4", 1, 16),
           "rtt_indep": ("2", "0", 0, 1), "pacing_ss_pct": ("99999999999", "200", 100, 1000),
           "burst_us": ("abc", "250", 4, 3906)}


@pytest.fixture(scope="module")
def probe(l4s_lab):
    done = l4s_lab["prague_probe"]
    assert done["rc"] == 0, done["out"][-3000:] + done["err"]
    return done


def part(probe, name: str) -> str:
    """What the probe printed under '== NAME'."""
    return probe["out"].split(f"== {name}\n", 1)[1].split("\n== ", 1)[0]


def trace(probe, name: str) -> list[Event]:
    return read_trace(probe["traces"] / f"{name}.trace")


def test_out_of_range_parameters_are_refused_with_their_range(probe):
    """A write outside a parameter's range fails and leaves the value as it was (pacing_ca_pct=0
    used to turn pacing off silently); the kernel log names the range; loading with such a
    value fails; values inside the range are taken."""
    text = part(probe, "parameters")
    for name, (bad, kept, lo, hi) in REFUSED.items():
        assert f"write {name}={bad} refused, now {kept}" in text, text
        assert f"tcp_prague: {name}={bad} refused: a whole number from {lo} to {hi}" in probe["out"]
    assert "write pacing_ca_pct=120 accepted, now 120" in text and "write ai_cwnd_limited=0 accepted, now 0" in text
    assert "load pacing_ca_pct=0 refused" in text
    assert re.search(r"loaded: fl tcp_prague 3 \(draft-briscoe-iccrg-prague-congestion-control-01\)", text), text


def test_any_process_and_any_namespace_may_select_it(probe):
    """TCP_CONG_NON_RESTRICTED, as Reno's and BBR's: an unprivileged setsockopt takes it, and
    a network namespace may make it its default (only the initial one could before)."""
    text = part(probe, "selection")
    assert "unprivileged setsockopt allowed" in text and "net.ipv4.tcp_congestion_control = prague" in text, text


def test_a_socket_leaving_prague_gets_its_pacing_back(probe):
    """.release: under prague the socket asks the kernel to pace (sk_pacing_status 1,
    SK_PACING_NEEDED) with bursts of 2^-12 s (sk_pacing_shift 12); switched to cubic it has
    the kernel's defaults again (0 and 10), read by an fprobe on tcp_sendmsg."""
    lines = part(probe, "release").splitlines()
    phases = {}
    for line in lines:
        if line.startswith("fl-phase "):
            phase = phases.setdefault(line.split()[1], set())
        elif m := re.search(r"status=(\d+) shift=(\d+)", line):
            phase.add((int(m[1]), int(m[2])))
    assert phases == {"prague": {(1, 12)}, "cubic": {(0, 10)}}, lines


def test_without_ipv6_only_the_ipv4_hook_is_registered(probe):
    """Booted with ipv6.disable=1 the module loads (its flows below ran) with its IPv4
    hook alone; with IPv6 both are there (test_e2e_vm_prague's module cycle)."""
    text = part(probe, "hooks")
    assert "ipv6 disabled: yes" in text and "prague_ecn_v4 [tcp_prague]" in text, text
    assert "prague_ecn_v6" not in text, text


def test_a_loss_inside_a_ce_cut_halves_the_window_and_retransmits_at_once(probe):
    """The middlebox marks packet 300 CE (alpha 1: the window halves), marks packet 12000 CE
    once alpha has decayed (a cut of a few packets) and drops packet 12005, which is found
    lost inside that cut's CWR state, where the core asks for no new ssthresh. The loss
    must still bring ssthresh to half the window the CWR began with (the two reductions
    are Reno's half together), and PRR must start afresh so that the fast retransmit
    goes with the ACK that started the recovery (a stale prr_out held it back)."""
    assert part(probe, "loss after a CE cut").count("packets 1 bytes 1500") == 3  # each rule hit once
    events = trace(probe, "loss_after_ce")
    states = [(i, e) for i, e in enumerate(events) if e.name == "tcp_cong_state_set"]
    seq = [e.int("cong_state") for _, e in states]
    pairs = [k for k in range(1, len(seq)) if seq[k - 1] == CWR and seq[k] == RECOVERY]
    assert len(pairs) == 1 and seq[:2] == [CWR, OPEN], seq
    cwr_at, recovery_at = states[pairs[0] - 1][0], states[pairs[0]][0]
    before = [e for e in events[:cwr_at] if e.name == "tcp_probe"][-1].int("snd_cwnd")
    after = [e for e in events[recovery_at:] if e.name == "tcp_probe"]
    assert before > 100, before
    assert after[0].int("ssthresh") <= before // 2 + 1, (before, after[0].fields)
    first_cut = next(e for e in events if e.name == "tcp_probe" and e.int("ssthresh") < INFINITE_SSTHRESH)
    assert first_cut.int("snd_cwnd") < 200, first_cut.fields  # the first CE halved slow start's window
    retransmit = next(i for i, e in enumerate(events) if i > recovery_at and e.name == "tcp_retransmit_skb")
    acks_between = sum(e.name == "tcp_probe" for e in events[recovery_at:retransmit])
    assert acks_between <= 1, acks_between


def test_loss_2020_pays_a_loss_one_segment_per_ack_over_a_round_trip(probe):
    """loss_2020=1, the 2020 fork's responses: the middlebox drops packet 12000 in
    congestion avoidance. Read from tcp_probe at every ACK: ssthresh is not halved as the
    recovery starts (the module's ssthresh hook leaves it where it was), then cwnd falls one segment
    per ACK and never more, nor grows, ssthresh following it at each step, to half the
    window it had (within the few segments the additive increase adds after the recovery),
    over about one round trip (at least W/2 - 5 ACKs, 0.5 to 2.5 smoothed RTTs); the
    draft's default halves ssthresh at once (the test above)."""
    assert part(probe, "loss_2020").count("packets 1 bytes 1500") == 2  # each rule hit once
    events = trace(probe, "loss_2020")
    recovery_at = next(i for i, e in enumerate(events)
                       if e.name == "tcp_cong_state_set" and e.int("cong_state") == RECOVERY)
    before = [e for e in events[:recovery_at] if e.name == "tcp_probe"][-1]
    window, srtt_s = before.int("snd_cwnd"), before.int("srtt") / 1e6
    after = [e for e in events[recovery_at:] if e.name == "tcp_probe"]
    assert window > 100 and 0.02 <= srtt_s < 1, before.fields
    assert after[0].int("ssthresh") in (before.int("ssthresh"), after[0].int("snd_cwnd")), (before.fields, after[0].fields)
    assert after[0].int("ssthresh") > window // 2 + 1, (window, after[0].fields)  # not halved
    cwnds = [e.int("snd_cwnd") for e in after]
    reached = next(k for k, c in enumerate(cwnds) if c <= window // 2 + 5)  # growth meanwhile: a few
    steps = [a - b for a, b in pairwise(cwnds[:reached + 1])]
    assert set(steps) <= {0, 1}, steps
    assert reached >= window // 2 - 5, (window, reached)
    assert all(e.int("ssthresh") == e.int("snd_cwnd") for e in after[1:reached + 1] if e.int("snd_cwnd") < window)
    took = after[reached].t - after[0].t
    assert 0.5 * srtt_s <= took <= 2.5 * srtt_s, (took, srtt_s)


def test_local_congestion_halves_the_window(probe):
    """Six flows whose own 2-packet qdisc refuses packets (no CE anywhere: no AQM marks, the
    sender counted none): every CWR state the core enters for them brings ssthresh to half
    the window (the next ACK's tcp_probe, still inside that CWR); version 1 left it infinite."""
    text = part(probe, "local congestion")
    drops = int(re.search(r"local drops: dropped (\d+)", text)[1])
    assert drops > 50 and "CE delivered: 0" in text, text
    last: dict[int, int] = {}
    pending: dict[int, int] = {}
    halved = []
    for e in trace(probe, "local_congestion"):
        if e.name == "tcp_probe":
            if e.port in pending:
                halved.append(e.int("ssthresh") <= max(pending.pop(e.port) // 2, 2) + 1)
            last[e.port] = e.int("snd_cwnd")
        elif e.name == "tcp_cong_state_set" and e.int("cong_state") == CWR and e.port in last:
            pending[e.port] = last[e.port]
    assert len(halved) >= 20 and all(halved), (len(halved), halved.count(False))


def test_fast_recovery_keeps_two_segments(probe):
    """20 % random loss at 5 Mbit/s: many fast recoveries with small windows; PRR never
    leaves fewer than 2 segments (after a retransmission timeout the core's loss window of
    1 applies, RFC 5681)."""
    in_recovery = [e.int("snd_cwnd") for state, e in with_states(trace(probe, "heavy_loss")) if state == RECOVERY]
    assert len(in_recovery) >= 50 and min(in_recovery) >= 2, (len(in_recovery), min(in_recovery, default=None))


def test_the_guest_kernel_said_nothing_of_trouble(probe):
    assert not KERNEL_TROUBLE.search(probe["kernel_log"]), probe["kernel_log"][-3000:]
