"""The client's Flent script (flharness/testbed/flent_script.py): its lines per branch (UDP
over IPv4 and IPv6, video, probe, the client's socket sampler), and the script run under
sh with stand-ins for the programs it starts (each logs its words), from folders whose
paths have spaces: every tool gets its words whole."""
from __future__ import annotations

import shlex
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from flharness.cells import expand
from flharness.hosts import UDP_PORT, VIDEO_PORT
from flharness.scenario import load_scenario
from flharness.testbed.flent_script import FLENT_FILE, FlentRun, IrttClient, UdpClient, VideoClient, flent_script
from flharness.testbed.inventory import load_inventory
from flharness.testbed.plan import DRY_RUN_ID, DRY_RUN_ROOT, cell_vars, host_dirs, run_vars

REPO = Path(__file__).resolve().parents[2]
BASE = FlentRun(cell_dir="/results/c", scratch="/run/fl/t/cli", flent=("timeout", "-k", "15", "140", "fl-flent", "tcp_1up"),
                target="10.71.2.1", capture_dev="cli.r", sample_sockets=True, lead_s=5, length=10)
UDP = UdpClient(port=5001, bps=5_000_000)
VIDEO = VideoClient(port=5002, isochronous="30:2000000,200000", tos=33)
PROBE = IrttClient(port=2112, interval="5ms", tos=1)


def lines(run: FlentRun) -> list[str]:
    return flent_script(run).splitlines()


def test_a_cell_without_side_flows_runs_flent_alone():
    out = lines(BASE)
    assert out[0].startswith("#") and "flharness/testbed/flent_script.py" in flent_script(BASE).split("\ndir=")[0]
    assert "dir=/results/c" in out and "PATH=/run/fl/t/cli:$PATH" in out
    assert 'PYTHONUNBUFFERED=1 timeout -k 15 140 fl-flent tcp_1up > "$dir/flent.out" 2>&1 &' in out
    assert not any(w in line for line in out for w in ("iperf", "irtt", "first-ping", "fl-wait-from"))
    assert out[-1] == "exit 0" and "  echo '# command: timeout -k 15 140 fl-flent tcp_1up'" in out


def test_udp_datagrams_fill_the_mtu_less_the_headers_of_the_ip_version():
    v4 = flent_script(replace(BASE, udp=UDP))
    assert "iperf -u -c 10.71.2.1 -p 5001 -b 5000000 \\\n  -l $((mtu - 28)) -t 10 -i 1 > \"$dir/udp.log\" 2>&1 &\n" in v4
    assert 'fl-wait-from "$t0" 5\n' in v4 and "kill $udp 2>/dev/null; wait $udp 2>/dev/null\n" in v4
    v6 = flent_script(replace(BASE, udp=UDP, target="fd00:71:2::1"))
    assert "iperf -u -c fd00:71:2::1 -p 5001 -b 5000000 \\\n  -l $((mtu - 48)) -t 10 -i 1" in v6
    assert "ip -o route get fd00:71:2::1 |" in v6


def test_a_video_flow_is_isochronous_and_marked():
    out = flent_script(replace(BASE, video=VIDEO))
    assert ("iperf -u -c 10.71.2.1 -p 5002 --isochronous=30:2000000,200000 \\\n"
            "  -S 33 -l $((mtu - 28)) -t 10 -i 1 > \"$dir/video.log\" 2>&1 &\nvideo=$!\n") in out
    assert "udp=$!" not in out and "kill $video 2>/dev/null; wait $video 2>/dev/null\n" in out


def test_a_probe_names_an_ipv6_server_in_brackets():
    out = lines(replace(BASE, probe=PROBE, target="fd00:71:9::2"))
    irtt = out.index("irtt client -Q -i 5ms -d 10s --dscp=1 \\")
    assert shlex.split(out[irtt + 1])[:3] == ["-o", "$dir/probe.json.gz", "[fd00:71:9::2]:2112"]
    assert "  -o \"$dir/probe.json.gz\" 10.71.2.1:2112 > \"$dir/probe.log\" 2>&1 &" in lines(replace(BASE, probe=PROBE))
    assert out.index("wait $flent") < out.index("i=0")  # irtt is let end after Flent


def test_the_client_samples_its_sockets_only_where_asked():
    on, off = lines(BASE), lines(replace(BASE, sample_sockets=False))
    start = '/run/fl/t/cli/fl-start /run/fl/t/cli/ss-sample.pid "$dir/cli.ss.log" /run/fl/t/cli/fl-ss-sample 10.71.2.1 cli.r'
    assert start in on and "/run/fl/t/cli/fl-stop /run/fl/t/cli/ss-sample.pid" in on
    assert not any("ss-sample" in line for line in off)


