"""What the roles receive: the cell's command files (testbed/commands.py) and the scripts
the roles' own templates render around them."""
import re
import shlex
from pathlib import Path

import pytest
import yaml

from flharness.analysis.flentlib import resultset_module
from flharness.cells import expand
from flharness.errors import ScenarioError
from flharness.scenario import load_scenario
from flharness.testbed.commands import DelayClass, TosFilter, delay_plan
from flharness.testbed.flent_script import FLENT_FILE
from flharness.testbed.inventory import load_inventory
from flharness.testbed.plan import (
    DRY_RUN_ID,
    DRY_RUN_ROOT,
    KEY_SHOWN,
    bottleneck_devs,
    cell_hosts,
    cell_vars,
    ecn_place,
    flent_argv,
    host_dirs,
    run_vars,
    samplers,
    state_devs,
    target,
)
from flharness.testbed.state_script import STATE_FILE

REPO = Path(__file__).resolve().parents[2]
SCRATCH = host_dirs(DRY_RUN_ID, DRY_RUN_ROOT)  # the hosts' scratch folders as rendered scripts show them


@pytest.fixture(scope="module")
def inv():
    return load_inventory(REPO / "inventory.ini")


def one_cell(scenario_file, text):
    path = scenario_file(text)
    return expand(load_scenario(path), path)


RV = run_vars([], ifb=True, nft=True).model_copy(update={"ifb": True})  # fl_run: IFBs and nft, no htb_args
#: The features every probe tries, none working.
FEATURES = dict.fromkeys(("ifb", "ingress", "u32_mirred", "netem", "nftables", "veth", "accecn"), False)


def reply(*cells, **over):
    """A probe reply (testbed/probe_reply.py) that answers what CELLS' request asks: every
    qdisc spec and CC usable, every sysctl present; OVER replaces whole keys."""
    from flharness.capabilities import probe_request
    from flharness.testbed.probe_reply import ProbeReply
    request = probe_request(list(cells))
    data = {"kernel": "6.1", "root": True, "tools": {}, "error": None, "features": FEATURES, "kinds": {"htb": "ok"},
            "qdiscs": {" ".join(map(str, t)): {"verdict": "ok"} for t, _ in request["qdiscs"]},
            "ccs": dict.fromkeys(request["ccs"], True), "cc_modules": {},
            "sysctls": dict.fromkeys(request["sysctls"], True), "sysctl_defaults": {},
            "sysctl_sets": {" ".join(f"{k}={v}" for k, v in pairs): "" for pairs in request["sysctl_sets"]},
            "tcp_rewrite": {"tc": True}}
    return ProbeReply.model_validate({**data, **over})


def setup_scripts(cell_vars_list, rv, inv, host="mid"):
    """Each cell's setup script for HOST (testbed/cell_scripts.py, as fl_cell hands it over)."""
    return [cv.hosts[host].setup for cv in cell_vars_list]


def files(cv, host="mid"):
    """One host's command files of a cell, all in one text."""
    return "".join(cv.files.get(host, {}).values())


def test_per_flow_rtt_delay_classes(scenario_file):
    cell = one_cell(scenario_file, "test: tcp_2up\nrate: 50mbit\nqdisc: fq_codel\ncc: [cubic, prague]\n"
                                   "rtt: [80ms, 20ms]\n")[0]
    plan = delay_plan(cell.config)
    for direction in ("up", "down"):
        assert plan.classes(direction) == (DelayClass(("delay", "40ms", "limit", "100000")),
                                           DelayClass(("delay", "10ms", "limit", "100000")))
    assert not plan.shared
    assert plan.filters == (TosFilter("0x4c", 0), TosFilter("0x8c", 1))
    assert plan.default == 0  # unmarked traffic (ping) follows flow 1


def test_rtt_split_puts_the_delay_on_one_way(scenario_file):
    """rtt_split: up puts each flow's whole RTT (and here the jitter) on the way cli → srv."""
    cells = one_cell(scenario_file, "test: tcp_2up\nrate: 50mbit\nqdisc: pfifo\ncc: cubic\n"
                                    "rtt: [80ms, 20ms]\nnetem: {up: jitter 30ms}\n"
                                    "matrix: {rtt_split: [up, down, even]}\n")
    up, down, even = (delay_plan(c.config) for c in cells)
    assert [c.netem[:3] for c in up.up] == [("delay", "80ms", "30ms"), ("delay", "20ms", "30ms")]
    assert [c.netem[:2] for c in up.down] == [("delay", "0ms"), ("delay", "0ms")]
    assert [c.netem[:2] for c in down.down] == [("delay", "80ms"), ("delay", "20ms")]
    assert [c.netem[:2] for c in even.down] == [("delay", "40ms"), ("delay", "10ms")]
    assert [c.name.split("-")[-1] for c in cells] == ["delay_up", "delay_down", "rtt_even"]
    assert cells[0].config.rtt_split == "up" and "rtt_split" not in cells[2].config.model_dump(mode="json")


def test_rtt_split_rejects_other_values(scenario_file):
    with pytest.raises(ScenarioError, match="rtt_split 'sideways' is none of"):
        one_cell(scenario_file, "test: tcp_1up\nrate: 5mbit\nqdisc: pfifo\ncc: reno\nrtt: 10ms\n"
                                "rtt_split: sideways\n")


def test_no_delay_without_rtt(scenario_file):
    cell = one_cell(scenario_file, "test: tcp_1up\nrate: 5mbit\nqdisc: pfifo\ncc: reno\n")[0]
    assert delay_plan(cell.config) is None


