"""Schemes (scenario/schemes.py): user-space congestion controllers as a sender and a
receiver program. The shipped files load; a bad file is refused in one line naming the
file and key; a cell names a scheme as a congestion control and records it (its hash
changes with the file); Flent runs the kernel flows alone; the hosts' scripts start each
side with every value quoted; the captures' datagrams are matched one by one."""
from __future__ import annotations

import shlex
from pathlib import Path

import numpy as np
import pytest

from flharness.analysis import datagrams
from flharness.analysis.capture import Datagrams
from flharness.cells import expand
from flharness.errors import ScenarioError
from flharness.flent_tests import PING
from flharness.scenario import load_scenario
from flharness.scenario.pantheon import NOT_RUN, WRAPPERS
from flharness.scenario.schemes import load_schemes, read_scheme_file

REPO = Path(__file__).parents[2]
GOOD = (REPO / "tests" / "schemes" / "exits.yml").read_text()


def test_the_shipped_schemes_load_with_their_implementation_and_version():
    schemes = load_schemes()
    assert {"quic_cubic", "quic_reno", "quic_bbr", "quic_bbr2"} <= set(schemes)
    cubic = schemes["quic_cubic"]
    assert cubic.label == "QUIC Cubic (ngtcp2 0.12.1)" and cubic.listens == "sender" and cubic.transport == "udp"
    assert "--cc=cubic" in cubic.commands["sender"] and "--cc=cubic" in cubic.commands["receiver"]
    assert set(cubic.needs) == {"gtlsserver", "gtlsclient", "openssl"}


@pytest.mark.parametrize(("edit", "key", "why"), [
    (("sender: [sh, -c,", "sender: [sh, -c, '{host}',"), "sender", "{host} in '{host}' is none of bytes, dir"),
    (("sender: [sh,", "sender: ['rm -rf /',"), "sender", "a program is a name on PATH or an absolute path"),
    (("sender: [sh,", "sender: ['$(reboot)',"), "sender", "a program is a name on PATH"),
    (("receiver: [sleep, \"600\"]", "receiver: [sleep, \"6\\n00\"]"), "receiver", "no control characters"),
    (("receiver: [sleep, \"600\"]", "receiver: []"), "receiver", "a list of words"),
    (("transport: udp", "transport: sctp"), "transport", "'udp'"),
    (("listens: receiver", "listens: both"), "listens", "'sender' or 'receiver'"),
    (("gives_up: {title: Gives up}", "Gives-Up: {title: x}"), "schemes", "a scheme's name is a congestion control's"),
    (("gives_up: {title: Gives up}", "gives_up: {title: x, vars: {peer: y}}"), "schemes.gives_up.vars", "none of fl's placeholders"),
    (("gives_up: {title: Gives up}", "gives_up: {title: x, vars: {cc: 'a;b'}}"), "schemes.gives_up.vars", "one word"),
    (("needs: [sh, sleep]", "needs: ['sh;id']"), "needs", "a program is a name"),
    (("version: \"1\"", "version: \"1 $(id)\""), "version", "should match pattern"),
    (("implementation: fl-test\n", "implementation: fl-test\nbogus: 1\n"), "bogus", "Extra inputs"),
])
def test_a_bad_scheme_file_is_refused_in_one_line_naming_the_key(tmp_path, edit, key, why):
    old, new = edit
    assert old in GOOD, old
    path = tmp_path / "bad.yml"
    path.write_text(GOOD.replace(old, new, 1))
    with pytest.raises(ScenarioError) as e:
        read_scheme_file(path)
    text = str(e.value)
    assert "\n" not in text and text.startswith(f"{path}: {key}") and why in text, text


def test_two_files_may_not_give_one_name(tmp_path):
    twin = tmp_path / "twin.yml"
    twin.write_text(GOOD.replace("gives_up:", "quic_cubic:"))
    with pytest.raises(ScenarioError, match=r"schemes.quic_cubic: .*quic.yml gives this name already"):
        load_schemes([twin])


