"""Each host's command files (flharness/testbed/commands.py) for every cell of every shipped
scenario, against what the roles' templates configured before the renovation
(tests/fixtures/commands/dryrun/, recorded from the templates through Ansible by
tests/fixtures/commands/record.py, which the commit before the command files has): the
same tc batch lines, nft rules, sysctls, client qdisc, tunnel-entrance rules and rate
schedule steps, in order. Two differences are intended: a cell's sysctls go in the order
the scenario writes them (the recording's render had sorted them: yaml.dump sorts keys);
and s2's and s3's bursty cells have the seed's second netem chained after the path
delay's (`then delay 200us slot 800us 5ms packets 16 limit 10000`) where the slot words
were merged into the delay netem (their recorded lines and config hashes were edited so);
and s6's and s8's RED cells have their RED under the htb class at the cell's rate, where
the recording put it at the root, unshaped, taking its `bandwidth` (RED's idle-time
estimate) for a shaper's (edited so too: a real run of those cells moved 270 Mbit/s a
flow through the 50 Mbit/s "bottleneck"); and s2's and s3's rate steps change the htb
class only, where the recording also changed the qdisc to the same words, which dualpi2
refuses without options (its `qdisc change` lines removed).
"""
from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from flharness.cells import expand
from flharness.scenario import load_scenario
from flharness.testbed.commands import Ports, RunSettings, host_files
from flharness.testbed.tunnel import IPSEC_SPI, TunnelEnd

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "fixtures" / "commands" / "dryrun"
PORTS = Ports(mid_cli="mid.l", mid_srv="mid.r", cli="cli.r", tunnel="fl-tun",  # inventory.ini
              ends=(TunnelEnd("cli", "cli.r", "10.71.1.1", "10.71.9.1/24"),
                    TunnelEnd("srv", "srv.l", "10.71.2.1", "10.71.9.2/24")))
RUN = RunSettings(ifb=True, nft=True)
TC = ("qdisc ", "class ", "filter ")
NFT = ("flush chain ", "add rule inet fl ecn_rewrite ", "reset counters ")


def golden(name: str) -> dict[str, tuple[str, dict[str, list[str]]]]:
    """Cell name → (config hash, section → its lines), from a recorded file."""
    out: dict[str, tuple[str, dict[str, list[str]]]] = {}
    section: list[str] = []
    for line in (GOLDEN / f"{name}.txt").read_text().splitlines():
        if line.startswith("== "):
            cell, _, config = line[3:].partition(" (config ")
            sections: dict[str, list[str]] = {}
            out[cell] = (config.rstrip(")"), sections)
        elif line.startswith("  ") and not line.startswith("    "):
            section = sections.setdefault(line.strip().rstrip(":"), [])
        else:
            section.append(line.strip())
    return out


def _printf_lines(line: str) -> list[str]:
    """The lines a recorded `printf '%s\\n' 'a' 'b' > FILE` writes."""
    words = shlex.split(line)
    return words[2:words.index(">")] if ">" in words else words[2:]