def test_bottleneck_script_shapes(scenario_file, inv):
    cells = one_cell(scenario_file, """
        test: tcp_2up
        cc: [cubic, prague]
        rtt: [80ms, 20ms]
        matrix:
          rate: [{up: 5mbit, down: 100mbit}]
          qdisc: ["pfifo limit {{ packets('250ms') }}", cake bandwidth 50mbit]
    """)
    fifo, cake = (cell_vars(c, inv, Path("/tmp/x"), tcp_rewrite="tc", run_vars=RV, scratch=SCRATCH).files["mid"]["bottleneck.tc"]
                  for c in cells)
    assert "class add dev mid.r parent 1: classid 1:1 htb rate 5mbit ceil 5mbit\n" in fifo
    assert "qdisc add dev mid.r parent 1:1 handle 10: pfifo limit 103\n" in fifo
    assert "class add dev mid.l parent 1: classid 1:1 htb rate 100mbit ceil 100mbit\n" in fifo
    assert "qdisc add dev mid.l parent 1:1 handle 10: pfifo limit 2064\n" in fifo
    assert "qdisc add dev ifb4mid.l parent 1:11 handle 21: netem delay 10ms limit 100000\n" in fifo
    assert "u32 match ip tos 0x8c 0xfc flowid 1:11\n" in fifo
    assert "filter add dev mid.r parent ffff: protocol all prio 10 u32 match u32 0 0 action " \
           "mirred egress redirect dev ifb4mid.r\n" in fifo
    assert cake.startswith("qdisc add dev mid.r root handle 1: cake bandwidth 50mbit\n")
    assert "htb" not in cake.split("ifb4mid")[0]


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
    cv = cell_vars(cell, inv, tmp_path, tcp_rewrite="tc", run_vars=RV, scratch=SCRATCH)
    mid = cv.files["mid"]
    assert "root handle 1: netem delay 50ms 75ms distribution normal loss 5% limit 100000\n" in mid["bottleneck.tc"]
    assert "root handle 1: netem delay 50ms duplicate 1% limit 100000\n" in mid["bottleneck.tc"]
    assert mid["ecn.nft"] == ("flush chain inet fl ecn_rewrite\nadd rule inet fl ecn_rewrite iifname \"mid.l\" ip dscp 19 "
                              "ip ecn set not-ect counter comment \"flow 1: bleach\"\nreset counters table inet fl\n")
    assert all(STATE_FILE in cv.files[h] for h in ("cli", "mid", "srv"))  # each host's state script (state_script.py)
    assert {k: v for k, v in cv.files["cli"].items() if k not in (STATE_FILE, FLENT_FILE)} == {"client.tc": "qdisc add dev cli.r root fq\n"}
    assert "iperf -u -c 10.71.2.1 -p 5001 -b 5000000 \\\n" in cv.files["cli"][FLENT_FILE]  # the client's Flent script (flent_script.py)
    assert target(cell, inv) == "10.71.2.1" and '"$dir/fl-schedule"' in cv.hosts["mid"].setup
    assert mid["schedule.steps"] == ('10000000 schedule-1.tc {"step":1,"at_s":10.0,"up":"5mbit pfifo limit 100",'
                                     '"down":"5mbit pfifo limit 100"}\n')
    assert mid["schedule-1.tc"] == ("class change dev mid.r parent 1: classid 1:1 htb rate 5mbit ceil 5mbit\n"
                                    "class change dev mid.l parent 1: classid 1:1 htb rate 5mbit ceil 5mbit\n")


def test_a_rate_step_changes_a_qdisc_only_where_its_words_change():
    """dualpi2 refuses `qdisc change` without options ("Dualpi2 options are required"):
    a step that keeps the qdisc's words changes the htb class's rate only; a qdisc whose
    words follow the rate, or one that shapes by itself, is changed."""
    from flharness.results.cell_record import LinkConfig
    from flharness.testbed.commands import change

    def link(rate: str, qdisc: str, shaping: bool = False) -> LinkConfig:
        return LinkConfig(rate=rate, rate_bps=float(rate.removesuffix("mbit")) * 1e6, qdisc=qdisc, self_shaping=shaping)

    settings = RV
    assert change("m", link("25mbit", "dualpi2"), link("50mbit", "dualpi2"), settings) == [
        "class change dev m parent 1: classid 1:1 htb rate 25mbit ceil 25mbit"]
    assert change("m", link("25mbit", "fq_codel target 9ms"), link("50mbit", "fq_codel target 5ms"), settings)[1] == (
        "qdisc change dev m parent 1:1 handle 10: fq_codel target 9ms")
    assert change("m", link("25mbit", "cake bandwidth 25mbit", True), link("50mbit", "cake bandwidth 50mbit", True),
                  settings) == ["qdisc change dev m root handle 1: cake bandwidth 25mbit"]


def test_the_bottleneck_ports_come_from_one_place(scenario_file, inv, tmp_path):
    """The ports the commands shape, the queue sampler reads and cell.json records are the
    inventory's, by direction as commands.Ports.queues decides: upload's towards srv."""
    from types import SimpleNamespace

    from flharness.results.cell_record import CellRecord
    from flharness.run.provenance_log import on_testbed
    from flharness.testbed.commands import ports
    cell, = one_cell(scenario_file, "test: tcp_1up\nrate: 5mbit\ncc: reno\nqdisc: pfifo limit 10\n")
    queues = ports(inv).queues
    assert queues == {"up": inv.hostvars["mid"]["fl_if_srv"], "down": inv.hostvars["mid"]["fl_if_cli"]} \
        == {"up": "mid.r", "down": "mid.l"}
    cv = cell_vars(cell, inv, tmp_path, tcp_rewrite="tc", run_vars=RV, scratch=SCRATCH)
    assert "class add dev mid.r parent 1: classid 1:1 htb rate 5mbit" in cv.files["mid"]["bottleneck.tc"]
    script, = setup_scripts([cv], run_vars([cell], False, False), inv)
    sampler = next(line for line in script.splitlines() if line.startswith('"$dir/fl-start" "$dir/qdisc-sample.pid"'))
    assert shlex.split(sampler)[-2:] == ["up=mid.r", "down=mid.l"]
    rec = CellRecord(scenario=cell.scenario, cell=cell.name, config_hash=cell.config_hash, status="ok",
                     config=cell.config, backend={"kind": "host", "testbed": "netns", "inventory": "x", "clock": "real"})
    on_testbed(rec, cell, SimpleNamespace(id="fl-1", label="", inv=inv))
    assert rec.ports is not None and rec.ports.by_direction() == queues


def test_values_reaching_shell_are_quoted(scenario_file, inv, tmp_path):
    """Labels and cell names are free text in places; the script must still quote them (a
    command file is written whole from one quoted word: no shell sees its words)."""
    cell = one_cell(scenario_file, "test: tcp_1up\nrate: 5mbit\ncc: reno\n"
                                   "qdisc: {value: 'pfifo limit 10', label: \"x y (z)\"}\n")[0]
    cv = cell_vars(cell, inv, tmp_path, tcp_rewrite="tc", run_vars=RV, scratch=SCRATCH)
    batch = cv.files["mid"]["bottleneck.tc"]
    evil = batch.replace("rate 5mbit", "rate 5mbit; reboot $(reboot)")  # as if validation were bypassed
    from flharness.testbed.cell_scripts import setup_script
    from flharness.testbed.plan import cell_host_plan, cell_hosts
    mid = cell_hosts(cell, inv, str(tmp_path), RV, SCRATCH)["mid"]
    files = {**cv.files["mid"], "bottleneck.tc": evil}
    script = setup_script(cell_host_plan(cell, inv, "mid", mid, RV, SCRATCH, files, None, str(tmp_path)))
    written = re.search(r"^printf '%s' ('(?:[^']|'\"'\"')*') > \"\$cmd/\"bottleneck.tc$", script, re.M)
    assert written and shlex.split(written.group(1)) == [evil]


