"""The shipped scenarios: each loads, expands to the predecessor's cell counts, and keeps
names published results can be matched with."""
import pytest

from flharness.cells import expand
from flharness.scenario import load_scenario
from flharness.scenario.load import SCENARIO_DIR, find_scenario, list_scenarios
from flharness.units import Duration

COUNTS = {
    "s1-rttfair": 192, "s2-codel-rate-step": 64, "s3-codel-variable-rate": 16, "s4-bidir-asym": 36,
    "s5-tunnel": 4, "s6-rfc3168": 24, "s7-oneflow": 6, "s8-rfc3168-second": 24,
    "s9-tunnel-reordering": 11, "s10-ect1-gaming": 8, "s11-ect1-gaming-latency": 8, "s12-pacing": 2,
    "s13-rfc3168-prague-second": 8, "pantheon-1mbit": 25, "pantheon-schemes": 36, "schemes-aqm": 8,
    "geni-tcp-lab": 35, "geni-exp-module": 12, "demo": 12, "aqm": 24,
    "prague-differential": 25, "prague-differential-dctcp": 3, "prague-differential-fifo": 6,
    "video-underutilisation": 8, "video-induced-delay": 6, "video-open-question": 12,
}


def cells_of(name):
    path = find_scenario(name)
    return expand(load_scenario(path), path)


def test_every_scenario_is_counted():
    assert sorted(list_scenarios(SCENARIO_DIR)) == sorted(COUNTS)


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_cell_counts(name):
    cells = cells_of(name)
    assert len(cells) == COUNTS[name]
    assert len({c.name for c in cells}) == len(cells)


def test_s1_names_and_per_flow_rtts():
    cells = {c.name: c for c in cells_of("s1-rttfair")}
    c = cells["cubic-vs-prague-pfifo_1000-50mbit-80ms-20ms"]
    assert [(f.cc, f.rtt_ms) for f in c.config.flows] == [("cubic", 80), ("prague", 20)]
    assert c.config.bottleneck.up.qdisc == "pfifo limit 1000"
    assert c.config.sysctls["cli"]["net.ipv4.tcp_ecn"] == "3"  # AccECN where Prague runs
    assert cells["cubic-vs-cubic-pfifo_200-10mbit-10ms-10ms"].config.sysctls["srv"]["net.ipv4.tcp_ecn"] == "1"
    assert cells["prague-vs-cubic-cnq_codel_af-10mbit-20ms-10ms"].config.bottleneck.up.self_shaping


def test_s2_rate_step_and_bursty_path():
    c = {c.name: c for c in cells_of("s2-codel-rate-step")}["cubic-dualpi2_2020-50mbit-80ms-bursty-5mbit"]
    (step,) = c.config.steps
    assert step.at_s == 30 and step.up.rate == "5mbit" and step.down.rate == "5mbit"
    # the seed's second netem, chained after the path delay's
    netem = c.config.netem
    assert netem.chained("up") == ["delay", "200us", "slot", "800us", "5ms", "packets", "16", "limit", "10000"]
    assert netem.delay_args("up", Duration.parse(c.config.flows[0].rtt)) == ["delay", "80ms"]


def test_s4_per_direction_fifo():
    c = {c.name: c for c in cells_of("s4-bidir-asym")}["cubic-pfifo_100-pfifo_1000-5mbit-100mbit-80ms"]
    links = c.config.bottleneck
    assert links.up.qdisc == "pfifo limit 100" and links.down.qdisc == "pfifo limit 1000"
    assert len(c.config.flows) == 8


def test_s6_bleaches_only_the_classic_flow():
    c = {c.name: c for c in cells_of("s6-rfc3168")}["prague-vs-reno-red_400000b-50mbit-20ms-noecn"]
    assert [f.ecn_actions for f in c.config.flows] == ["none", "bleach"]
    assert all(f.tos is not None for f in c.config.flows)  # told apart on the path
    assert c.config.bottleneck.up.words[-3:] == ["bandwidth", "50mbit", "ecn"]


def test_geni_sub_matrices():
    cells = {c.name: c for c in cells_of("geni-tcp-lab")}
    udp = cells["cubic-sfq-100mbit-0ms-tcp_nup-10flows-udp20mbit"]
    assert len(udp.config.flows) == 10 and udp.config.udp_rate.bps == 20e6 and udp.config.bottleneck.up.qdisc == "sfq"
    sacks = [cells[f"cubic-droptail-100mbit-0ms-tcp_1up-sack_off-loss_10pct-noudp-r{i}"] for i in range(1, 6)]
    sack = sacks[0]  # five runs, as the lab's
    assert sack.config.sysctls == {"cli": {"net.ipv4.tcp_sack": "0"}, "srv": {"net.ipv4.tcp_sack": "0"}}
    assert sack.config.netem.up == ["loss", "10%"] and sack.config.netem.down == []  # the data's way only
    assert len({c.config_hash for c in sacks}) == 5 and [c.repetition for c in sacks] == [1, 2, 3, 4, 5]
    assert "cubic-droptail-100mbit-0ms-tcp_1up-loss_10pct-noudp" in cells  # experiment 4 runs once
    reno = [n for n in cells if n.startswith("reno-droptail-100mbit-100ms-tcp_1up-") and "jitter" in n]
    assert sorted(reno) == sorted(f"reno-droptail-100mbit-100ms-tcp_1up-{r}_reordering{v}-delay_up-jitter_75ms-noudp"
                                  for r in ("rack", "norack") for v in ("3", "_max"))
    jitter = cells["cubic-droptail-100mbit-100ms-tcp_1up-norack_reordering100000-delay_up-jitter_75ms-noudp"]
    netem = jitter.config.netem
    assert jitter.config.split == "up" and netem.up == ["jitter", "75ms"] and not netem.down
    assert list(jitter.config.sysctls["cli"]) == ["net.ipv4.tcp_recovery", "net.ipv4.tcp_max_reordering",
                                           "net.ipv4.tcp_reordering"]  # max first: the kernel caps to it
