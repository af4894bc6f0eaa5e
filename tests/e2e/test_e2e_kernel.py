"""Kernel capability handling, dry runs and `fl check`, against this machine's kernel."""
from __future__ import annotations

import json

import pytest
from flrun import REPO, leftovers, needs_root_tools, run_fl

from flharness.capabilities import probe_for
from flharness.cells import expand
from flharness.scenario import load_scenario

pytestmark = [pytest.mark.e2e, needs_root_tools()]
MIX = REPO / "tests" / "scenarios" / "kernel-mix.yml"


def test_unsupported_cells_are_skipped_with_the_reason_and_the_rest_run(tmp_path):
    cells = expand(load_scenario(MIX), MIX)
    caps = probe_for(cells)
    expected = {c.name: caps.unsupported(c) for c in cells}
    p = run_fl("run", str(MIX), "--results", str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    root = tmp_path / "default" / "kernel-mix"
    for name, why in expected.items():
        rec = json.loads((root / name / "cell.json").read_text())
        if why is None:
            assert rec["status"] == "ok", rec["reason"]
        else:
            assert rec["status"] == "skipped" and rec["reason"] == why
            assert f"skipped     {name}: {why}" in p.stdout
    if not caps.feature("netem"):  # this project's host kernel: no netem, no fq_codel
        assert expected["cubic-pfifo_100-10mbit-20ms"] == "kernel lacks sch_netem (needed for the 20ms RTT)"
    if caps.reply.qdiscs["fq_codel"].verdict != "ok":  # the cells' own specs (a run probes no more)
        assert expected["cubic-fq_codel-10mbit-0ms"] == "kernel lacks sch_fq_codel (qdisc fq_codel)"
    assert expected["cubic-pfifo_100-10mbit-0ms"] is None
    ok = sum(w is None for w in expected.values())
    assert f"{ok} ok, 0 failed, {len(cells) - ok} skipped" in p.stdout


def test_dry_run_touches_nothing(tmp_path):
    p = run_fl("run", "demo", "--dry-run", "--results", str(tmp_path / "r"))
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("      flent.sh:\n") == p.stdout.count("PYTHONUNBUFFERED=1 timeout -k 15 ") == 12
    assert "      bottleneck.tc:\n" in p.stdout and "         qdisc add dev mid.r parent 1:1 handle 10: pfifo limit 1032\n" in p.stdout
    assert p.stdout.count(": testbed_up.sh (run by the testbed role once") == 3  # each host's, before the cells
    assert "         sysctl -qw net.ipv4.ip_forward=1\n" in p.stdout
    # no namespace of its own (its testbed, if any, only renders), nothing left, no results folder
    assert not p.seen.inodes and leftovers(p.seen) == [] and not (tmp_path / "r").exists()


def test_fl_check_reports_tools_and_kernel():
    p = run_fl("check")
    assert p.returncode == 0, p.stdout + p.stderr
    for word in ("flent", "netperf", "tcpdump", "ansible", "supported:", "usable:"):
        assert word in p.stdout


def test_sysctl_values_the_kernel_rejects_stop_the_run_before_setup(tmp_path):
    """The probe applies each cell's settings in a throwaway namespace, in order:
    tcp_reordering above tcp_max_reordering is refused (file, key and the kernel's
    words, nothing built); raising tcp_max_reordering first is accepted."""
    bad, good = tmp_path / "bad.yml", tmp_path / "good.yml"
    head = "test: tcp_1up\nrate: 10mbit\nqdisc: pfifo\ncc: cubic\n"
    bad.write_text(head + "matrix:\n  sysctls:\n    - {srv: {net.ipv4.tcp_reordering: 30}}\n"
                   "    - {srv: {net.ipv4.tcp_reordering: 100000}}\n")
    good.write_text(head + "sysctls: {srv: {net.ipv4.tcp_max_reordering: 100000, net.ipv4.tcp_reordering: 100000}}\n")
    p = run_fl("run", str(bad), "--results", str(tmp_path / "r"))
    assert p.returncode != 0
    assert f"{bad}: matrix.sysctls[1]: srv: the kernel rejects net.ipv4.tcp_reordering=100000" in p.stderr
    assert "Invalid argument" in p.stderr
    assert not p.seen.inodes and leftovers(p.seen) == [] and not (tmp_path / "r").exists()
    p = run_fl("run", str(good), "--dry-run")
    assert p.returncode == 0, p.stderr