@pytest.mark.parametrize("name", ["s1\n", "s1\nreboot", "s1 x"])
def test_a_name_ending_a_line_early_is_refused(name):
    """Names reach the scripts' comment lines as they are: a newline would end one (Python's
    `$` matches before a final newline; fl's patterns end in \\Z)."""
    from flharness.scenario.values import check_name
    with pytest.raises(ValueError, match="must be letters, digits"):
        check_name(name)


def test_flent_command(scenario_file, inv, tmp_path):
    cells = one_cell(scenario_file, "test: tcp_2up\nlength: 30\nrate: 50mbit\nqdisc: pfifo\n"
                                    "matrix:\n  cc: [cubic-vs-cubic, bbr-vs-cubic]\n")
    argv = flent_argv(cells[0], inv, tmp_path)
    assert argv[:6] == ["timeout", "-k", "15", "160", "fl-flent", "tcp_2up"]
    # on the virtual clock guest time leaps while the guest idles: no limit in guest time
    assert flent_argv(cells[0], inv, tmp_path, time_limit=False)[:2] == ["fl-flent", "tcp_2up"]
    assert argv[argv.index("-H") + 1] == "10.71.2.1" and argv[argv.index("-l") + 1] == "30"
    params = [argv[i + 1] for i, a in enumerate(argv) if a == "--test-parameter"]
    # tcp_Nup ignores tcp_cong_control: the per-flow list must be set even when all agree
    assert "cc_algos=cubic,cubic" in params
    assert "fl_qdisc=pfifo" in params and f"fl_config_hash={cells[0].config_hash}" in params
    assert "markings" not in " ".join(params)
    assert "--socket-stats" in argv and "-x" not in argv and "-d" not in argv  # Flent's default lead


def test_a_shorter_lead_reaches_flent_and_the_time_limits(scenario_file, inv, tmp_path):
    """`lead: 2`: Flent's -d, the time limit and the UDP flow's start follow it; a cell
    at the default lead keeps its configuration (and hash) unchanged."""
    text = "test: tcp_1up\nlength: 10\nrate: 10mbit\nqdisc: pfifo\ncc: cubic\n"
    default, short = one_cell(scenario_file, text)[0], one_cell(scenario_file, text + "lead: 2\n")[0]
    assert default.config.lead is None and default.config.lead_s == 5 and default.config.flent_s == 20
    assert "lead" not in default.config.model_dump(exclude_none=True)
    assert short.config.lead == 2 and short.config.flent_s == 14 and short.config_hash != default.config_hash
    argv = flent_argv(short, inv, tmp_path)
    assert argv[3] == str(14 + 120) and argv[argv.index("-d") + 1] == "2"
    assert one_cell(scenario_file, text + "lead: 5\n")[0].config_hash == default.config_hash
    with pytest.raises(ScenarioError, match="lead"):
        one_cell(scenario_file, text + "lead: 0\n")


def test_rrul_uses_global_cc(scenario_file, inv, tmp_path):
    cell = one_cell(scenario_file, "test: rrul_be\nrate: 10mbit\nqdisc: pfifo\ncc: bbr\n")[0]
    params = [a for a in flent_argv(cell, inv, tmp_path) if "=" in a]
    assert "tcp_cong_control=bbr" in params and not any(p.startswith("cc_algos") for p in params)


def flent_lists(argv: list[str]) -> dict[str, list[str]]:
    """Each --test-parameter as a Flent test reads a list of it: through Flent's own
    key=value parser and list splitting (the Debian package's modules)."""
    resultset_module()  # puts Flent's package on the path
    from flent.util import keyval, token_split  # type: ignore[import-not-found]
    params = [keyval(a) for a, prev in zip(argv, ["", *argv]) if prev == "--test-parameter"]
    return {k: token_split(v) for p in params for k, v in p.items()}


def test_a_receiver_of_its_own_cc(scenario_file, inv, tmp_path):
    """netperf's -K is local,remote: the sender's CC first for an upload, the receiver's
    for a download; quoted so Flent keeps the pair whole; the receiving host is sampled."""
    up, = one_cell(scenario_file, "test: tcp_1up\nrate: 10mbit\nqdisc: pfifo\ncc: prague\nreceiver_cc: cubic\n")
    assert [f.receiver_cc for f in up.config.flows] == ["cubic"] and up.coords["receiver_cc"].label == "rcv_cubic"
    assert flent_lists(flent_argv(up, inv, tmp_path))["cc_algos"] == ["prague,cubic"]
    down, = one_cell(scenario_file, "test: tcp_2down\nrate: 10mbit\nqdisc: pfifo\ncc: [dctcp, bbr]\nreceiver_cc: reno\n")
    assert flent_lists(flent_argv(down, inv, tmp_path))["cc_algos"] == ["reno,dctcp", "reno,bbr"]
    with pytest.raises(ScenarioError, match="tcp_bidirectional sets one congestion control for flows both ways"):
        one_cell(scenario_file, "test: tcp_bidirectional\nrate: 10mbit\nqdisc: pfifo\ncc: cubic\nreceiver_cc: reno\n")
    assert samplers(up.config) == ["cli", "srv"]
    same, = one_cell(scenario_file, "test: tcp_1up\nrate: 10mbit\nqdisc: pfifo\ncc: prague\n")
    assert "receiver_cc" not in same.config.model_dump(exclude_none=True)["flows"][0]  # the hash of older cells kept
    assert "cc_algos=prague" in flent_argv(same, inv, tmp_path)
    with pytest.raises(ScenarioError, match="receiver_cc: 'cu bic' is not a congestion control name"):
        one_cell(scenario_file, "test: tcp_1up\nrate: 10mbit\nqdisc: pfifo\ncc: prague\nreceiver_cc: cu bic\n")


