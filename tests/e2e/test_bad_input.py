"""Malformed and hostile scenarios: one-line error naming file and key, exit 1, nothing configured.

Each case runs the real `./fl run` as a subprocess (as root where available, so a
missing validation would really build a testbed) and checks that no namespace appears
and no results folder is created.
"""
from __future__ import annotations

import textwrap

import pytest
from flrun import leftovers, run_fl

GOOD = """\
test: tcp_2up
length: 5
matrix:
  rate: [10mbit, 50mbit]
  qdisc: [pfifo limit 100]
  cc: [cubic-vs-cubic]
"""

# (case id, scenario text, key the error must name, words the message must contain)
CASES = [
    ("unknown-key", GOOD + "rates: [1mbit]\n", "rates", "unknown key"),
    ("unknown-matrix-key", GOOD + "  bandwidth: [1mbit]\n", "matrix.bandwidth", "unknown key"),
    ("rate-typo", GOOD.replace("50mbit]", "50mbits]"), "matrix.rate[1]", "not a tc rate"),
    ("negative-rtt", GOOD + "rtt: -20ms\n", "rtt", "negative"),
    ("rtt-without-unit", GOOD + "rtt: 20\n", "rtt", "unit"),
    ("cc-count", GOOD.replace("[cubic-vs-cubic]", "[[cubic, reno, bbr]]"), "matrix.cc[0]", "3 congestion controls for 2"),
    ("rtt-count", GOOD + "rtt: [80ms, 20ms, 10ms]\n", "rtt", "3 RTTs for 2"),
    ("qdisc-semicolon", GOOD.replace("pfifo limit 100", "'fq_codel; rm -rf /'"), "matrix.qdisc[0]", "not a tc argument"),
    ("qdisc-subshell", GOOD.replace("pfifo limit 100", "'pfifo limit $(reboot)'"), "matrix.qdisc[0]", "not a tc argument"),
    ("qdisc-backtick", GOOD.replace("pfifo limit 100", "'pfifo limit `id`'"), "matrix.qdisc[0]", "not a tc argument"),
    ("qdisc-jinja-statement", GOOD.replace("pfifo limit 100", "'pfifo {% if 1 %}limit 5{% endif %}'"), "matrix.qdisc[0]", "only {{ expression }}"),
    ("qdisc-undefined-var", GOOD.replace("pfifo limit 100", "'pfifo limit {{ nope }}'"), "matrix.qdisc[0]", "nope"),
    ("qdisc-args-tc-rejects", GOOD.replace("pfifo limit 100", "pfifo limit abc"), "matrix.qdisc[0]", "tc rejects"),
    ("name-traversal", "name: ../../etc\n" + GOOD, "name", "no '/'"),
    ("label-traversal", GOOD.replace("pfifo limit 100", "{value: pfifo, label: ../x}"), "matrix.qdisc[0]", "label"),
    ("empty-matrix", "test: tcp_1up\nrate: 1mbit\nqdisc: pfifo\ncc: cubic\nmatrix: {}\n", "matrix", "empty"),
    ("empty-axis", GOOD.replace("[pfifo limit 100]", "[]"), "matrix.qdisc", "at least 1"),
    ("duplicate-axis-value", GOOD.replace("[10mbit, 50mbit]", "[10mbit, 50mbit, 10mbit]"), "matrix.rate", "repeats item 0"),
    ("axis-twice", GOOD + "rate: 20mbit\n", "rate", "set both"),
    ("missing-test", GOOD.replace("test: tcp_2up\n", ""), "test", "missing"),
    ("unknown-test", GOOD.replace("tcp_2up", "tcp_3up"), "test", "unknown Flent test"),
    ("sysctl-not-net", GOOD + "sysctls: {srv: {kernel.panic: 1}}\n", "sysctls", "net.*"),
    ("sysctl-value-injection", GOOD + "sysctls: {srv: {net.ipv4.tcp_ecn: '1; reboot'}}\n", "sysctls", "characters"),
    ("sysctl-unknown-host", GOOD + "sysctls: {router: {net.ipv4.tcp_ecn: 1}}\n", "sysctls", "unknown host"),
    ("cc-shell-chars", GOOD.replace("[cubic-vs-cubic]", "['cubic$(id)']"), "matrix.cc[0]", "not a congestion control"),
    ("include-unknown-axis", GOOD + "include: [{bandwidth: 10mbit}]\n", "include[0].bandwidth", "not an axis"),
    ("exclude-unknown-value", GOOD + "exclude: [{rate: 100mbit}]\n", "exclude[0].rate", "none of the rate values"),
    ("rules-leave-nothing", GOOD + "exclude: [{cc: cubic-vs-cubic}]\n", "exclude", "no cells"),
    ("yaml-syntax", GOOD + "matrix: [\n", "line", ""),
    ("yaml-duplicate-key", GOOD + "length: 10\n", "line", "duplicate key 'length'"),
    ("repetitions-zero", GOOD + "repetitions: 0\n", "repetitions", "greater than or equal to 1"),
    ("fractional-length", GOOD.replace("length: 5", "length: 1.5"), "length", "whole seconds"),
    ("per-flow-cc-rrul", "test: rrul_be\nrate: 10mbit\nqdisc: pfifo\ncc: [cubic, reno, cubic, reno, cubic, reno, cubic, reno]\n",
     "cc", "cannot set congestion controls per flow"),
    ("flows-on-fixed-test", GOOD + "flows: 4\n", "flows", "fixed number of flows"),
    ("vars-injection", GOOD + "vars: {limit: 'a;b'}\n", "vars", "shell characters"),
    ("not-a-mapping", "- rate: 10mbit\n", "", "a scenario file is a mapping"),
    ("extends-missing", "extends: nowhere.yml\n" + GOOD, "extends[0]", "no such file"),
    ("extends-system-file", "extends: /etc/shadow\n" + GOOD, "extends[0]", "not a scenario file"),
    ("extends-second-not-yaml", "extends: [nowhere.yml, ../../etc/passwd]\n" + GOOD, "extends[1]", "not a scenario file"),
    # path and endpoint features
    ("netem-delay", GOOD + "netem: delay 20ms\n", "netem", "give the delay as rtt"),
    ("netem-injection", GOOD + "netem: 'loss 5%; reboot'\n", "netem", "not a netem word"),
    ("netem-jitter-no-time", GOOD + "netem: jitter lots\n", "netem", "jitter needs a time"),
    ("netem-direction", GOOD + "netem: {left: loss 1%}\n", "netem", "'up' and/or 'down'"),
    ("ecn-unknown-action", GOOD + "ecn: [none, paint-it-red]\n", "ecn", "is none of"),
    ("ecn-count", GOOD + "ecn: [none, bleach, bleach]\n", "ecn", "3 ECN actions for 2"),
    ("schedule-unordered", GOOD + "rate_schedule: [{at: 20s, rate: 5mbit}, {at: 10s, rate: 1mbit}]\n",
     "rate_schedule", "increasing time order"),
    ("schedule-bad-rate", GOOD + "rate_schedule: [{at: 10s, rate: fast}]\n", "rate_schedule", "not a tc rate"),
    ("start-negative", GOOD + "start: [0s, -5s]\n", "start", "negative"),
    ("client-qdisc-injection", GOOD + "client_qdisc: 'fq $(reboot)'\n", "client_qdisc", "not a tc argument"),
    ("udp-rate-typo", GOOD + "udp: 20mbits\n", "udp", "not a tc rate"),
    ("video-codepoint", GOOD + "video: {rate: 2mbit, fps: 60, codepoint: ce}\n", "video", "codepoint 'ce' is none of"),
    ("probe-interval", GOOD + "probe: {codepoint: ect1, interval: 5s}\n", "probe", "1ms-1s"),
    ("tunnel-unknown", GOOD + "tunnel: gre\n", "tunnel", "is none of"),
    ("replay-window-range", GOOD + "replay_window: 5000\n", "replay_window", "0 to 4096"),
    ("sysctl-template-statement", GOOD + "sysctls: {cli: {net.ipv4.tcp_ecn: '{% if 1 %}1{% endif %}'}}\n",
     "sysctls", "characters"),
    ("sysctl-template-renders-bad", GOOD + "sysctls: {cli: {net.ipv4.tcp_ecn: \"{{ '1;reboot' }}\"}}\n",
     "sysctls", "characters"),
    ("flows-for-tcp-nup-missing", GOOD.replace("tcp_2up", "tcp_nup"), "test", "needs 'flows:'"),
    ("module-not-a-cc-module", GOOD + "module_params: {kvm: {halt_poll_ns: 0}}\n", "module_params", "tcp_NAME"),
    ("module-param-path", GOOD + "module_params: {tcp_cubic: {'../../x': 1}}\n", "module_params", "lower-case"),
    ("module-value-injection", GOOD + "module_params: {tcp_cubic: {beta: '1 > /etc/x'}}\n", "module_params",
     "a number or a word"),
    ("module-param-read-only", GOOD + "module_params: {tcp_cubic: {no_such_parameter: 1}}\n", "module_params",
     "no parameter no_such_parameter"),
]


