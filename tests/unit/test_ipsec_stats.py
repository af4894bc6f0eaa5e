"""An IPsec end's anti-replay drops from its teardown log (analysis/ipsec_stats.py), on
`ip -s xfrm state` as iproute2 7.3 prints it in the l4s image: a legacy 32-packet window
and an ESN one of 256, the stats line per SA, and the kernel's XFRM counters."""
from __future__ import annotations

from flharness.analysis.ipsec_stats import ipsec_end

SA = """src {src} dst {dst}
\tproto esp spi 0x0f170001(253165569) reqid 113(0x00000071) mode tunnel
\treplay-window {legacy} seq 0x00000000 flag  (0x00000000)
\tauth-trunc hmac(sha256) <key> (256 bits) 128
\tenc cbc(aes) <key> (128 bits)
{context}
\tlifetime current:
\t  1234567(bytes), 4321(packets)
\t  add 2026-11-27 17:36:07 use 2026-11-27 17:36:08
\tstats:
\t  replay-window {behind} replay {dup} failed {failed}
"""
ESN = "\tanti-replay esn context:\n\t seq-hi 0x0, seq 0x10e1, oseq-hi 0x0, oseq 0x0\n\t replay_window 256, bitmap-length 8"
LEGACY = "\tanti-replay context: seq 0x10e1, oseq 0x0, bitmap 0xffffffff"


def xfrm_stat(command: str, seq_errors: int) -> str:
    return f"$ {command}\nXfrmInError             \t0\nXfrmInStateSeqError     \t{seq_errors}\n\n"


def section(window: int, inbound: tuple[int, int, int], seq_errors: int | None, before: int | None = 0) -> str:
    """An end's part of the teardown log; SEQ_ERRORS the namespace's count since BEFORE
    (as the tunnel came up; None: not logged, as before fl logged it)."""
    context, legacy = (ESN, 0) if window > 32 else (LEGACY, window)
    sas = [SA.format(src="10.71.1.1", dst="10.71.2.1", legacy=legacy, context=context, behind=0, dup=0, failed=0),
           SA.format(src="10.71.2.1", dst="10.71.1.1", legacy=legacy, context=context, behind=inbound[0],
                     dup=inbound[1], failed=inbound[2])]
    out = "$ ip -s xfrm state\n" + "".join(sas) + "\n$ ip -s xfrm policy\nsrc 0.0.0.0/0 dst 0.0.0.0/0\n\n"
    if before is not None:
        out += xfrm_stat("cat xfrm_stat.up", before)
    if seq_errors is not None:
        out += xfrm_stat("cat /proc/net/xfrm_stat", (before or 0) + seq_errors)
    return out + "$ ip tcp_metrics show\n"


def test_the_ends_replay_drops_and_the_kernels_own_count():
    end = ipsec_end(section(32, (37, 2, 0), 39))
    assert (end.replay_window, end.sas, end.behind_window, end.duplicates, end.integrity_failed) == (32, 2, 37, 2, 0)
    assert end.replay_drops == 39 == end.kernel_seq_errors


def test_a_window_smaller_than_the_drop_count_is_read_as_the_window():
    """A 4-packet window that dropped 157 (a VM cell with netem reordering, as seen): the
    stats line's count is not the window."""
    end = ipsec_end(section(4, (157, 0, 0), 157))
    assert (end.replay_window, end.behind_window, end.kernel_seq_errors) == (4, 157, 157)


def test_an_esn_window_above_32_is_read_from_its_replay_context():
    end = ipsec_end(section(256, (0, 0, 0), 0))
    assert (end.replay_window, end.replay_drops, end.kernel_seq_errors) == (256, 0, 0)


def test_no_xfrm_state_in_the_log_is_no_end():
    assert ipsec_end("$ ip tcp_metrics show\n") is None
    assert ipsec_end(section(32, (5, 0, 0), None)).kernel_seq_errors is None


def test_the_kernels_count_is_this_cells_in_a_namespace_that_dropped_before():
    """The namespace outlives the cell: a second cell's kernel count is what grew since its
    tunnel came up, not what the first cell's SAs dropped too."""
    end = ipsec_end(section(64, (12, 0, 0), 12, before=157))
    assert end.replay_drops == 12 == end.kernel_seq_errors


def test_a_teardown_log_with_no_reading_at_setup_has_no_kernel_count():
    """Before fl read the counter as the tunnel came up, the count after the test included
    every earlier cell's drops: no cross-check, rather than a wrong one."""
    assert ipsec_end(section(32, (5, 0, 0), 5, before=None)).kernel_seq_errors is None
