#!/usr/bin/env python3
"""Per-cell orchestration overhead of `fl run` on namespaces: wall time of each cell
(cell.json started → ended) minus Flent's own test time (its TOTAL_LENGTH: length plus
lead-in and lead-out), for the demo scenario or any scenario given. Prints the median,
min and max overhead and the ratio wall / Flent time (the baseline: Flent alone).

    .venv/bin/python bench/overhead.py [SCENARIO] [--length SECONDS]
"""
from __future__ import annotations

import argparse
import gzip
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", nargs="?", default="demo")
    ap.add_argument("--length", type=int, default=None, help="override the test length (seconds)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fl-bench-") as tmp:
        scenario = args.scenario
        if args.length:
            src = (REPO / "scenarios" / f"{scenario}.yml").resolve()
            short = Path(tmp) / f"{scenario}.yml"
            short.write_text(f"extends: {src}\nlength: {args.length}\n")
            scenario = str(short)
        results = Path(tmp) / "results"
        t0 = time.monotonic()
        p = subprocess.run([sys.executable, str(REPO / "fl"), "run", scenario, "--run", "bench",
                            "--results", str(results)], capture_output=True, text=True)
        total = time.monotonic() - t0
        if p.returncode != 0:
            print(p.stdout + p.stderr)
            return 1
        rows = []
        for cell_json in sorted(results.glob("bench/*/*/cell.json")):
            rec = json.loads(cell_json.read_text())
            if rec["status"] != "ok":
                continue
            data = json.load(gzip.open(next(cell_json.parent.glob("*.flent.gz")), "rt"))
            flent = float(data["metadata"]["TOTAL_LENGTH"])
            rows.append((rec["cell"], rec["ended"] - rec["started"], flent))
    over = [w - f for _, w, f in rows]
    for name, wall, flent in rows:
        print(f"{name:<40} wall {wall:6.1f} s  flent {flent:5.1f} s  overhead {wall - flent:5.1f} s  ratio {wall / flent:.2f}")
    print(f"\n{len(rows)} cells; overhead per cell: median {statistics.median(over):.1f} s "
          f"(min {min(over):.1f}, max {max(over):.1f}); wall / Flent time: "
          f"{statistics.median([w / f for _, w, f in rows]):.2f} (median); whole run {total:.0f} s "
          f"incl. testbed build and removal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