def test_ipsec_tunnel(scenario_file, inv, tmp_path):
    """Flent targets the server's inner address; the replay window reaches both SAs; the
    SAs and policies are each end's tunnel.ip, with placeholders for the keys, which are
    fresh per cell, reach the setup script once and are never echoed; ECN rewrites move to
    the tunnel entrance."""
    cells = one_cell(scenario_file, """
        test: tcp_2up
        rate: 10mbit
        qdisc: pfifo
        cc: [cubic, cubic]
        ecn: [bleach, none]
        tunnel: ipsec
        matrix: {replay_window: [0, 256]}
    """)
    cv0, cv = (cell_vars(c, inv, tmp_path, tcp_rewrite="tc", run_vars=RV, scratch=SCRATCH) for c in cells)
    assert target(cells[1], inv) == "10.71.9.2" and " -H 10.71.9.2 " in cv.files["cli"][FLENT_FILE]
    assert cv.tunnel == cv0.tunnel == "ipsec"
    ecn = ecn_place(cells[1], inv, "tc")
    assert ecn is not None and ecn.at == "cli"
    fill0, fill = (dict(re.findall(r"^s/(@\w+@)/(0x[0-9a-f]+)/$", c.hosts["cli"].setup, re.M)) for c in (cv0, cv))
    keys = [fill0["@AUTH_cli@"], fill["@AUTH_cli@"], fill["@AUTH_srv@"]]
    assert len(set(keys)) == 3 and all(len(k) == 66 for k in keys)
    assert "files" not in cv.to_ansible() and "tunnel" not in cv.to_ansible()  # the setup scripts carry them
    shown = cell_vars(cells[1], inv, tmp_path, tcp_rewrite="tc", run_vars=RV, scratch=SCRATCH, keys=False)
    assert not re.search(r"0x[0-9a-f]{32}", shown.hosts["cli"].setup)  # the dry run's: no key
    assert shown.hosts["cli"].setup.count(f"/{KEY_SHOWN}/") == 4
    rv = run_vars(cells, True, True)
    assert "ecn set" not in files(cv, "mid")
    tunnel_ip = cv.files["cli"]["tunnel.ip"].splitlines()
    assert tunnel_ip == [
        "link add dev fl-tun type xfrm dev cli.r if_id 113",
        "xfrm state add src 10.71.1.1 dst 10.71.2.1 proto esp spi 0x0f170001 reqid 113 mode tunnel if_id 113 "
        "auth-trunc hmac(sha256) @AUTH_cli@ 128 enc cbc(aes) @ENC_cli@ replay-window 256",
        "xfrm state add src 10.71.2.1 dst 10.71.1.1 proto esp spi 0x0f170002 reqid 113 mode tunnel if_id 113 "
        "auth-trunc hmac(sha256) @AUTH_srv@ 128 enc cbc(aes) @ENC_srv@ replay-window 256",
        "xfrm policy add src 0.0.0.0/0 dst 0.0.0.0/0 dir out if_id 113 tmpl src 10.71.1.1 dst 10.71.2.1 proto esp "
        "reqid 113 mode tunnel",
        "xfrm policy add src 0.0.0.0/0 dst 0.0.0.0/0 dir in if_id 113 tmpl src 10.71.2.1 dst 10.71.1.1 proto esp "
        "reqid 113 mode tunnel",
        "link set dev fl-tun mtu @MTU@", "addr add 10.71.9.1/24 dev fl-tun", "link set dev fl-tun up"]
    cli, = setup_scripts([cv], rv, inv, "cli")
    assert "/xfrm_stat.up\nmtu=$(( $(cat /sys/class/net/cli.r/mtu) - 77 ))\n" in cli  # the included clean-up ends on its own line
    assert 'cat /proc/net/xfrm_stat > "$dir/xfrm_stat.up"' in cli  # the kernel's count before this cell's SAs
    collect = cv.hosts["cli"].collect
    state = cv.files["cli"][STATE_FILE]  # sourced by collect.sh, in the scratch folder ("$dir")
    up, after = state.find('(cd "$dir" && show cat xfrm_stat.up)'), state.find("show cat /proc/net/xfrm_stat")
    assert 0 < up < after, state
    assert 0 < collect.find(f'. "$dir/cmd/{STATE_FILE}"') < collect.find("rm -f /run/"), collect  # both counts read before the tunnel goes
    assert "ip xfrm state delete src 10.71.2.1 dst 10.71.1.1 proto esp spi 0x0f170002 " in cli  # a leftover's
    assert sorted(fill) == ["@AUTH_cli@", "@AUTH_srv@", "@ENC_cli@", "@ENC_srv@"]
    assert len(fill["@ENC_cli@"]) == 34  # 128-bit AES keys
    for placeholder, key in fill.items():  # each key once, in the command that fills its placeholder
        assert cli.count(key) == 1 and f"\ns/{placeholder}/{key}/\n" in cli and f"echo {key}" not in cli
    assert "\"$cmd/tunnel.ip\" <<'FL_KEYS' | ip -batch - >/dev/null" in cli  # the keys on sed's input
    assert 'add rule inet fl_tunnel ecn_rewrite oifname "fl-tun" ip dscp 19 ip ecn set not-ect counter comment ' \
           '"flow 1: bleach"\n' in cv.files["cli"]["ecn-tunnel.nft"]
    srv, = setup_scripts([cv], rv, inv, "srv")
    assert "ecn set" not in srv + files(cv, "srv") and "addr add 10.71.9.2/24 dev fl-tun\n" in files(cv, "srv")
    assert "xfrm state add src 10.71.2.1 dst 10.71.1.1 proto esp spi 0x0f170002" in files(cv, "srv")
    assert "type xfrm dev srv.l if_id 113" in files(cv, "srv")


def test_tunnel_needs_inner_addresses(scenario_file, tmp_path):
    from flharness.errors import FlError
    ini = tmp_path / "inv.ini"
    ini.write_text((REPO / "inventory.ini").read_text().replace(" fl_tunnel_addr=10.71.9.2/24", ""))
    cell, = one_cell(scenario_file, "test: tcp_1up\nrate: 5mbit\nqdisc: pfifo\ncc: reno\ntunnel: fou\n")
    with pytest.raises(FlError, match="srv: fl_tunnel_addr is missing"):
        cell_vars(cell, load_inventory(ini), tmp_path, tcp_rewrite="tc", run_vars=RV, scratch=SCRATCH)


def test_tunnel_capabilities(scenario_file):
    """A tunnel the kernel cannot build skips the cell with the reason; so do WireGuard
    cells whose flows need telling apart on the path (it hides their DSCP)."""
    from flharness.capabilities import Capabilities
    fou, wg, wg_rtts = one_cell(scenario_file, """
        test: tcp_2up
        rate: 10mbit
        qdisc: pfifo
        cc: [cubic, cubic]
        matrix:
          - {tunnel: [fou, wireguard]}
          - {tunnel: [wireguard], rtt: [[80ms, 20ms]]}
    """)
    base = {"tools": {"wg": "1.0"}, "features": {**FEATURES, "netem": True, "ifb": True, "u32_mirred": True,
                                                 "wireguard": True, "fou": False}}
    caps = Capabilities(reply(fou, wg, wg_rtts, **base))
    assert caps.unsupported(fou) == "kernel lacks fou/ipip (IP in UDP) (tunnel fou)"
    assert caps.unsupported(wg) is None
    assert "cannot give tunnelled flows different RTTs" in caps.unsupported(wg_rtts)
    assert "no wg (wireguard-tools)" in Capabilities(reply(wg, **{**base, "tools": {}})).unsupported(wg)


