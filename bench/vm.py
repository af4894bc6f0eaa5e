#!/usr/bin/env python3
"""The VM backend's throughput on the virtual clock, in one run: boot to the first cell,
each cell's wall time against Flent's total length (length + its 10 s lead-in/out), and
the speed-up of `--parallel N` VMs over one VM on the same cells.

The cells: tcp_2up at 10 Mbit/s, 10 s, RTT 20 and 40 ms, fq_codel and a 100-packet
FIFO, cubic-vs-cubic and cubic-vs-reno (8 cells). One VM runs them, then N VMs do
(alternating, ROUNDS times); every run starts with its own boot.

    .venv/bin/python bench/vm.py [--parallel 2] [--rounds 1] [--step 0.2]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from flharness.phases import Phase  # noqa: E402

TOTAL = 20.0  # Flent's total length of a 10 s test


def scenario(folder: Path, step: float) -> Path:
    path = folder / "bench-vm.yml"
    path.write_text(textwrap.dedent(f"""\
        description: VM throughput (bench/vm.py)
        test: tcp_2up
        length: 10
        step_size: {step}
        rate: 10mbit
        matrix:
          rtt: [20ms, 40ms]
          qdisc: [fq_codel, pfifo limit 100]
          cc: [cubic-vs-cubic, cubic-vs-reno]
        """))
    return path


def run(folder: Path, step: float, parallel: int, target: str = "auto", only: list[str] | None = None) -> dict:
    """One `fl run --vm TARGET`: wall time, boot to the first cell, per-cell walls and phases."""
    results = folder / f"results-{parallel}-{target}"
    argv = [sys.executable, str(REPO / "fl"), "run", str(scenario(folder, step)), "--vm", target, "--vm-accel", "tcg",
            *[f"--only={o}" for o in only or []],
            "--vm-clock", "virtual", "--results", str(results), *(["--parallel", str(parallel)] if parallel > 1 else [])]
    t0 = time.monotonic()
    first = None
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if first is None and "] " in line and " … (run ETA" in line:
            first = time.monotonic() - t0
    wall = time.monotonic() - t0
    if proc.wait() != 0:
        sys.exit("fl run failed:\n" + "".join(lines))
    recs = [json.loads(p.read_text()) for p in results.glob("default/*/*/cell.json")]
    return {"wall": wall, "boot": first, "cells": [r["ended"] - r["started"] for r in recs],
            "flent": [r["phases"].get(Phase.FLENT.value, 0) for r in recs], "n": len(recs)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--step", type=float, default=0.2, help="Flent's step size (its sampling costs most)")
    a = ap.parse_args()
    serial, parallel = [], []
    for r in range(a.rounds):
        for n, into in ((1, serial), (a.parallel, parallel)):
            with tempfile.TemporaryDirectory(prefix="fl-bench-vm-") as tmp:
                res = run(Path(tmp), a.step, n)
            into.append(res)
            print(f"round {r + 1}, {n} VM(s): {res['n']} cells in {res['wall']:.0f} s; boot to first cell "
                  f"{res['boot']:.0f} s; cell wall median {statistics.median(res['cells']):.1f} s "
                  f"(Flent {statistics.median(res['flent']):.1f} s of it)", flush=True)
    cell = statistics.median([c for s in serial for c in s["cells"]])
    flent = statistics.median([c for s in serial for c in s["flent"]])
    print(f"\none VM, per cell: wall {cell:.1f} s = {cell / TOTAL:.2f} × Flent's total length ({TOTAL:.0f} s); "
          f"the Flent run itself {flent:.1f} s, fl's setup and collection {cell - flent:.1f} s")
    print(f"target: at most 1.5 × {TOTAL:.0f} + 5 = {1.5 * TOTAL + 5:.0f} s")
    print(f"boot to the first cell: {statistics.median([s['boot'] for s in serial]):.0f} s (one VM), "
          f"{statistics.median([s['boot'] for s in parallel]):.0f} s ({a.parallel} VMs)")
    ratio = statistics.median([p["wall"] / s["wall"] for s, p in zip(serial, parallel)])
    print(f"--parallel {a.parallel}: wall time {ratio:.2f} × one VM's (speed-up {1 / ratio:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
