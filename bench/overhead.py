#!/usr/bin/env python3
"""Per-cell overhead of `fl run` against Flent's own batch mode, on the same cells, in one run.

Both run the same cells on namespace testbeds of the same shape: fl its own, Flent's
batch mode (`flent -B`) one this script builds (namespaces flb-<hex>-cli|mid|srv), with
hooks that do by hand what fl does per cell: sysctls kept, TCP metrics flushed, the
bottleneck rebuilt, tcpdump on client and server (waiting until both listen) and an ss
sampler, then the captures stopped and xz-compressed and each host's qdisc, link and TCP
state written down. The two alternate, ROUNDS times.

Overhead per cell: the time between consecutive Flent test starts (each data file's
TIME) minus Flent's total length (length + its 10 s lead-in and lead-out), median over
the cells; and the whole command's wall time (testbed built and removed included)
minus cells × total length, per cell. The default cells are the issue's: tcp_2up, 10 s,
10 and 50 Mbit/s, HTB + pfifo 1000, cubic and reno.

    .venv/bin/python bench/overhead.py [--rounds 2] [--length 10]
"""
from __future__ import annotations

import argparse
import json
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import datetime
from itertools import pairwise
from pathlib import Path

from flharness.analysis.flent_data import load as load_flent

REPO = Path(__file__).resolve().parent.parent
CELLS = [(rate, cc) for cc in ("cubic", "reno") for rate in ("10mbit", "50mbit")]
LEAD = 10  # Flent's lead-in + lead-out, seconds


def scenario(folder: Path, length: int) -> Path:
    path = folder / "bench-overhead.yml"
    path.write_text(textwrap.dedent(f"""\
        description: fl against Flent batch (bench/overhead.py)
        test: tcp_2up
        length: {length}
        qdisc: pfifo limit 1000
        matrix:
          cc: [cubic, reno]
          rate: [10mbit, 50mbit]
        """))
    return path


def run_fl(folder: Path, length: int) -> tuple[float, list[float], dict[str, float]]:
    """Whole wall time, Flent start times in cell order, median seconds per phase."""
    results = folder / "fl-results"
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, str(REPO / "fl"), "run", str(scenario(folder, length)),
                        "--results", str(results)], capture_output=True, text=True)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"fl run failed:\n{p.stdout}{p.stderr}")
    phases: dict[str, list[float]] = {}
    for rec in (json.loads(c.read_text()) for c in results.glob("default/*/*/cell.json")):
        for task, secs in rec["phases"].items():
            phases.setdefault(task, []).append(secs)
    return wall, start_times(results), {k: statistics.median(v) for k, v in phases.items()}


def start_times(folder: Path) -> list[float]:
    """Each Flent data file's test start (its TIME metadata), in order."""
    out = []
    for f in folder.rglob("*.flent.gz"):
        meta = load_flent(f)["metadata"]
        out.append(datetime.fromisoformat(meta["TIME"].rstrip("Z")).timestamp())
    return sorted(out)