def test_tunnelled_fq_hashes_outer_headers(scenario_file, inv, tmp_path):
    """In tunnel cells fq_codel/fq_pie get a cls_flow filter over the outer 5-tuple, with
    as many buckets as the qdisc has queues; other qdiscs and plain cells get none; a
    kernel without cls_flow skips such cells with the reason."""
    from flharness.capabilities import Capabilities
    cells = one_cell(scenario_file, """
        test: tcp_1up
        rate: 10mbit
        cc: cubic
        matrix:
          - {tunnel: [fou], qdisc: [fq_codel flows 256, {value: fq_pie, shaper: self}, cake bandwidth 10mbit]}
          - {tunnel: [none], qdisc: [fq_codel]}
    """)
    scripts = [files(cell_vars(c, inv, tmp_path / c.name, tcp_rewrite="tc", run_vars=RV, scratch=SCRATCH)) for c in cells]
    flt = "handle 1 protocol all prio 1 flow hash keys src,dst,proto,proto-src,proto-dst divisor"
    assert f"filter add dev mid.r parent 10: {flt} 256\n" in scripts[0]
    assert f"filter add dev mid.l parent 10: {flt} 256\n" in scripts[0]
    assert f"filter add dev mid.r parent 1: {flt} 1024\n" in scripts[1]
    assert "flow hash" not in scripts[2] and "flow hash" not in scripts[3]
    base = {"features": {**FEATURES, "fou": True, "cls_flow": False}}
    assert "kernel lacks cls_flow" in Capabilities(reply(*cells, **base)).unsupported(cells[0])
    assert Capabilities(reply(*cells, **base)).unsupported(cells[3]) is None
    assert Capabilities(reply(*cells, features={**FEATURES, "fou": True, "cls_flow": True})).unsupported(cells[0]) is None


def test_a_run_probes_what_its_cells_need_and_fl_check_everything(scenario_file):
    """The probe request: a run's cells' tunnels and CCs only (each module the kernel loads
    for a trial costs seconds in an emulated guest); fl check's the whole catalogue. The
    probe's tunnel kinds are the scenario's (probe.py ships alone: it cannot import them)."""
    from flharness.capabilities import probe_request
    from flharness.programs import probe
    from flharness.scenario.features import TUNNELS
    fou, plain = one_cell(scenario_file, """
        test: tcp_1up
        rate: 10mbit
        qdisc: pfifo
        cc: reno
        matrix:
          tunnel: [fou, none]
    """)
    request = probe_request([fou, plain])
    assert (request["tunnels"], request["ccs"], request["catalogue"]) == (["fou"], ["reno"], False)
    assert probe_request([plain])["tunnels"] == [] and probe_request([], catalogue=True)["catalogue"]
    assert set(probe.TUNNELS) == set(TUNNELS) - {"none"}


def test_a_probe_asked_without_timeouts_times_none_of_its_commands(monkeypatch):
    """A guest on QEMU's virtual clock (Testbed.probe) asks the probe for no timeouts: its
    clock leaps while QEMU waits on the host, so they would fire early; elsewhere every
    command the probe runs has one."""
    import subprocess

    from flharness.capabilities import probe_request
    from flharness.programs import probe
    limits: list[float | None] = []

    def run(cmd, **kw):
        limits.append(kw.get("timeout"))
        return subprocess.CompletedProcess(cmd, 1, "", "no")  # every trial fails: the probe ends early

    monkeypatch.setattr(probe.subprocess, "run", run)
    monkeypatch.setattr(probe, "TIMEOUTS", {"on": True})
    for on in (False, True):
        limits.clear()
        request = probe_request([])
        request["timeouts"] = on
        assert probe.probe(request)["error"] is not None and limits
        assert all((t is not None) == on for t in limits), limits


def test_a_probe_reply_missing_or_adding_a_key_is_an_error_naming_the_host(scenario_file):
    """Every key of probe.py's Reply is required on the controller and none other is known:
    a host whose probe answers otherwise (another fl's probe, a damaged reply) is one error
    with the host's name, never a default read as an answer."""
    from flharness.errors import FlError
    from flharness.programs import probe
    from flharness.testbed.probe_reply import ProbeReply, parse_reply
    assert set(probe.Reply.__annotations__) == set(ProbeReply.model_fields) - {"hosts"}
    good = reply().model_dump(exclude={"hosts"})
    assert parse_reply(good, "mid") == reply()
    for bad, where in (({k: v for k, v in good.items() if k != "kinds"}, "kinds: Field required"),
                       ({**good, "zones": {}}, "zones: Extra inputs are not permitted"),
                       ({**good, "qdiscs": {"pfifo": {"verdict": "fine"}}}, "qdiscs.pfifo.verdict"),
                       ({**good, "features": {**FEATURES, "netem": "maybe"}}, "features.netem")):
        with pytest.raises(FlError) as e:
            parse_reply(bad, "mid")
        assert str(e.value).startswith("the kernel probe's reply from mid is not what fl asked for: ") and where in str(e.value)


def test_separate_hosts_merge_into_one_view():
    from flharness.testbed.probing import merge_hosts
    cli = reply(ccs={"cubic": True, "prague": True}, tools={"flent": "2.1", "wg": None})
    srv = reply(ccs={"cubic": True, "prague": False}, tools={"flent": "2.1", "wg": "1.0"})
    mid = reply(ccs={"cubic": True, "prague": True}, error="no nft", kernel="6.12", tools={"flent": "2.1"})
    merged = merge_hosts({"cli": cli, "mid": mid, "srv": srv})
    assert merged.ccs == {"cubic": True, "prague": False} and merged.tools == {"flent": "2.1", "wg": None}
    assert merged.error == "mid: no nft" and merged.kernel == "6.12"
    assert {h: f.kernel for h, f in merged.hosts.items()} == {"cli": "6.1", "mid": "6.12", "srv": "6.1"}


def test_the_ipsec_trial_tries_the_sa_again_and_says_what_failed(monkeypatch):
    """An ESP SA refused twice (the crypto of an emulated guest just booted still loading)
    and taken the third time is IPsec; refused every time, the reason names the command,
    the tries and the kernel's complaint (issue 37: a boot's probe skipped an IPsec cell
    that other boots of the same image ran)."""
    from flharness.programs import probe
    said = iter([(0, "")] + [(2, "RTNETLINK answers: No such file or directory")] * 2 + [(0, "")])
    monkeypatch.setattr(probe, "sh", lambda *argv, **kw: (0, "") if "modprobe" in argv else next(said))
    monkeypatch.setattr(probe.time, "sleep", lambda s: None)
    p = probe.Probe({"shaper": [], "root": "", "child": ""})
    assert p.tunnels(["ipsec"]) == {"ipsec": True} and not p.errors
    monkeypatch.setattr(probe, "sh", lambda *argv, **kw: (0, "") if "type" in argv or "modprobe" in argv
                        else (2, "RTNETLINK answers: No such file or directory"))
    assert p.tunnels(["ipsec"]) == {"ipsec": False}
    assert p.errors["ipsec"] == ("ip xfrm state add (esp, cbc(aes), hmac(sha256)), try 3 of 3: "
                                 "RTNETLINK answers: No such file or directory")