def expected(sections: dict[str, list[str]]) -> dict[str, dict[str, str]]:
    """What the templates configured, as the command files that now hold it."""
    def text(lines: list[str]) -> str:
        return "".join(f"{x}\n" for x in lines)

    files: dict[str, dict[str, str]] = {"cli": {}, "mid": {}, "srv": {}}
    for host in ("cli", "mid", "srv"):
        lines = sections[host]
        sysctls = [shlex.split(x)[-1] for x in lines if x.startswith("sysctl -w ")]
        if sysctls:
            files[host]["sysctl.conf"] = text(sorted(sysctls))
    mid = sections["mid"]
    files["mid"]["bottleneck.tc"] = text([x for x in mid if x.startswith(TC)])
    files["mid"]["ecn.nft"] = text([x for x in mid if x.startswith(NFT)])
    cli = sections["cli"]
    client = [x.removeprefix("run tc ") for x in cli if x.startswith("run tc qdisc add dev cli.r root ")]
    if client:
        files["cli"]["client.tc"] = text(client)
    rules = [shlex.split(x)[-1] for x in cli if x.startswith("run nft add rule inet fl_tunnel ecn_rewrite ")]
    if rules:
        files["cli"]["ecn-tunnel.nft"] = text(["add table inet fl_tunnel", "add chain inet fl_tunnel ecn_rewrite { type "
                                               "filter hook output priority mangle; policy accept; }",
                                               *(f"add rule inet fl_tunnel ecn_rewrite {r}" for r in rules)])
    tc = [y for x in cli if x.startswith("printf '%s\\n' 'qdisc add dev fl-tun") for y in _printf_lines(x)]
    if tc:
        files["cli"]["ecn-tunnel.tc"] = text(tc)
    files["mid"] |= _schedule(sections.get("mid schedule", []))
    for host in ("cli", "srv"):
        tunnel = [y for x in sections[host] if (y := _tunnel_ip(x))]
        if tunnel:
            files[host]["tunnel.ip"] = text(tunnel)
    return {h: f for h, f in files.items() if f}


SENDER = {spi: host for host, spi in IPSEC_SPI.items()}


def _tunnel_ip(line: str) -> str | None:
    """A recorded tunnel command as tunnel.ip has it (ip's words; the MTU and the keys, which
    the recording had, as placeholders)."""
    if line == 'run ip link set dev fl-tun mtu "$mtu"':
        return "link set dev fl-tun mtu @MTU@"
    if line.startswith("ip xfrm state add "):
        words = shlex.split(line)[1:]
        sender = SENDER[words[words.index("spi") + 1]]
        words[words.index("auth-trunc") + 2] = f"@AUTH_{sender}@"
        words[words.index("enc") + 2] = f"@ENC_{sender}@"
        return " ".join(words)
    ip = ("run ip fou add ", "run ip link add dev fl-tun ", "run ip xfrm policy add ", "run ip addr add ")
    if line.startswith(ip) or line == "run ip link set dev fl-tun up":
        return line.removeprefix("run ip ")
    return None


def _schedule(lines: list[str]) -> dict[str, str]:
    """A recorded schedule: each step's batch lines (up to `> "$steps.N"`) and its time."""
    out, batch, times = {}, [], []
    for line in lines:
        if line.startswith('> "$steps.'):
            out[f"schedule-{len(out) + 1}.tc"] = "".join(f"{x}\n" for x in batch)
            batch = []
        elif line.startswith("wait_until "):
            times.append(int(line.split()[1]))
        elif line.startswith(TC):
            batch.append(line)
    return out | ({"schedule.steps": times} if times else {})  # type: ignore[dict-item]


@pytest.mark.parametrize("name", sorted(p.stem for p in GOLDEN.glob("*.txt")))
def test_command_files_say_what_the_templates_configured(name):
    recorded = golden(name)
    path = REPO / "scenarios" / f"{name}.yml"
    cells = expand(load_scenario(path), path)
    assert [c.name for c in cells] == list(recorded)
    for cell in cells:
        config, sections = recorded[cell.name]
        assert cell.config_hash == config, cell.name
        made = host_files(cell.config, PORTS, RUN, tcp_rewrite="tc")
        want = expected(sections)
        steps = want.get("mid", {}).pop("schedule.steps", None)
        if steps is not None:
            assert [int(x.split()[0]) for x in made["mid"].pop("schedule.steps").splitlines()] == steps, cell.name
        else:
            assert "schedule.steps" not in made.get("mid", {}), cell.name
        made["mid"].pop("reset.tc")
        for host, files in made.items():  # sysctls go in the order written (the recording's
            if "sysctl.conf" in files:     # render sorted them: yaml.dump sorts extra vars' keys)
                assert files["sysctl.conf"].splitlines() == [f"{k}={v}" for k, v in cell.config.sysctls[host].items()]
                files["sysctl.conf"] = "".join(sorted(files["sysctl.conf"].splitlines(keepends=True)))
        assert made == want, cell.name


