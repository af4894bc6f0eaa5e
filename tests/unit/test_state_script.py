"""The hosts' state scripts (flharness/testbed/state_script.py) and the teardown log's
parsers agree through one marker format (flharness/teardown_format.py): each script runs
under sh with stand-ins for the programs it calls (each prints what it was asked), its
output goes into a teardown log as fl writes one (run/cell_logs.py), and the parsers
find every command's output there: on the middlebox and on an IPsec tunnel's ends."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from flharness.analysis.ipsec_stats import ipsec_end
from flharness.analysis.teardown_log import command_output, device_blocks, host_sections, rule_counters, sysctl_values
from flharness.cells import expand
from flharness.hosts import HOSTS
from flharness.run.cell_logs import _sections
from flharness.scenario import load_scenario
from flharness.teardown_format import COMMAND_PREFIX, MODULE_PARAMS, TCP_METRICS, UNAME, XFRM_STAT, command_header
from flharness.testbed.inventory import load_inventory
from flharness.testbed.plan import DRY_RUN_ID, DRY_RUN_ROOT, cell_vars, host_dirs, run_vars
from flharness.testbed.state_script import STATE_FILE

REPO = Path(__file__).resolve().parents[2]
SCENARIO = """test: tcp_2up
length: 10
rate: 10mbit
qdisc: fq_codel
cc: [cubic, cubic]
rtt: 20ms
matrix:
  - {ecn: [[strip-negotiation, none]], module_params: [{tcp_cubic: {beta: 800}}]}
  - {tunnel: [ipsec], ecn: [[strip-negotiation, bleach]]}
"""
#: Stand-ins for the programs: each prints its name and words (and, for batches, each
#: line read), some what the parsers read (tc's counters, ethtool's offloads, sysctls,
#: module parameters, XFRM counters).
STUB = r"""#!/bin/sh
name=${0##*/}
case $name in
  tc) if [ "$2" = filter ]; then
        echo "filter protocol ip pref 1 flower chain 0 handle 0x1"; echo "  action order 1: pedit cookie 666c2d666c6f772d31"
        echo "  Sent 1500 bytes 7 pkt"; exit 0; fi
      if [ "$3" = -j ]; then echo '[{"kind":"pfifo","handle":"10:","dev":"stub","packets":7}]'; exit 0; fi
      while IFS= read -r l; do echo "tc-batch: $l"; done ;;
  ip) case "$*" in
        *-b*) while IFS= read -r l; do echo "ip-batch: $l"; done ;;
        "-s xfrm state") echo "src 10.71.1.1 dst 10.71.2.1"; echo "	replay-window 32 seq 0x0"; echo "	stats:"
                         echo "	  replay-window 2 replay 1 failed 0" ;;
        *) echo "ip: $*" ;;
      esac ;;
  ethtool) echo "Features for $2:"; echo "tcp-segmentation-offload: off"; echo "generic-receive-offload: off" ;;
  sysctl) shift; for k in "$@"; do echo "$k = 1"; done ;;
  grep) shift 2; for p in "$@"; do echo "$p:800"; done ;;
  cat) case $1 in xfrm_stat.up) echo "XfrmInStateSeqError     	3" ;; *) echo "XfrmInStateSeqError     	7" ;; esac ;;
  sed) while IFS= read -r l; do echo "$l"; done ;;
  *) echo "$name: $*" ;;
esac
"""
PROGRAMS = ("tc", "ip", "ethtool", "nft", "wg", "sysctl", "grep", "cat", "sed")


@pytest.fixture(scope="module")
def logged(tmp_path_factory) -> dict[str, tuple[dict[str, str], dict[str, str]]]:
    """Cell (mid ECN, ipsec) → (each host's part of the teardown log, its state script)."""
    tmp = tmp_path_factory.mktemp("state")
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for name in PROGRAMS:
        (bin_dir / name).write_text(STUB)
        (bin_dir / name).chmod(0o755)
    path = tmp / "scenario.yml"
    path.write_text(SCENARIO)
    cells = expand(load_scenario(path), path)
    inv = load_inventory(REPO / "inventory.ini")
    rv = run_vars(cells, ifb=True, nft=True)
    out = {}
    for cell in cells:
        cv = cell_vars(cell, inv, tmp / cell.name, tcp_rewrite="tc", run_vars=rv, scratch=host_dirs(DRY_RUN_ID, DRY_RUN_ROOT))
        scripts = {h: cv.files[h][STATE_FILE] for h in HOSTS}
        printed = {}
        for host, script in scripts.items():
            p = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, check=True,
                               env={"PATH": str(bin_dir), "dir": str(tmp), "HOME": str(tmp)}, cwd=tmp)
            printed[host] = p.stdout
        out["ipsec" if cell.config.tunnel else "mid"] = (host_sections(_sections(printed)), scripts)
    return out


def headers(section: str) -> list[str]:
    return [line.removeprefix(COMMAND_PREFIX) for line in section.splitlines() if line.startswith(COMMAND_PREFIX)]


def test_every_command_of_every_host_is_found_with_its_output(logged):
    for sections, _ in logged.values():
        for host, section in sections.items():
            found = headers(section)
            assert found[0] == UNAME and found[-2:] == [TCP_METRICS, found[-1]] and found[-1].startswith("sysctl -e ")
            for command in found:
                shown = command_output(section, command)
                assert shown is not None and shown.strip(), (host, command)
                assert COMMAND_PREFIX not in shown.splitlines()[0], (host, command)
            assert command_output(section, UNAME).strip() == os.uname().release
            assert sysctl_values(section)["net.ipv4.tcp_ecn"] == "1"


def test_the_middlebox_shows_its_devices_rules_and_the_ends_their_parameters(logged):
    sections, _ = logged["mid"]
    mid = sections["mid"]
    assert list(device_blocks(mid)) == ["mid.l", "mid.r", "ifb4mid.l", "ifb4mid.r"]
    assert "tc-batch: qdisc show dev ifb4mid.r\ntc-batch: class show dev ifb4mid.r" in device_blocks(mid)["ifb4mid.r"]
    assert "nft: list table inet fl" in command_output(mid, "nft list table inet fl")
    assert rule_counters(mid) == {"flow 1: strip-negotiation": 7}
    for host in ("cli", "srv"):
        assert command_output(sections[host], MODULE_PARAMS).splitlines()[0] == "/sys/module/tcp_cubic/parameters/beta:800"
        assert "cli.r tcp-segmentation-offload: off" in sections["cli"]
    assert command_output(mid, MODULE_PARAMS) is None


def test_an_ipsec_ends_counters_are_read_back(logged):
    sections, scripts = logged["ipsec"]
    for host in ("cli", "srv"):
        end = ipsec_end(sections[host])
        assert end is not None and end.kernel_seq_errors == 4 and end.behind_window == 2 and end.duplicates == 1
        assert command_output(sections[host], XFRM_STAT) is not None
        assert "fl-tun" in device_blocks(sections[host])
    assert command_output(sections["cli"], "nft list table inet fl_tunnel") is not None
    assert "filter show dev fl-tun egress" in sections["cli"]
    assert ipsec_end(sections["mid"]) is None and "xfrm" not in scripts["mid"]


def test_a_header_line_is_the_prompt_and_the_command():
    assert command_header("ip tcp_metrics show") == "$ ip tcp_metrics show"
    assert command_header("ethtool -k a b", "offloads") == "$ ethtool -k a b   # offloads"