def test_an_ingress_refused_once_is_tried_again_after_loading_its_module(monkeypatch, scenario_file):
    """A CI's freshly booted guest refused the ingress qdisc its next boot took, and skipped
    two cells without saying why: a refused trial is tried again after modprobe, and one
    refused twice names the command and tc's complaint in the cells' reason."""
    from flharness.capabilities import Capabilities
    from flharness.programs import probe
    loaded: list[str] = []
    refusal = (2, "Error: Specified qdisc kind is unknown.")
    monkeypatch.setattr(probe, "sh", lambda *argv, **kw: loaded.append(argv[-1]) or (0, "") if "modprobe" in argv
                        else refusal if "ingress" in argv and "sch_ingress" not in loaded else (0, ""))
    p = probe.Probe({"shaper": [], "root": "", "child": ""})
    f = p.features([])
    assert f["ingress"] and f["u32_mirred"] and loaded == ["sch_ingress"] and not p.errors
    monkeypatch.setattr(probe, "sh", lambda *argv, **kw: refusal if "ingress" in argv else (0, ""))
    f = p.features([])
    assert not f["ingress"] and not f["u32_mirred"]
    assert p.errors == {"ingress": "tc qdisc add ingress: Error: Specified qdisc kind is unknown."}
    (cell,) = one_cell(scenario_file, "test: tcp_1up\nrate: 10mbit\nrtt: 20ms\nqdisc: pfifo\ncc: cubic\n")
    caps = Capabilities(reply(cell, features={**FEATURES, **f}, feature_errors=p.errors))
    assert caps.unsupported(cell) == ("kernel lacks cls_u32/act_mirred (needed for the 20ms RTT): "
                                      "tc qdisc add ingress: Error: Specified qdisc kind is unknown.")


def test_a_tunnel_the_kernel_lacks_is_skipped_with_what_failed(scenario_file):
    from flharness.capabilities import Capabilities
    (cell,) = one_cell(scenario_file, "test: tcp_1up\nrate: 10mbit\nqdisc: fq_codel\ncc: cubic\ntunnel: ipsec\n")
    caps = Capabilities(reply(cell, features={**FEATURES, "ipsec": False, "cls_flow": True},
                              feature_errors={"ipsec": "ip xfrm state add (…), try 3 of 3: No such file"}))
    assert caps.unsupported(cell) == ("kernel lacks xfrm_interface/esp4 with cbc(aes), hmac(sha256) (tunnel ipsec): "
                                      "ip xfrm state add (…), try 3 of 3: No such file")


def test_a_cell_done_on_another_kernel_is_never_kept(tmp_path):
    """The golden cell (an old, version-1 record: it still loads) completed on kernel
    6.18.44-fc-v669: planned again on that kernel it is done; on another kernel, or with
    another build of a congestion-control module it ran, the run stops with one line naming
    both, before anything is built, and all_done never skips the testbed for it."""
    import shutil

    from flharness.capabilities import Capabilities
    from flharness.errors import FlError
    from flharness.results import ScenarioFolder
    from flharness.results.cell_record import CcModule
    from flharness.run.planning import KnownKernel, all_done, plan
    path = REPO / "tests" / "fixtures" / "golden.yml"
    scenario = load_scenario(path)
    (cell,) = expand(scenario, path)
    store = ScenarioFolder(tmp_path / scenario.name)
    shutil.copytree(REPO / "tests" / "fixtures" / "golden", store.root / cell.name)
    assert store.is_done(cell.name, cell.config_hash)
    same = Capabilities(reply(cell, kernel="6.18.44-fc-v669"))
    assert [p.action for p in plan([cell], same, store, force=False)] == ["done"]
    with pytest.raises(FlError, match=r"golden.*but it ran on kernel 6\.18\.44-fc-v669, this testbed has 7\.3\.4"):
        plan([cell], Capabilities(reply(cell, kernel="7.3.4")), store, force=False)
    assert plan([cell], Capabilities(reply(cell, kernel="7.3.4")), store, force=True)[0].action != "done"
    record = store.record(cell.name)
    module = CcModule(module="tcp_prague", file=None, sha256="a" * 64, version="1", srcversion=None, parameters={})
    (store.root / cell.name / "cell.json").write_text(record.model_copy(update={"cc_modules": {"prague": module}})
                                                      .model_dump_json())
    rebuilt = KnownKernel("6.18.44-fc-v669", {"tcp_prague": "b" * 64})
    assert rebuilt.change(store.record(cell.name)) == ("it ran with tcp_prague sha256 aaaaaaaaaaaa…, "
                                                       "this testbed has bbbbbbbbbbbb…")
    selected = [(scenario, [cell])]
    assert all_done(selected, [path], tmp_path, KnownKernel("6.18.44-fc-v669", {"tcp_prague": "a" * 64})) is not None
    assert all_done(selected, [path], tmp_path, rebuilt) is None
    assert all_done(selected, [path], tmp_path, KnownKernel(None, {})) is None  # ssh hosts: probed first


def test_video_and_probe_capabilities(scenario_file):
    """A video flow needs iperf 2.1 or later (isochronous mode), a probe irtt: a cell
    without them is skipped with the reason."""
    from flharness.capabilities import Capabilities
    video, probe = one_cell(scenario_file, """
        test: tcp_1up
        rate: 10mbit
        qdisc: pfifo
        cc: cubic
        matrix:
          - {video: [{rate: 2mbit, fps: 30, codepoint: ect1}]}
          - {probe: [{codepoint: ect1}]}
    """)
    def caps(**tools: str) -> Capabilities:
        return Capabilities(reply(video, probe, tools=tools))
    assert caps(iperf="2.1.8", irtt="0.9.0").unsupported(video) is None
    assert caps(iperf="2.2.1").unsupported(video) is None
    assert "iperf 2.0.13 on the testbed: the video flow needs iperf 2.1 or later" in caps(iperf="2.0.13").unsupported(video)
    assert "iperf missing" in caps().unsupported(video) and "iperf present" in caps(iperf="present").unsupported(video)
    assert caps(irtt="0.9.0").unsupported(probe) is None
    assert "no irtt on the testbed" in caps().unsupported(probe)