def scenario(scenario_file, text: str):
    path = scenario_file(text)
    return path, expand(load_scenario(path), path)


def test_a_scheme_stands_where_a_congestion_control_does(scenario_file, tmp_path):
    """cc: quic_cubic-vs-cubic: flow 1 runs the scheme, flow 2 kernel Cubic, whom Flent runs
    alone (tcp_nup, one stream); a cell of schemes only runs Flent's ping over the whole run.
    The cell records the scheme (its hash changes with the scheme file's commands)."""
    _, cells = scenario(scenario_file, "test: tcp_2up\nrate: 10mbit\nqdisc: pfifo\nlength: 20\n"
                                       "matrix: {cc: [quic_cubic-vs-cubic, quic_bbr]}\n")
    mixed, alone = cells
    assert [f.cc for f in mixed.config.flows] == ["quic_cubic", "cubic"]
    assert [f.cc for f in mixed.config.kernel_flows] == ["cubic"] and mixed.config.kernel_test.name == "tcp_nup"
    assert mixed.config.schemes is not None and mixed.config.schemes["quic_cubic"].label == "QUIC Cubic (ngtcp2 0.12.1)"
    assert alone.config.kernel_test is PING and len(alone.config.flows) == 2 and not alone.config.kernel_flows
    from flharness.testbed.inventory import load_inventory
    from flharness.testbed.plan import flent_argv
    inv = load_inventory(REPO / "inventory.ini")
    argv = flent_argv(mixed, inv, ".")
    assert argv[argv.index("fl-flent") + 1] == "tcp_nup" and "cc_algos=cubic" in argv and "upload_streams=1" in argv
    argv = flent_argv(alone, inv, ".")
    assert argv[argv.index("fl-flent") + 1] == "ping" and argv[argv.index("-l") + 1] == str(alone.config.flent_s)
    assert "--socket-stats" not in argv and "-d" not in argv


@pytest.mark.parametrize(("text", "key", "why"), [
    ("test: tcp_1down\ncc: quic_cubic\n", "cc", "its flow goes up"),
    ("test: tcp_2up\ncc: [quic_cubic, cubic]\nrtt: [20ms, 10ms]\n", "cc", "sets no DSCP"),
    ("test: tcp_2up\ncc: quic_cubic-vs-cubic\nstart: [0s, 5s]\n", "cc", None),
    ("test: tcp_2up\ncc: cubic-vs-quic_cubic\nstart: [0s, 5s]\n", "cc", "no start delay"),
    ("test: tcp_1up\ncc: quic_cubic\nreceiver_cc: cubic\n", "receiver_cc", "its own program"),
    ("test: tcp_1up\ncc: quic_cubic\nschemes: [nosuch.yml]\n", "schemes[0]", "no scheme file"),
    ("test: tcp_1up\ncc: quic_cubic\nschemes: ['a;b.yml']\n", "schemes[0]", "a scheme file's path"),
])
def test_a_flow_a_scheme_cannot_run_is_refused_naming_the_key(scenario_file, text, key, why):
    path = scenario_file("rate: 10mbit\nqdisc: pfifo\n" + text)
    if why is None:  # flow 1, the scheme's, starts at once: fine
        expand(load_scenario(path), path)
        return
    with pytest.raises(ScenarioError) as e:
        expand(load_scenario(path), path)
    assert f": {key}" in str(e.value) and why in str(e.value), str(e.value)


def test_no_scheme_file_from_a_results_folder(scenario_file, tmp_path):
    run = tmp_path / "results" / "r"
    (run / "s").mkdir(parents=True)
    (run / "run.json").write_text("{}")
    (run / "s" / "x.yml").write_text(GOOD)
    path = scenario_file(f"test: tcp_1up\nrate: 10mbit\nqdisc: pfifo\ncc: gives_up\nschemes: [{run / 's' / 'x.yml'}]\n")
    with pytest.raises(ScenarioError, match=r"schemes\[0\]: .* is in a results folder"):
        expand(load_scenario(path), path)


