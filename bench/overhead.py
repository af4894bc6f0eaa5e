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
        phases: dict[str, list[float]] = {}
        for cell_json in sorted(results.glob("bench/*/*/cell.json")):
            rec = json.loads(cell_json.read_text())
            if rec["status"] != "ok":
                continue
            data = json.load(gzip.open(next(cell_json.parent.glob("*.flent.gz")), "rt"))
            flent = float(data["metadata"]["TOTAL_LENGTH"])
            rows.append((rec["cell"], rec["ended"] - rec["started"], flent,
                         next((v for k, v in rec.get("phases", {}).items() if k.startswith("flent : Run Flent")), flent)))
            for task, secs in rec.get("phases", {}).items():
                phases.setdefault(task, []).append(secs)
    over = [w - f for _, w, f, _ in rows]
    over_proc = [w - p for _, w, _, p in rows]
    print("median seconds per phase (Ansible task of the cell playbook; Flent runs in 'Run Flent'):")
    for task, secs in sorted(phases.items(), key=lambda kv: -statistics.median(kv[1])):
        print(f"  {statistics.median(secs):6.2f}  {task}")
    for name, wall, flent, proc in rows:
        print(f"{name:<40} wall {wall:6.1f} s  test {flent:5.1f} s  flent process {proc:5.1f} s  "
              f"overhead {wall - flent:5.1f} s  ratio {wall / flent:.2f}")
    print(f"\n{len(rows)} cells; overhead per cell (wall − Flent's test time): median "
          f"{statistics.median(over):.1f} s (min {min(over):.1f}, max {max(over):.1f}); of which outside "
          f"the Flent process (wall − its run time): median {statistics.median(over_proc):.1f} s; "
          f"wall / test time {statistics.median([w / f for _, w, f, _ in rows]):.2f} (median); "
          f"whole run {total:.0f} s incl. testbed build and removal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
