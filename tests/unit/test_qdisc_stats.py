"""The bottleneck qdiscs' totals read from a teardown log (analysis/qdisc_stats.py), at
the ports cell.json names (or an older cell's queue samples' header)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from flharness.analysis.qdisc_stats import bottleneck_totals, device_qdiscs, json_qdisc, qdiscs
from flharness.analysis.queue import header_ports
from flharness.analysis.teardown_log import host_sections
from flharness.teardown_format import QDISC_JSON

#: The middlebox's part of a teardown log, dualpi2 under fl's HTB towards the server
#: and a FIFO towards the client (iproute2 7.3's text, as a real l4s-image cell wrote it:
#: dualpi2's own statistics unindented).
TEARDOWN = """\
# teardown of cell x
======== cli ========
$ tc -s -d qdisc show dev cli.r; tc -s -d class show dev cli.r
qdisc noqueue 0: root refcnt 2
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0

======== mid ========
$ tc -s -d qdisc show dev mid.l; tc -s -d class show dev mid.l
qdisc htb 1: root refcnt 3 r2q 10 default 0x1 direct_packets_stat 0 ver 3.17 direct_qlen 1000
 Sent 821916 bytes 11582 pkt (dropped 0, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
qdisc pfifo 10: parent 1:1 limit 206p
 Sent 821916 bytes 11582 pkt (dropped 3, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
class htb 1:1 root leaf 10: prio 0 quantum 125000 rate 10Mbit ceil 10Mbit linklayer ethernet burst 1600b/1 mpu 0b
 Sent 821916 bytes 11582 pkt (dropped 0, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0

$ tc -s -d qdisc show dev mid.r; tc -s -d class show dev mid.r
qdisc htb 1: root refcnt 3 r2q 10 default 0x1 direct_packets_stat 0 ver 3.17 direct_qlen 1000
 Sent 26960272 bytes 18386 pkt (dropped 194, overlimits 18194 requeues 0)
 backlog 0b 0p requeues 0
qdisc dualpi2 10: parent 1:1 limit 10000p memlimit 1472000B target 15ms tupdate 16ms step_thresh 1ms l4s_ect
 Sent 26960272 bytes 18386 pkt (dropped 4, overlimits 0 requeues 0)
 backlog 3028b 2p requeues 0
prob 0.000977 delay_c 1200us delay_l 80us
pkts_in_c 8379 pkts_in_l 2131 maxq 45
ecn_mark 13 step_mark 402
credit -1250 (C-queue)
memory_used 0 (max 68928) of memory limit 1472000

$ ip -s link show dev mid.l; ip -s link show dev mid.r
1: lo: <LOOPBACK> mtu 65536

======== srv ========
"""


def test_the_declared_qdisc_per_direction_with_dualpi2s_statistics(tmp_path):
    totals = bottleneck_totals(host_sections(TEARDOWN)["mid"], {"up": "mid.r", "down": "mid.l"})
    up, down = totals["up"], totals["down"]
    assert (down["kind"], down["handle"], down["sent_pkts"], down["drops"]) == ("pfifo", "10:", 11582, 3)
    assert "pkts_in_c" not in down
    assert (up["kind"], up["sent_pkts"], up["drops"], up["backlog_pkts"]) == ("dualpi2", 18386, 4, 2)
    assert (up["pkts_in_c"], up["pkts_in_l"], up["maxq"], up["ecn_marks"], up["step_marks"]) == (8379, 2131, 45, 13, 402)
    assert (up["credit"], up["delay_c_us"], up["delay_l_us"], up["prob"]) == (-1250, 1200, 80, 0.000977)


def test_a_self_shaping_root_and_missing_logs(tmp_path):
    block = "qdisc cake 1: root refcnt 2 bandwidth 10Mbit\n Sent 10 bytes 2 pkt (dropped 1, overlimits 0 requeues 0)\n"
    assert [(q["kind"], q["handle"], q["drops"]) for q in qdiscs(block)] == [("cake", "1:", 1)]
    assert set(host_sections(TEARDOWN)) == {"cli", "mid", "srv"}
    assert bottleneck_totals("", header_ports("")) == {}


def test_a_port_the_teardown_log_lacks_has_no_totals():
    """Ports (cell.json's) naming a device the middlebox's part does not show: that
    direction has no totals, the other its own; none shown: no totals at all."""
    mid = host_sections(TEARDOWN)["mid"]
    assert set(bottleneck_totals(mid, {"up": "mid.x", "down": "mid.l"})) == {"down"}
    assert bottleneck_totals(mid, {"up": "mid.x", "down": "mid.y"}) == {}


def test_an_older_cells_ports_from_its_queue_samples_header():
    """Cells recorded before cell.json had ports: the sampler's header names each
    direction's device; a header without directions, or none, names none."""
    old = "# devices up=mid.r down=mid.l\n# 1.0\n[]\n[]\n"
    assert header_ports(old) == {"up": "mid.r", "down": "mid.l"}
    assert bottleneck_totals(host_sections(TEARDOWN)["mid"], header_ports(old)).keys() == {"up", "down"}
    assert header_ports("# devices mid.r mid.l\n# 1.0\n") == {} == header_ports("# 1.0\n[]\n")


# tc -s -d qdisc show, Linux 7.3 / iproute2 7.x in the l4s image, four Reno flows through
# each qdisc under a 20 Mbit/s htb class (PIE past its 10 % probability drops ECN packets too)
AQMS = """\
qdisc pie 10: parent 1:1 limit 1000p target 15ms tupdate 16ms alpha 2 beta 20 ecn
 Sent 14620788 bytes 9678 pkt (dropped 661, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
  prob 0.180714 delay 0us
  pkts_in 5691 overlimit 3 dropped 658 maxq 16 ecn_mark 12

qdisc red 10: parent 1:1 limit 400000b min 33333b max 100000b ecn adaptive ewma 5 probability 0.02 Scell_log 14
 Sent 10981660 bytes 7274 pkt (dropped 7, overlimits 78 requeues 0)
 backlog 0b 0p requeues 0
  marked 77 early 1 pdrop 6 other 0

qdisc fq_codel 10: parent 1:1 limit 10240p flows 1 quantum 1514 target 5ms interval 100ms memory_limit 32Mb ecn drop_batch 64
 Sent 11834112 bytes 7836 pkt (dropped 0, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
  maxpacket 68130 drop_overlimit 0 new_flow_count 1 ecn_mark 308
  new_flows_len 0 old_flows_len 1
"""


def test_each_aqms_early_and_forced_drops_and_marks():
    """PIE's, RED's and fq_codel's own statistics under one name each: early drops (the
    AQM's), forced drops (a full queue), ECN marks; none of dualpi2's names taken from them."""
    pie, red, fq = qdiscs(AQMS)
    assert (pie["drops"], pie["early_drops"], pie["forced_drops"], pie["ecn_marks"], pie["prob"]) == (661, 658, 3, 12, 0.180714)
    assert (red["drops"], red["early_drops"], red["forced_drops"], red["ecn_marks"]) == (7, 1, 6, 77)
    assert (fq["forced_drops"], fq["ecn_marks"]) == (0, 308) and "early_drops" not in fq
    assert not any(k in q for q in (pie, red, fq) for k in ("step_marks", "pkts_in_c", "credit"))


def test_an_endpoints_tcp_counters_grow_over_the_cell():
    """The namespace's counters as setup.sh found them and after the test: the growth;
    a counter this kernel lacks ("-") or a log without the readings gives none."""
    from flharness.analysis.tcp_counters import tcp_counters
    section = ("$ cat tcp_counters.up\nRetransSegs 100\nTCPTimeouts 2\nTCPLossProbes -\n\n"
               "$ fl_tcp_counters\nRetransSegs 160\nTCPTimeouts 5\nTCPLossProbes -\n\n$ ip tcp_metrics show\n")
    assert tcp_counters(section) == {"RetransSegs": 60, "TCPTimeouts": 3}
    assert tcp_counters("$ ip tcp_metrics show\n") is None


#: tc's text and JSON of one qdisc at rest, for each kind fl reads (iproute2 7.3 in the
#: l4s image, after two flows through the qdisc under an HTB at 10 Mbit/s).
TC_OUTPUT = Path(__file__).parents[1] / "fixtures" / "tc" / "iproute2-7.3.txt"


def _tc_output() -> dict[str, tuple[str, str]]:
    found = re.findall(r"^==== (\w+)\n(.*?)^==== json\n(\[.*?\])\n", TC_OUTPUT.read_text(), re.S | re.M)
    return {name: (text, js) for name, text, js in found}


@pytest.mark.parametrize("name", sorted(_tc_output()))
def test_tcs_json_reads_as_its_text(name):
    """Each kind's statistics, read from tc's JSON, are those read from its text (the same
    names, values and types): a cell's totals do not depend on which the log holds."""
    text, js = _tc_output()[name]
    assert [json_qdisc(q) for q in json.loads(js)] == qdiscs(text)


def test_the_fixture_holds_each_kinds_own_statistics():
    """The kinds' own counters are non-zero in the fixture, so the test above compares them."""
    read = {name: qdiscs(text)[-1] for name, (text, _) in _tc_output().items()}
    assert read["dualpi2_2020"]["ecn_marks"] > 0 and read["dualpi2"]["pkts_in_c"] > 0
    assert read["pie_drop"]["early_drops"] > 0 and read["red"]["ecn_marks"] > 0
    assert read["red_drop"]["early_drops"] + read["red_drop"]["forced_drops"] > 0
    assert read["fq_codel"]["ecn_marks"] > 0 and read["cake"]["ecn_marks"] > 0
    assert read["netem"]["drops"] > 0 and read["pfifo"]["sent_pkts"] > 0 and read["tbf"]["sent_pkts"] > 0


def test_the_json_line_is_read_where_the_log_has_it():
    """A host part with QDISC_JSON's line is read from it, per device (each qdisc names its
    "dev"); without it, from the text."""
    js = json.dumps([{"kind": "pfifo", "handle": "10:", "dev": "mid.l", "packets": 7, "drops": 1},
                     {"kind": "fq_codel", "handle": "10:", "dev": "mid.r", "ecn_mark": 5, "drop_overlimit": 0}])
    mid = host_sections(TEARDOWN)["mid"]
    with_json = mid.replace("$ ip -s link", f"$ {QDISC_JSON}\n{js}\n\n$ ip -s link")
    assert device_qdiscs(with_json) == {"mid.l": [{"kind": "pfifo", "handle": "10:", "sent_pkts": 7, "drops": 1}],
                                        "mid.r": [{"kind": "fq_codel", "handle": "10:", "ecn_marks": 5,
                                                   "forced_drops": 0}]}
    assert bottleneck_totals(with_json, {"up": "mid.r"})["up"]["ecn_marks"] == 5
    assert bottleneck_totals(mid, {"up": "mid.r"})["up"]["kind"] == "dualpi2"  # the text's
    cut = with_json.replace(js, js[:40])  # a line cut short: the text is read
    assert bottleneck_totals(cut, {"up": "mid.r"})["up"]["kind"] == "dualpi2"