def test_the_hosts_start_each_side_with_every_word_quoted(scenario_file, tmp_path):
    """The sender listens (QUIC's): the client's setup starts it; the server's receiver
    waits for Flent's first ping and the lead-in; every filled-in word is one shell word."""
    from flharness.testbed.inventory import load_inventory
    from flharness.testbed.plan import cell_vars, run_vars
    _, (cell,) = scenario(scenario_file, "test: tcp_1up\nrate: 10mbit\nqdisc: pfifo\nlength: 20\ncc: quic_cubic\n")
    inv = load_inventory(REPO / "inventory.ini")
    rv = run_vars([cell], ifb=True, nft=True)
    cv = cell_vars(cell, inv, tmp_path / cell.name, tcp_rewrite="tc", run_vars=rv,
                   scratch={h: f"/run/fl/t/{h}" for h in ("cli", "mid", "srv")})
    cli, srv = cv.hosts["cli"].setup, cv.hosts["srv"].setup
    start = next(line for line in cli.splitlines() if "fl-start" in line and "scheme-1.sender.pid" in line)
    words = shlex.split(start)
    assert words[0] == "(cd" and words[1] == "/run/fl/t/cli/scheme-1" and words[-1] == ")"  # in its own folder
    assert words[words.index("gtlsserver"):-1] == ["gtlsserver", "-q", "--cc=cubic", "--max-gso-dgrams=1", "-d",
                                                  "/run/fl/t/cli/scheme-1", "*", "7101", "/run/fl/t/cli/scheme-1/key.pem",
                                                  "/run/fl/t/cli/scheme-1/cert.pem"]
    assert "truncate -s 50000000 /run/fl/t/cli/scheme-1/data" in cli  # 2 × 10 Mbit/s × 20 s / 8, bytes
    receiver = shlex.split(next(line for line in srv.splitlines() if "scheme-1.receiver.pid" in line and "fl-start" in line))
    assert "fl-first-ping" in receiver[receiver.index("-c") + 1] and receiver[-2] == "https://10.71.1.1:7101/data"
    flent = cv.files["cli"]["flent.sh"]
    assert "scheme-1.sender.pid" in flent and "fl-wait-from" in flent  # stopped at the test's end


def datagrams_of(ts, tags, payload=1200, dst=2, port=7101) -> Datagrams:
    n = len(ts)
    return Datagrams(ts=np.array(ts, float), src=np.full(n, 1, np.uint32), dst=np.full(n, dst, np.uint32),
                     sport=np.full(n, port, np.uint32), dport=np.full(n, 40000, np.uint32),
                     payload=np.full(n, payload, np.int64), tos=np.full(n, 2, np.uint8),
                     first_word=np.zeros(n, np.int64), tag=np.array(tags, np.uint64))


def test_datagrams_are_matched_one_by_one_by_their_tag():
    """Five sent, one lost (tag 3), one arriving twice (tag 4, counted once), one sent
    after the last that arrived (tag 6: may have been queued still, counted neither way):
    delays per matched datagram, loss 1 of 5 settled, goodput its first copies' payload."""
    sent = datagrams_of([0.0, 0.1, 0.2, 0.3, 0.4, 0.5], [1, 2, 3, 4, 5, 6])
    got = datagrams_of([0.05, 0.15, 0.35, 0.36, 0.45], [1, 2, 4, 4, 5])
    s, g = datagrams.data(sent, 2, 7101), datagrams.data(got, 2, 7101)
    owd, departed, delays = datagrams.one_way_samples(sent, s, got, g, 0.0, 1.0)
    assert owd is not None and owd.n == 4 and owd.sent == 5 and owd.loss == pytest.approx(1 / 5)
    assert delays == pytest.approx([50, 50, 50, 50]) and departed == pytest.approx([0.0, 0.1, 0.3, 0.4])
    assert datagrams.received_mbit(got, g, 0.0, 1.0) == pytest.approx(4 * 1200 * 8 / 1e6)
    assert datagrams.payload_share(got, g) == pytest.approx(1200 / 1242)
    assert len(datagrams.data(sent, 3, 7101)) == 0 and len(datagrams.data(sent, 2, 7102)) == 0