@pytest.mark.parametrize("case,text,key,words", CASES, ids=[c[0] for c in CASES])
def test_bad_scenario_is_rejected_before_anything_runs(tmp_path, case, text, key, words):
    path = tmp_path / f"{case}.yml"
    path.write_text(text)
    results = tmp_path / "results"
    p = run_fl("run", str(path), "--results", str(results), timeout=120)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 1, p.stdout + p.stderr
    assert len(lines) == 1, p.stderr
    assert str(path) in lines[0]
    assert f": {key}" in lines[0], lines[0]
    assert words in lines[0]
    # no namespace of its own, ever, and nothing left (another run's testbeds may come and go)
    assert not p.seen.inodes and not leftovers(p.seen), (p.seen, leftovers(p.seen))
    assert not results.exists()


SECRET = "root:$y$j9T$NOT-TO-BE-SHOWN:19000:0:99999:7:::"


@pytest.mark.parametrize("how", ["symlink", "yml-named"])
def test_extends_never_reads_or_echoes_a_file_that_is_not_a_scenario(tmp_path, how):
    """A link named .yml to a file that is not one is refused unread; a .yml file that is
    not a scenario (a shadow line is, to YAML, a mapping with one odd key) is refused
    without quoting its keys."""
    secret = tmp_path / "secret"
    secret.write_text(SECRET + "\n")
    parent = tmp_path / "parent.yml"
    if how == "symlink":
        parent.symlink_to(secret)
    else:
        parent.write_text(secret.read_text())
    path = tmp_path / "child.yml"
    path.write_text("extends: parent.yml\n" + GOOD)
    p = run_fl("run", str(path), "--results", str(tmp_path / "r"), timeout=120)
    assert p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "NOT-TO-BE-SHOWN" not in p.stdout + p.stderr
    assert "extends[0]" in p.stderr and "not a scenario file" in p.stderr, p.stderr
    assert not (tmp_path / "r").exists()