def test_each_host_gets_its_folder_devices_and_tunnel_end_from_python(scenario_file, inv):
    """What differs by host is decided in plan.py (issue 40): where it writes the cell
    (results folder, or its scratch folder where it has no shared one or stages cells),
    the device it captures on (the tunnel's in tunnelled cells), the devices its teardown
    log shows (IFBs as commands.Ports names them), and each tunnel end's peer."""
    from flharness.testbed.cell_scripts import TunnelEnd
    from flharness.testbed.plan import tunnel_end
    plain, tunnelled = (one_cell(scenario_file, f"""
        test: tcp_1up
        rate: 10mbit
        qdisc: pfifo
        cc: cubic
        {extra}
    """)[0] for extra in ("rtt: 20ms", "tunnel: wireguard"))
    ssh, vm = run_vars([], ifb=True, nft=True, shared_fs=False), run_vars([], ifb=True, nft=True, vm=True)
    cv = cell_vars(plain, inv, Path("/results/c"), tcp_rewrite="tc", run_vars=RV, scratch=SCRATCH)
    assert {h: v.cell_dir for h, v in cv.hosts.items()} == dict.fromkeys(("cli", "mid", "srv"), "/results/c")
    places = cell_hosts(plain, inv, "/results/c", RV, SCRATCH)
    assert {(v.staged, v.moves) for v in places.values()} == {(False, False)}
    assert [h.capture_dev for h in places.values()] == ["cli.r", None, "srv.l"]
    assert state_devs(plain, inv, RV, "mid") == bottleneck_devs(inv, RV.ifb) == ["mid.l", "mid.r", "ifb4mid.l", "ifb4mid.r"]
    assert state_devs(plain, inv, RV, "cli") == ["cli.r"]
    for rv, moves in ((ssh, False), (vm, True)):  # fl fetches an ssh host's files; a VM guest moves its own
        staged = cell_vars(plain, inv, Path("/results/c"), tcp_rewrite="tc", run_vars=rv, scratch=SCRATCH)
        assert {h: v.cell_dir for h, v in staged.hosts.items()} == {h: f"{d}/cell" for h, d in SCRATCH.items()}
        assert {(v.staged, v.moves) for v in cell_hosts(plain, inv, "/results/c", rv, SCRATCH).values()} == {(True, moves)}
        assert bottleneck_devs(inv, rv.ifb) == ["mid.l", "mid.r"]  # no cell needs IFBs
    tv = cell_vars(tunnelled, inv, Path("/results/t"), tcp_rewrite="tc", run_vars=RV, scratch=SCRATCH)
    assert tv.tunnel == "wireguard"
    assert [h.capture_dev for h in cell_hosts(tunnelled, inv, "/results/t", RV, SCRATCH).values()] == ["fl-tun", None, "fl-tun"]
    assert state_devs(tunnelled, inv, RV, "srv") == ["srv.l", "fl-tun"]
    assert [tunnel_end(inv, h, f"/s/{h}") for h in ("cli", "srv")] == [
        TunnelEnd(host="cli", peer="srv", local="10.71.1.1", remote="10.71.2.1", scratch="/s/cli", peer_inner="10.71.9.2"),
        TunnelEnd(host="srv", peer="cli", local="10.71.2.1", remote="10.71.1.1", scratch="/s/srv", peer_inner="10.71.9.1")]


def test_a_host_moves_only_what_it_staged():
    from flharness.testbed.plan import HostPlace
    with pytest.raises(ValueError, match="moves only the files it staged"):
        HostPlace(cell_dir="/results/c", staged=False, moves=True, capture_dev=None)


#: fl-servers' arguments as group_vars' fl_servers_args rendered them before Python made
#: them (issue 40): a plain run, and one with UDP, video and tunnels (every address).
SERVERS_PLAIN = "/run/fl/fl-000000/srv 10.71.2.1 12865 2112 - - 150"
SERVERS_EVERY = "/run/fl/fl-000000/srv 0.0.0.0 12865 2112 5001 5002 150"


def test_fl_servers_arguments_come_from_python(inv):
    """fl-servers' argv (plan.servers_argv): the server's scratch folder, its bind address
    (every address with tunnels), the inventory's netperf and irtt ports (srv's), iperf's
    ports where some cell has UDP or video, the dilated wait in tenths of a second; per
    testbed (a parallel run's second testbed: its own folder and address); none before
    the run has an fl_run."""
    from dataclasses import replace

    from flharness.testbed.inventory import moved
    from flharness.testbed.plan import playbook_extra_vars, servers_argv
    every = Path(REPO / "tests" / "scenarios" / "every-feature.yml")
    rv_every = run_vars(expand(load_scenario(every), every), ifb=True, nft=True)
    assert " ".join(playbook_extra_vars(DRY_RUN_ID, DRY_RUN_ROOT, inv, RV).fl_servers_argv or []) == SERVERS_PLAIN
    assert " ".join(playbook_extra_vars(DRY_RUN_ID, DRY_RUN_ROOT, inv, rv_every).fl_servers_argv or []) == SERVERS_EVERY
    second = moved(inv, 1)  # srv's ports, not cli's
    other = replace(second, hosts={**second.hosts, "srv": second.hosts["srv"].model_copy(update={"fl_netperf_port": 12866, "fl_irtt_port": 2113})})
    slow = run_vars([], ifb=False, nft=False, dilation=2.5).model_copy(update={"video": True})
    assert servers_argv(other, slow, "/s p/srv") == ["/s p/srv", "10.71.18.1", "12866", "2113", "-", "5002", "370"]
    before_run = playbook_extra_vars(DRY_RUN_ID, DRY_RUN_ROOT, inv, None).to_ansible()  # fl clean's
    assert "fl_servers_argv" not in before_run and before_run["fl_run"] == {}
    assert all("up" not in scripts for scripts in before_run["fl_testbed"].values()), before_run["fl_testbed"]