def test_a_parents_scheme_files_are_named_from_its_own_folder(tmp_path):
    """`extends`: the scheme files of a scenario in another folder are found where it names
    them (tests/scenarios/pantheon-seed.yml extends the shipped pantheon-1mbit)."""
    (tmp_path / "base" / "schemes").mkdir(parents=True)
    (tmp_path / "base" / "schemes" / "x.yml").write_text(GOOD)
    (tmp_path / "base" / "s.yml").write_text("test: tcp_1up\nrate: 10mbit\nqdisc: pfifo\ncc: gives_up\n"
                                             "schemes: [schemes/x.yml]\n")
    (tmp_path / "child").mkdir()
    child = tmp_path / "child" / "c.yml"
    child.write_text("extends: ../base/s.yml\nlength: 5\n")
    (cell,) = expand(load_scenario(child), child)
    assert cell.config.schemes is not None and list(cell.config.schemes) == ["gives_up"]


def test_the_shipped_pantheon_file_names_every_scheme_fl_runs_from_a_checkout():
    """schemes/pantheon/checkout.yml: each wrapper fl speaks, from /opt/pantheon; the
    schemes of Pantheon's reports it does not run say why."""
    schemes = read_scheme_file(REPO / "schemes" / "pantheon" / "checkout.yml")
    assert sorted(s.title for s in schemes.values()) == sorted(w.title for w in WRAPPERS.values())
    assert all(p.startswith("/opt/pantheon/third_party/") for s in schemes.values() for p in s.needs)
    assert "eb552b4" in NOT_RUN["koho_cc"] and "eb552b4" in NOT_RUN["calibrated_koho"]


def test_a_pantheon_checkouts_schemes_are_its_wrappers_commands(tmp_path):
    """A file naming a Pantheon checkout gives its schemes as their wrappers run them:
    the first side (run_first) listens, commands point into its third_party/, each side's
    environment as the wrapper sets it; a scheme fl does not run from a checkout, or a name
    Pantheon does not have, is refused with why; a relative checkout is the file's folder's."""
    checkout = tmp_path / "pantheon"
    (checkout / ".git").mkdir(parents=True)
    (checkout / ".git" / "HEAD").write_text("23e738c4f2b1a0d9e8c7b6a5f4e3d2c1b0a99887\n")
    path = tmp_path / "p.yml"
    path.write_text("pantheon: pantheon\nschemes: [copa, verus, vivace]\n")
    schemes = read_scheme_file(path)
    copa, verus = schemes["copa"], schemes["verus"]
    t = f"{checkout}/third_party"
    assert copa.label == "Copa (Pantheon 23e738c)" and copa.listens == "receiver" and verus.listens == "sender"
    assert copa.commands["receiver"] == (f"{t}/genericCC/receiver", "{port}")
    assert copa.commands["sender"][:3] == (f"{t}/genericCC/sender", "serverip={peer}", "serverport={port}")
    assert copa.env == {"sender": {"MIN_RTT": "1000000"}} and copa.stdout == {"sender": "discard"}
    assert verus.commands["receiver"] == (f"{t}/verus/src/verus_client", "{peer}", "-p", "{port}")
    assert schemes["vivace"].env["sender"] == {"LD_LIBRARY_PATH": f"{t}/vivace/sender"}
    for text, why in (("schemes: [quic]", "proto-quic"), ("schemes: [nosuch]", "none of the Pantheon schemes"),
                      ("schemes: {Bad: copa}", "not a congestion control's name")):
        path.write_text(f"pantheon: /opt/pantheon\n{text}\n")
        with pytest.raises(ScenarioError, match=rf"{path}: schemes\[0\]: .*{why}"):
            read_scheme_file(path)