def test_the_cells_flent_script_takes_the_servers_ports_from_one_place(tmp_path):
    """iperf's ports are fl's (hosts.py: the servers are started with the same), irtt's the
    inventory's; the script is the client's command file."""
    path = tmp_path / "s.yml"
    path.write_text("test: tcp_1up\nlength: 10\nrate: 10mbit\nqdisc: pfifo\ncc: cubic\nudp: 5mbit\n"
                    "video: {rate: 2mbit, fps: 30, codepoint: ect1}\nprobe: {codepoint: ect1}\n")
    cell, = expand(load_scenario(path), path)
    inv = load_inventory(REPO / "inventory.ini")
    cv = cell_vars(cell, inv, tmp_path / "cell", tcp_rewrite="tc", run_vars=run_vars([cell], ifb=True, nft=True),
                   scratch=host_dirs(DRY_RUN_ID, DRY_RUN_ROOT))
    script = cv.files["cli"][FLENT_FILE]
    assert f" -p {UDP_PORT} -b 5000000 " in script and f" -p {VIDEO_PORT} --isochronous=" in script
    assert f" 10.71.2.1:{inv.hostvars['srv']['fl_irtt_port']} " in script
    assert f"dir={tmp_path / 'cell'}\n" in script and f"PATH={DRY_RUN_ROOT}/{DRY_RUN_ID}/cli:$PATH\n" in script
    assert all(FLENT_FILE not in cv.files.get(h, {}) for h in ("mid", "srv"))


#: Stand-ins: each logs its name and words, one a line, to $LOG; fl-start runs the
#: first ping's stand-in (which writes a time into its output file); ip names a device
#: that has no MTU to read here (1500, the fallback).
STUB = r"""#!/bin/sh
name=${0##*/}
record=$(printf '%s\n' "== $name" "$@")
printf '%s\n' "$record" >> "$LOG"  # one write: the stand-ins run at once
case $name in
  ip) echo "10.71.2.1 dev fl-nodev0 src 10.71.1.1 uid 0" ;;
  fl-start) [ "$3" = "${3%first-ping}" ] || date +%s.%N > "$2" ;;
  timeout) i=0  # Flent: runs until the side flows have started (and logged), then they are stopped
           while [ $i -lt 300 ] && [ "$(grep -cE '^== (iperf|irtt)$' "$LOG")" -lt 3 ]; do i=$((i + 1)); sleep 0.1; done ;;
esac
exit 0
"""
PROGRAMS = ("ip", "fl-start", "fl-stop", "fl-wait-from", "timeout", "iperf", "irtt")


@pytest.mark.parametrize("target", ["10.71.2.1", "fd00:71:2::1"])
def test_the_script_runs_under_sh_and_hands_every_word_whole(tmp_path, target):
    scratch, cell_dir = tmp_path / "scratch dir", tmp_path / "cell $(dir)"
    scratch.mkdir()
    cell_dir.mkdir()
    for name in PROGRAMS:
        (scratch / name).write_text(STUB)
        (scratch / name).chmod(0o755)
    argv = ("timeout", "-k", "15", "140", "fl-flent", "tcp_1up", "-n", '{"fl": "a b"}', "--test-parameter", "k='x y'")
    run = FlentRun(cell_dir=str(cell_dir), scratch=str(scratch), flent=argv, target=target, capture_dev="cli.r",
                   sample_sockets=True, lead_s=5, length=10, udp=UDP, video=VIDEO, probe=PROBE)
    log = tmp_path / "log"
    p = subprocess.run(["sh", "-c", flent_script(run)], env={"PATH": "/usr/bin:/bin", "LOG": str(log)},
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and not p.stderr, p.stderr
    calls = [block.splitlines() for block in log.read_text().split("== ")[1:]]
    assert [c[0] for c in calls][:3] == ["ip", "fl-start", "fl-start"]
    assert calls[1][1:] == [f"{scratch}/first-ping.pid", f"{scratch}/first_ping", f"{scratch}/fl-first-ping", "fl-nodev0", "request"]
    assert calls[2][1:] == [f"{scratch}/ss-sample.pid", f"{cell_dir}/cli.ss.log", f"{scratch}/fl-ss-sample", target, "cli.r"]
    assert ["timeout", *argv[1:]] in calls
    header = 48 if ":" in target else 28
    assert ["iperf", "-u", "-c", target, "-p", "5001", "-b", "5000000", "-l", str(1500 - header), "-t", "10", "-i", "1"] in calls
    assert ["iperf", "-u", "-c", target, "-p", "5002", "--isochronous=30:2000000,200000", "-S", "33",
            "-l", str(1500 - header), "-t", "10", "-i", "1"] in calls
    server = f"[{target}]" if ":" in target else target
    assert ["irtt", "client", "-Q", "-i", "5ms", "-d", "10s", "--dscp=1", "-o", f"{cell_dir}/probe.json.gz", f"{server}:2112"] in calls
    flent_log = (cell_dir / "flent.log").read_text().splitlines()
    assert flent_log[:2] == ["# exit status: 0", f"# command: {shlex.join(argv)}"]
    assert not (cell_dir / "flent.out").exists()