def test_the_servers_task_renders_the_command_it_did(inv):
    """roles/testbed/tasks/servers.yml's command, templated by Ansible with the extra vars
    (and group_vars' fl_host_dir) srv gets, is the one it was before issue 40; quoted word
    by word where a value needs it."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    from flharness.testbed.plan import playbook_extra_vars
    task, = yaml.safe_load((REPO / "roles" / "testbed" / "tasks" / "servers.yml").read_text())
    group_vars = yaml.safe_load((REPO / "playbooks" / "group_vars" / "all.yml").read_text())

    def command(extra: dict) -> str:
        templar = Templar(loader=DataLoader(), variables={**extra, "inventory_hostname": "srv"})
        host_dir = templar.template(trust_as_template(group_vars["fl_host_dir"]))
        templar = Templar(loader=DataLoader(), variables={**extra, "fl_host_dir": host_dir})
        return str(templar.template(trust_as_template(task["ansible.builtin.raw"])))

    assert command(playbook_extra_vars(DRY_RUN_ID, DRY_RUN_ROOT, inv, RV).to_ansible()) == \
        "/run/fl/fl-000000/srv/fl-servers " + SERVERS_PLAIN
    assert command(playbook_extra_vars(DRY_RUN_ID, "/run/f l", inv, RV).to_ansible()) == \
        "'/run/f l/fl-000000/srv'/fl-servers '/run/f l/fl-000000/srv' 10.71.2.1 12865 2112 - - 150"


def test_each_host_stages_moves_and_starts_the_servers_as_it_did(scenario_file, inv):
    """The scripts' staging branches (the capture and queue sampler starts: empty the host's own
    folder; collect: move the staged files into the results folder) and the setup's
    fl-servers line, rendered by fl per kind of testbed, are those the templates
    rendered when Ansible decided them (before issue 40): written in place on namespaces,
    staged and fetched on ssh hosts, staged and moved in a VM guest."""
    cell, = one_cell(scenario_file, "test: tcp_1up\nrate: 5mbit\ncc: reno\nqdisc: pfifo limit 10\n")
    c = f"/results/{cell.name}"
    every = {"udp": True, "video": True, "tunnels": ["wireguard"]}
    kinds = {"netns": (run_vars([cell], False, False), SERVERS_PLAIN),
             "ssh": (run_vars([cell], False, False, shared_fs=False), SERVERS_PLAIN),
             "vm": (run_vars([cell], False, False, vm=True).model_copy(update=every), SERVERS_EVERY)}
    for kind, (rv, servers) in kinds.items():
        cv = cell_vars(cell, inv, Path(c), tcp_rewrite="tc", run_vars=rv, scratch=SCRATCH)
        rendered = {h: {"setup.sh": v.setup, "collect.sh": v.collect} for h, v in cv.hosts.items()}
        for host, scripts in rendered.items():
            s = f"{SCRATCH[host]}/cell"
            staged = [f"rm -rf {s}  # the host's own folder for the cell: the last cell's files are gone", f"mkdir -p {s}"]
            want = {"netns": [f"mkdir -p {c}"], "ssh": staged, "vm": [*staged, f"mv {s}/* {c}/ && rmdir {s}"]}[kind]
            got = [line for name in ("setup.sh", "collect.sh") for line in scripts[name].splitlines()
                   if re.match(r"(rm -rf|mkdir -p|mv) /", line)]
            assert got == want, (kind, host)
        assert f'\n"$dir/fl-servers" {servers}\n' in rendered["srv"]["setup.sh"], kind


def test_wireguard_keys_are_made_per_cell_and_each_end_knows_its_peers(scenario_file, inv, tmp_path):
    """Each end's setup holds its own private key and its peer's public key (no step
    between the hosts); a second cell has other keys; the dry run's holds none."""
    import subprocess
    cell, = one_cell(scenario_file, "test: tcp_1up\nrate: 10mbit\nqdisc: pfifo\ncc: cubic\ntunnel: wireguard\n")
    a, b = (cell_vars(cell, inv, tmp_path, tcp_rewrite="tc", run_vars=RV, scratch=SCRATCH) for _ in range(2))
    key = r"([A-Za-z0-9+/]{43}=)"
    private = {h: re.search(rf"printf '%s\\n' {key} > ", a.hosts[h].setup).group(1) for h in ("cli", "srv")}
    peer = {h: re.search(rf" peer {key} allowed-ips ", a.hosts[h].setup).group(1) for h in ("cli", "srv")}
    assert private["cli"] not in a.hosts["srv"].setup and private["srv"] not in a.hosts["cli"].setup
    assert private["cli"] not in b.hosts["cli"].setup and len(set(private.values()) | set(peer.values())) == 4
    assert "allowed-ips 10.71.9.2/32 endpoint 10.71.2.1:51821" in a.hosts["cli"].setup
    for me, other in (("cli", "srv"), ("srv", "cli")):  # wg derives from my private key the public key my peer holds
        derived = subprocess.run(["wg", "pubkey"], input=private[me] + "\n", capture_output=True, text=True, check=True)
        assert derived.stdout.strip() == peer[other]
    shown = cell_vars(cell, inv, tmp_path, tcp_rewrite="tc", run_vars=RV, scratch=SCRATCH, keys=False)
    assert not re.search(key, shown.hosts["cli"].setup) and f"printf '%s\\n' {KEY_SHOWN} > " in shown.hosts["cli"].setup


def test_a_module_the_kernel_refused_is_named_as_such(scenario_file, monkeypatch, tmp_path):
    """A kernel that has tcp_prague but refused to load it (a parameter out of its range,
    --vm-append tcp_prague.pacing_ca_pct=0) is not said to lack it: the probe asks modprobe
    and the kernel log why, and the skip reason and fl check's hint give their words. A
    module modules.dep names whose file is gone (hidden, removed without depmod) is lacking."""
    from flharness import check
    from flharness.capabilities import Capabilities
    from flharness.programs import probe
    (tmp_path / "tcp_prague.ko").write_bytes(b"")
    said = {("modinfo", "-F", "filename", "tcp_prague"): (0, f"{tmp_path}/tcp_prague.ko\n"),
            ("modinfo", "-F", "filename", "tcp_bbr3"): (0, f"{tmp_path}/updates/tcp_bbr3.ko\n"),
            ("modprobe", "tcp_prague"): (1, "modprobe: ERROR: could not insert 'tcp_prague': Invalid argument\n"),
            ("dmesg",): (0, "[    1.0] tcp_prague: pacing_ca_pct=0 refused: a whole number from 100 to 1000\n"
                             "[    2.0] eth0: up\n[    3.0] tcp_prague: pacing_ca_pct=0 refused: a whole number from 100 to 1000\n"),
            ("modinfo", "-F", "filename", "tcp_vegas"): (1, "modinfo: ERROR: Module tcp_vegas not found.\n")}
    monkeypatch.setattr(probe, "sh", lambda *argv, **kw: said[argv])
    why = probe.cc_refused("prague")
    assert why == ("modprobe: ERROR: could not insert 'tcp_prague': Invalid argument; "
                   "kernel: tcp_prague: pacing_ca_pct=0 refused: a whole number from 100 to 1000")
    assert probe.cc_refused("vegas") is None  # no module at all: the kernel lacks it
    assert probe.cc_refused("bbr3") is None  # named by modules.dep, its file gone: lacking too
    (cell,) = one_cell(scenario_file, "test: tcp_1up\nrate: 10mbit\nqdisc: pfifo\ncc: prague\n")
    caps = Capabilities(reply(cell, ccs={"prague": False}, cc_errors={"prague": why}))
    assert caps.unsupported(cell) == f"the kernel refused to load tcp_prague (congestion control prague): {why}"
    (hint,) = [h for h in check.hints(caps) if "prague" in h]
    assert hint.startswith("prague refused: this kernel has tcp_prague but would not load it: modprobe: ERROR") and \
        "from 100 to 1000" in hint
    assert "prague missing" in " ".join(check.hints(Capabilities(reply(cell, ccs={"prague": False}))))