def testbed_script(tag: str, up: bool) -> str:
    ns = {h: f"flb-{tag}-{h}" for h in ("cli", "mid", "srv")}
    if not up:
        return "\n".join(f'pids=$(ip netns pids {n}); [ -n "$pids" ] && kill -KILL $pids; ip netns del {n}'
                         for n in ns.values())
    return textwrap.dedent(f"""\
        set -e
        for n in {ns['cli']} {ns['mid']} {ns['srv']}; do ip netns add $n; ip -n $n link set lo up; done
        ip link add name cli.r netns {ns['cli']} type veth peer name mid.l netns {ns['mid']}
        ip link add name srv.l netns {ns['srv']} type veth peer name mid.r netns {ns['mid']}
        ip -n {ns['cli']} addr add 10.72.1.1/24 dev cli.r
        ip -n {ns['mid']} addr add 10.72.1.2/24 dev mid.l
        ip -n {ns['mid']} addr add 10.72.2.2/24 dev mid.r
        ip -n {ns['srv']} addr add 10.72.2.1/24 dev srv.l
        for p in {ns['cli']}:cli.r {ns['mid']}:mid.l {ns['mid']}:mid.r {ns['srv']}:srv.l; do
            ip netns exec ${{p%%:*}} ethtool -K ${{p##*:}} tso off gso off gro off
            ip -n ${{p%%:*}} link set ${{p##*:}} up
        done
        ip -n {ns['cli']} route add 10.72.2.0/24 via 10.72.1.2
        ip -n {ns['srv']} route add 10.72.1.0/24 via 10.72.2.2
        ip netns exec {ns['mid']} sysctl -qw net.ipv4.ip_forward=1
        ip netns exec {ns['srv']} setsid netserver -D -L 10.72.2.1 -p 12865 </dev/null >/dev/null 2>&1 &
        until ip netns exec {ns['srv']} ss -ltnH 'sport = :12865' | grep -q .; do sleep 0.1; done
        """)


def batch_file(folder: Path, tag: str, length: int) -> Path:
    """Flent's batch file: the cells, and per cell the hooks fl's roles run."""
    ns = {h: f"flb-{tag}-{h}" for h in ("cli", "mid", "srv")}
    out = folder / "batch"
    args = "\n".join(textwrap.dedent(f"""\
        [Arg::{cc}-{rate}]
        rate = {rate}
        cc = {cc}
        test_parameters = cc_algos={cc},{cc}
        """) for rate, cc in CELLS)
    pre = " && ".join([
        f"ip netns exec {ns['cli']} ip tcp_metrics flush all; ip netns exec {ns['srv']} ip tcp_metrics flush all",
        *[f"(tc -n {ns['mid']} qdisc del dev {d} root 2>/dev/null; true) && "
          f"tc -n {ns['mid']} qdisc add dev {d} root handle 1: htb default 1 && "
          f"tc -n {ns['mid']} class add dev {d} parent 1: classid 1:1 htb rate ${{rate}} ceil ${{rate}} && "
          f"tc -n {ns['mid']} qdisc add dev {d} parent 1:1 handle 10: pfifo limit 1000" for d in ("mid.l", "mid.r")],
        *[f"ip netns exec {ns[h]} setsid tcpdump -i {d} -n -s 128 -w {out}/${{title}}-{h}.pcap "
          f"</dev/null >{out}/{h}.tcpdump 2>&1 & echo $! > {out}/{h}.pid" for h, d in (("cli", "cli.r"), ("srv", "srv.l"))],
        f"ip netns exec {ns['cli']} setsid sh -c 'while :; do date +%s.%N; ss -tin dst 10.72.2.1; sleep 1; done' "
        f"</dev/null >{out}/${{title}}-cli.ss.log 2>&1 & echo $! > {out}/ss.pid",
        f"until grep -q listening {out}/cli.tcpdump && grep -q listening {out}/srv.tcpdump; do sleep 0.01; done",
    ])
    post = " ; ".join([
        f"kill $(cat {out}/cli.pid) $(cat {out}/srv.pid); kill -- -$(cat {out}/ss.pid)",
        f"while kill -0 $(cat {out}/cli.pid) 2>/dev/null || kill -0 $(cat {out}/srv.pid) 2>/dev/null; do sleep 0.01; done",
        f"xz -T1 -1 -f {out}/${{title}}-cli.pcap {out}/${{title}}-srv.pcap",
        *[f"ip netns exec {ns[h]} sh -c 'tc -s -d qdisc show; tc -s -d class show dev {d}; ip -s link; "
          f"ip tcp_metrics show; sysctl net.ipv4.tcp_congestion_control net.ipv4.tcp_ecn' >> {out}/${{title}}-teardown.log"
          for h, d in (("cli", "cli.r"), ("mid", "mid.r"), ("srv", "srv.l"))],
    ])
    path = folder / "bench.batch"
    path.write_text(textwrap.dedent(f"""\
        [Batch::peer]
        test_name = tcp_2up
        title = ${{cc}}-${{rate}}
        filename_extra = ${{cc}}-${{rate}}
        hosts = 10.72.2.1
        length = {length}
        step_size = 0.05
        socket_stats = yes
        extended_metadata = yes
        netperf_control_port = 12865
        output_path = {out}
        for_cells = {", ".join(f"{cc}-{rate}" for rate, cc in CELLS)}
        commands = hooks, teardown
        repetitions = 1
        pause = 0

        [Command::hooks]
        type = pre
        essential = yes
        exec = {pre}

        [Command::teardown]
        type = post
        exec = {post}

        """) + args)
    return path