def test_a_chained_netem_goes_under_every_delay_netem(scenario_file):
    """`then …` in netem: a second netem as the child of the path delay's, per direction,
    under each RTT's netem where flows have their own; the first stage keeps fl's limit."""
    path = scenario_file("test: tcp_2up\nrate: 10mbit\nqdisc: pfifo\ncc: [cubic, reno]\nrtt: [80ms, 20ms]\n"
                         "netem: {up: loss 1% then delay 1ms slot 2ms 4ms packets 8 limit 500, down: then delay 3ms}\n")
    cell, = expand(load_scenario(path), path)
    batch = host_files(cell.config, PORTS, RUN, tcp_rewrite="tc")["mid"]["bottleneck.tc"].splitlines()
    up = [x for x in batch if "ifb4mid.l" in x and "netem" in x]
    assert up == ["qdisc add dev ifb4mid.l parent 1:10 handle 20: netem delay 40ms loss 1% limit 100000",
                  "qdisc add dev ifb4mid.l parent 20:1 handle 30: netem delay 1ms slot 2ms 4ms packets 8 limit 500",
                  "qdisc add dev ifb4mid.l parent 1:11 handle 21: netem delay 10ms loss 1% limit 100000",
                  "qdisc add dev ifb4mid.l parent 21:1 handle 31: netem delay 1ms slot 2ms 4ms packets 8 limit 500"]
    down = [x for x in batch if "ifb4mid.r" in x and "netem" in x]
    assert down[1] == "qdisc add dev ifb4mid.r parent 20:1 handle 30: netem delay 3ms"


@pytest.mark.parametrize(("netem", "why"), [
    ("delay 1ms", "give the delay as rtt"),
    ("loss 1% then", "one 'then' at most, followed by"),
    ("then delay 1ms then delay 2ms", "one 'then' at most"),
    ("limit 10", "'limit' is not a netem word"),
])
def test_bad_netem_stages_are_refused(scenario_file, netem, why):
    from flharness.errors import ScenarioError
    path = scenario_file(f"test: tcp_1up\nrate: 10mbit\nqdisc: pfifo\ncc: cubic\nrtt: 20ms\nnetem: {netem}\n")
    with pytest.raises(ScenarioError, match=why):
        load_scenario(path)


def test_module_params_are_written_on_both_endpoints(scenario_file):
    """module_params: one "PATH VALUE" line per parameter on cli and srv (the CCs run
    there), none on the middlebox; the run's fl_run lists every path for the baseline."""
    from flharness.testbed.plan import run_vars
    path = scenario_file("test: tcp_2up\nrate: 10mbit\nqdisc: pfifo\ncc: prague-vs-cubic\nmatrix:\n"
                         "  module_params: [none, {tcp_prague: {pacing_ca_pct: 120, ai_cwnd_limited: 0}}]\n")
    plain, params = expand(load_scenario(path), path)
    assert "module_params.conf" not in host_files(plain.config, PORTS, RUN, tcp_rewrite="tc").get("cli", {})
    made = host_files(params.config, PORTS, RUN, tcp_rewrite="tc")
    lines = ["/sys/module/tcp_prague/parameters/pacing_ca_pct 120", "/sys/module/tcp_prague/parameters/ai_cwnd_limited 0"]
    assert made["cli"]["module_params.conf"].splitlines() == lines == made["srv"]["module_params.conf"].splitlines()
    assert "module_params.conf" not in made["mid"]
    assert params.name.endswith("ai_cwnd_limited0_pacing_ca_pct120") and plain.config.module_params is None
    paths = sorted(x.split()[0] for x in lines)
    assert run_vars([plain, params], ifb=False, nft=False).module_params == {"cli": paths, "srv": paths}
    assert run_vars([plain], ifb=False, nft=False).module_params == {}
