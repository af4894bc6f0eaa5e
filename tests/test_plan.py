"""What the roles receive and the commands they render (rendered by the roles' own templates)."""
from pathlib import Path

import pytest

from flharness.cells import expand
from flharness.scenario import load_scenario
from flharness.testbed.inventory import load_inventory
from flharness.testbed.plan import cell_vars, delay_plan, flent_argv, render_bottleneck, run_vars

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def inv():
    return load_inventory(REPO / "inventory.ini")


def one_cell(scenario_file, text):
    path = scenario_file(text)
    return expand(load_scenario(path), path)


def test_per_flow_rtt_delay_classes(scenario_file):
    cell = one_cell(scenario_file, "test: tcp_2up\nrate: 50mbit\nqdisc: fq_codel\ncc: [cubic, prague]\n"
                                   "rtt: [80ms, 20ms]\n")[0]
    plan = delay_plan(cell)
    for direction in ("up", "down"):
        assert plan[direction]["classes"] == [{"netem": ["delay", "40ms", "limit", "100000"]},
                                              {"netem": ["delay", "10ms", "limit", "100000"]}]
    assert not plan["shared"]
    assert plan["filters"] == [{"tos": "0x4c", "class": 0}, {"tos": "0x8c", "class": 1}]
    assert plan["default"] == 0  # unmarked traffic (ping) follows flow 1


def test_no_delay_without_rtt(scenario_file):
    cell = one_cell(scenario_file, "test: tcp_1up\nrate: 5mbit\nqdisc: pfifo\ncc: reno\n")[0]
    assert delay_plan(cell) is None


def test_bottleneck_script_shapes(scenario_file, inv):
    cells = one_cell(scenario_file, """
        test: tcp_2up
        cc: [cubic, prague]
        rtt: [80ms, 20ms]
        matrix:
          rate: [{up: 5mbit, down: 100mbit}]
          qdisc: ["pfifo limit {{ packets('250ms') }}", cake bandwidth 50mbit]
    """)
    rv = run_vars(cells, ifb=True, nft=True)
    fifo, cake = (render_bottleneck(cell_vars(c, inv, Path("/tmp/x")), rv, inv) for c in cells)
    assert "run tc class add dev mid.r parent 1: classid 1:1 htb rate 5mbit ceil 5mbit" in fifo
    assert "run tc qdisc add dev mid.r parent 1:1 handle 10: pfifo limit 103" in fifo
    assert "run tc class add dev mid.l parent 1: classid 1:1 htb rate 100mbit ceil 100mbit" in fifo
    assert "run tc qdisc add dev mid.l parent 1:1 handle 10: pfifo limit 2064" in fifo
    assert "run tc qdisc add dev ifb4mid.l parent 1:11 handle 21: netem delay 10ms limit 100000" in fifo
    assert "u32 match ip tos 0x8c 0xfc flowid 1:11" in fifo
    assert "run tc filter add dev mid.r parent ffff: protocol all prio 10 u32 match u32 0 0 action " \
           "mirred egress redirect dev ifb4mid.r" in fifo
    assert "run tc qdisc add dev mid.r root handle 1: cake bandwidth 50mbit" in cake
    assert "htb" not in cake.split("# Upload")[1].split("# Path toward")[0]


def test_path_features_render(scenario_file, inv, tmp_path):
    """netem impairments per direction, ECN rewrites per flow, a client qdisc, UDP, a schedule."""
    cell, = one_cell(scenario_file, """
        test: tcp_2up
        rate: 20mbit
        qdisc: pfifo limit 100
        cc: [cubic, cubic]
        rtt: 100ms
        netem: {up: loss 5% jitter 75ms distribution normal, down: duplicate 1%}
        ecn: [bleach, none]
        client_qdisc: fq
        udp: 5mbit
        rate_schedule: [{at: 10s, rate: 5mbit}]
    """)
    cv = cell_vars(cell, inv, tmp_path)
    script = render_bottleneck(cv, run_vars([cell], True, True), inv)
    assert "root handle 1: netem delay 50ms 75ms distribution normal loss 5% limit 100000" in script
    assert "root handle 1: netem delay 50ms duplicate 1% limit 100000" in script
    assert "'iifname \"mid.l\" ip dscp 19 ip ecn set not-ect counter comment \"flow 1: bleach\"'" in script
    assert cv["client_qdisc"] == ["fq"] and cv["udp_bps"] == 5_000_000 and cv["target"] == "10.71.2.1"
    assert cv["schedule"] == [{"at": 10.0, "up": {"rate": "5mbit", "qdisc": ["pfifo", "limit", "100"],
                                                  "self_shaping": False},
                               "down": {"rate": "5mbit", "qdisc": ["pfifo", "limit", "100"],
                                        "self_shaping": False}}]


def test_values_reaching_shell_are_quoted(scenario_file, inv, tmp_path):
    """Labels and cell names are free text in places; the script must still quote them."""
    cell = one_cell(scenario_file, "test: tcp_1up\nrate: 5mbit\ncc: reno\n"
                                   "qdisc: {value: 'pfifo limit 10', label: \"x y (z)\"}\n")[0]
    cv = cell_vars(cell, inv, tmp_path)
    cv["bottleneck"]["up"]["rate"] = "5mbit; reboot"  # as if validation were bypassed
    script = render_bottleneck(cv, run_vars([cell], False, False), inv)
    assert "rate '5mbit; reboot' ceil '5mbit; reboot'" in script


def test_flent_command(scenario_file, inv, tmp_path):
    cells = one_cell(scenario_file, "test: tcp_2up\nlength: 30\nrate: 50mbit\nqdisc: pfifo\n"
                                    "matrix:\n  cc: [cubic-vs-cubic, bbr-vs-cubic]\n")
    argv = flent_argv(cells[0], inv, tmp_path)
    assert argv[:6] == ["timeout", "-k", "15", "160", "flent", "tcp_2up"]
    assert argv[argv.index("-H") + 1] == "10.71.2.1" and argv[argv.index("-l") + 1] == "30"
    params = [argv[i + 1] for i, a in enumerate(argv) if a == "--test-parameter"]
    # tcp_Nup ignores tcp_cong_control: the per-flow list must be set even when all agree
    assert "cc_algos=cubic,cubic" in params
    assert "fl_qdisc=pfifo" in params and f"fl_config_hash={cells[0].config_hash}" in params
    assert "markings" not in " ".join(params)
    assert "--socket-stats" in argv and "-x" in argv


def test_rrul_uses_global_cc(scenario_file, inv, tmp_path):
    cell = one_cell(scenario_file, "test: rrul_be\nrate: 10mbit\nqdisc: pfifo\ncc: bbr\n")[0]
    params = [a for a in flent_argv(cell, inv, tmp_path) if "=" in a]
    assert "tcp_cong_control=bbr" in params and not any(p.startswith("cc_algos") for p in params)
