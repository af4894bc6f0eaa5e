#!/usr/bin/env python3
"""`fl plot` on a generated tree of N cells (default 120, copies of one real cell under
distinct coordinates), against the baseline of Flent plotting that one cell alone in
the same run. Prints, per cell, the wall time of a fresh `fl plot` (metrics, plots,
charts, index) and its ratio to the baseline; the CPU (core-seconds, every process of
it) of a fresh `fl plot` of cells whose metrics are current, as after `fl run`, and how
much of it is not Flent's own plotting; the time of a second `fl plot` with nothing
changed; and the cell's metrics alone (captures, one-way delay, socket and queue
samples) on one core.

    .venv/bin/python bench/plot.py RESULTS/RUN/SCENARIO/CELL [--cells N]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def generate(cell: Path, root: Path, n: int) -> None:
    """RUN/bench/<cell>-<i>/ with the cell's files and a renamed cell.json."""
    run = root / "bench-run"
    scen = run / "bench"
    scen.mkdir(parents=True)
    shutil.copy(cell.parent / "scenario.yml", scen / "scenario.yml")
    (run / "run.json").write_text((cell.parent.parent / "run.json").read_text())
    rec = json.loads((cell / "cell.json").read_text())
    for i in range(n):
        name = f"{cell.name}-{i:03d}"
        d = scen / name
        d.mkdir()
        for f in cell.iterdir():
            if f.name.startswith((".", "metrics", "plot")) or f.suffix == ".svg":
                continue
            target = d / (f"{name}.flent.gz" if f.name.endswith(".flent.gz") else f.name)
            target.symlink_to(f.resolve()) if f.suffix in (".xz", ".gz") else shutil.copy(f, target)
        (d / "cell.json").write_text(json.dumps({**rec, "cell": name}))


def metrics_alone(cell: Path, rounds: int = 3) -> tuple[float, float, int]:
    """The fastest of ROUNDS in-process analyses of CELL (no cache, one core), the part of
    it that reads the captures (pcap.load: packets, connections; one-way delay has its own
    budget, bench/owd.py), and how many packets those hold."""
    sys.path.insert(0, str(REPO))
    from flharness.analysis import capture, pcap
    from flharness.analysis.metrics import Settings, analyse_folder
    from flharness.results import cell_folder, files
    from flharness.results.cell_record import CellRecord

    record = files.read(CellRecord, cell / cell_folder.CELL)
    best, reading = float("inf"), float("inf")
    for _ in range(rounds):
        capture.forget()
        t0 = time.process_time()
        analyse_folder(cell, record, Settings())
        best = min(best, time.process_time() - t0)
        capture.forget()
        t0 = time.process_time()
        loaded = [pcap.load(p) for p in sorted(cell.glob("*.pcap*"))]
        reading = min(reading, time.process_time() - t0)
    return best, reading, sum(len(pk.ts) for pk, _ in loaded)


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall time and CPU time (user + system, ARGV and every process it waited for)."""
    before, t0 = os.times(), time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(p.stdout + p.stderr)
    after = os.times()
    return time.monotonic() - t0, (after.children_user - before.children_user) + (after.children_system - before.children_system)


def forget_drawings(root: Path) -> None:
    """Remove every figure and chart of the generated run (metrics stay)."""
    for p in root.rglob("*.svg"):
        p.unlink()
    for p in root.rglob(".*.key"):
        p.unlink()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("cell", type=Path)
    ap.add_argument("--cells", type=int, default=120)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fl-bench-plot-") as tmp:
        root = Path(tmp)
        generate(args.cell.resolve(), root, args.cells)
        data = next(args.cell.glob("*.flent.gz"))
        baseline, flent_cpu = timed(["flent", "-i", str(data), "-p", "tcp_delivery_with_rtt", "-o", str(root / "b.svg")])
        fl = [sys.executable, str(REPO / "fl"), "plot", "--run", "bench-run", "--results", str(root)]
        fresh, _ = timed(fl)
        again, _ = timed(fl)
        forget_drawings(root)
        _, drawn_cpu = timed(fl)
    n = args.cells
    print(f"baseline (flent plots one cell alone): {baseline:.2f} s, {flent_cpu:.2f} core-s")
    print(f"fl plot, {n} cells, fresh: {fresh:.1f} s = {fresh / n:.2f} s per cell "
          f"= {fresh / n / baseline:.2f} × baseline (parallel over the cores)")
    print(f"fl plot again, nothing changed: {again:.2f} s = {again / baseline:.2f} × baseline")
    print(f"fl plot, metrics current (as after fl run), every figure drawn: {drawn_cpu / n:.2f} core-s per cell, "
          f"of which {(drawn_cpu - n * flent_cpu) / n:.2f} core-s besides Flent's own plotting "
          f"({drawn_cpu / n / flent_cpu:.2f} × Flent plotting the cell alone)")
    total, reading, packets = metrics_alone(args.cell.resolve())
    print(f"the cell's metrics alone: {total:.2f} s of CPU on one core; reading its captures "
          f"({packets / 1e3:.0f} k packets) {reading:.2f} s, everything else {total - reading:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