def run_batch(folder: Path, length: int) -> tuple[float, list[float]]:
    tag = secrets.token_hex(3)
    (folder / "batch").mkdir()
    batch = batch_file(folder, tag, length)
    t0 = time.monotonic()
    try:
        subprocess.run(["sh", "-c", testbed_script(tag, True)], check=True, capture_output=True)
        p = subprocess.run(["ip", "netns", "exec", f"flb-{tag}-cli", "flent", "-B", str(batch), "-b", "peer", "--batch-no-shuffle"],
                           capture_output=True, text=True, cwd=folder)
    finally:
        subprocess.run(["sh", "-c", testbed_script(tag, False)], capture_output=True)
    wall = time.monotonic() - t0
    starts = start_times(folder / "batch")
    if p.returncode != 0 or len(starts) != len(CELLS):
        sys.exit(f"flent -B failed ({len(starts)} data files):\n{p.stdout}{p.stderr}")
    return wall, starts


def per_cell(wall: float, starts: list[float], total: int) -> tuple[list[float], float]:
    cycles = [b - a - total for a, b in pairwise(starts)]
    return cycles, (wall - len(starts) * total) / len(starts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--length", type=int, default=10)
    a = ap.parse_args()
    if shutil.which("flent") is None:
        sys.exit("needs flent (./install.sh)")
    total = a.length + LEAD
    fl_cycles, fl_whole, batch_cycles, batch_whole, phases = [], [], [], [], {}
    for r in range(a.rounds):
        for who in ("fl", "batch"):
            with tempfile.TemporaryDirectory(prefix="fl-bench-") as tmp:
                if who == "fl":
                    wall, starts, phases = run_fl(Path(tmp), a.length)
                    cycles, whole = per_cell(wall, starts, total)
                    fl_cycles += cycles
                    fl_whole.append(whole)
                else:
                    wall, starts = run_batch(Path(tmp), a.length)
                    cycles, whole = per_cell(wall, starts, total)
                    batch_cycles += cycles
                    batch_whole.append(whole)
            print(f"round {r + 1} {who:<5}: wall {wall:6.1f} s for {len(starts)} cells; overhead per cell between "
                  f"tests {' '.join(f'{c:.2f}' for c in cycles)} s; whole command {whole:.2f} s/cell", flush=True)
    fl_med, batch_med = statistics.median(fl_cycles), statistics.median(batch_cycles)
    print("\nfl's median seconds per phase of a cell (last round):")
    for task, secs in sorted(phases.items(), key=lambda kv: -kv[1]):
        print(f"  {secs:6.2f}  {task}")
    print(f"\noverhead per cell, median between consecutive tests (cycle − {total} s):")
    print(f"  fl          {fl_med:5.2f} s")
    print(f"  Flent batch {batch_med:5.2f} s")
    print(f"  ratio fl / Flent batch: {fl_med / batch_med:.2f}")
    print(f"whole command (testbed built and removed), per cell: fl {statistics.median(fl_whole):.2f} s, "
          f"Flent batch {statistics.median(batch_whole):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