def test_bad_cli_arguments(tmp_path):
    path = tmp_path / "ok.yml"
    path.write_text(GOOD)
    p = run_fl("run", str(path), "--run", "../escape", "--results", str(tmp_path / "r"))
    assert p.returncode == 1 and "run name" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    p = run_fl("run", "no-such-scenario")
    assert p.returncode == 1 and "no scenario 'no-such-scenario'" in p.stderr
    p = run_fl("run", str(path), "--only", "nothing-like-this", "--results", str(tmp_path / "r"))
    assert p.returncode == 1 and "no cell matches" in p.stderr
    assert not (tmp_path / "r").exists()


def test_module_params_on_parallel_namespace_testbeds_are_refused(tmp_path):
    """Module parameters are the kernel's: two namespace testbeds of this machine would set
    them for each other's cells."""
    path = tmp_path / "params.yml"
    path.write_text(GOOD + "module_params: {tcp_cubic: {beta: 800}}\n")
    p = run_fl("run", str(path), "--parallel", "2", "--results", str(tmp_path / "r"), timeout=120)
    assert p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "sets module_params" in p.stderr and "--parallel 1" in p.stderr, p.stderr
    assert not p.seen.inodes and not (tmp_path / "r").exists()


def test_the_good_scenario_passes_validation(tmp_path):
    """The base of every case above is valid: each failure is due to its one change."""
    path = tmp_path / "good.yml"
    path.write_text(textwrap.dedent(GOOD))
    p = run_fl("list", str(path))
    assert p.returncode == 0, p.stderr
    assert "2 cells" in p.stdout
