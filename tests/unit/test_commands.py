"""Each host's command files (flharness/testbed/commands.py) for every cell of every shipped
scenario, against the files recorded in tests/fixtures/commands/files/ (NAME.txt per
scenario: each cell with its config hash, then each host's files, every line indented):
any change to what a cell configures shows here as a diff to review. When the change is
meant, re-record them all with one command:

    FL_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/test_commands.py

(the recording before these, from the roles' templates through Ansible, and the
differences from it that were meant, are in this file's history.)
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from flharness.cells import expand
from flharness.scenario import load_scenario
from flharness.testbed.commands import Ports, host_files
from flharness.testbed.plan import run_vars
from flharness.testbed.tunnel import EndLink

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "fixtures" / "commands" / "files"
SHIPPED = sorted(p.stem for p in (REPO / "scenarios").glob("*.yml"))
PORTS = Ports(mid_cli="mid.l", mid_srv="mid.r", cli="cli.r", tunnel="fl-tun",  # inventory.ini
              ends=(EndLink("cli", "cli.r", "10.71.1.1", "10.71.9.1/24"),
                    EndLink("srv", "srv.l", "10.71.2.1", "10.71.9.2/24")))
RUN = run_vars([], ifb=True, nft=True).model_copy(update={"ifb": True})  # IFBs and nft, no htb_args


def recording(name: str) -> str:
    """Scenario NAME's cells and each host's command files, as the golden file holds them."""
    path = REPO / "scenarios" / f"{name}.yml"
    out = []
    for cell in expand(load_scenario(path), path):
        out.append(f"== {cell.name} (config {cell.config_hash})\n")
        for host, files in host_files(cell.config, PORTS, RUN, tcp_rewrite="tc").items():
            for file, text in sorted(files.items()):
                out.append(f"--- {host}/{file}\n" + "".join(f"  {line}\n" for line in text.splitlines()))
    return "".join(out)


@pytest.mark.parametrize("name", SHIPPED)
def test_each_hosts_command_files_are_those_recorded(name):
    path = GOLDEN / f"{name}.txt"
    text = recording(name)
    if os.environ.get("FL_UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.is_file() and path.read_text() == text, \
        f"{path} differs: review, then FL_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/test_commands.py"


def test_the_recordings_are_the_shipped_scenarios():
    """One file per shipped scenario, none for a scenario gone (it would be stale unseen)."""
    assert sorted(p.stem for p in GOLDEN.glob("*.txt")) == SHIPPED


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
