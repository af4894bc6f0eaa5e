#!/usr/bin/env python3
"""A kernel-under-test image against the distribution kernel, in one run: `fl image
build` when the image is cached (the no-op every run pays), then the same two cells
(bench/vm.py's tcp_2up at 10 Mbit/s, fq_codel, 20 ms) booted with `--vm` (Debian's kernel
in /boot, this machine's userland) and with `--vm IMAGE`, alternating ROUNDS times:
boot to the first cell and the cells' wall time, as ratios image / distribution kernel.

    .venv/bin/python bench/image.py [--image l4s] [--rounds 2]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vm import REPO, run

CELLS = ["*-fq_codel-10mbit-20ms"]


def cached_build(image: str) -> float:
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, str(REPO / "fl"), "image", "build", image], capture_output=True, text=True)
    if p.returncode != 0 or "up to date" not in p.stdout:
        sys.exit(f"fl image build {image} is not a cached no-op (build it first):\n{p.stdout}{p.stderr}")
    return time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--image", default="l4s")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    print(f"fl image build {a.image}, cached: {statistics.median(cached_build(a.image) for _ in range(3)):.2f} s")
    got: dict[str, list[dict]] = {"auto": [], a.image: []}
    for r in range(a.rounds):
        for target, into in got.items():
            with tempfile.TemporaryDirectory(prefix="fl-bench-image-") as tmp:
                res = run(Path(tmp), 0.2, 1, target, CELLS)
            into.append(res)
            print(f"round {r + 1}, --vm {target}: boot to the first cell {res['boot']:.0f} s, "
                  f"{res['n']} cells, cell wall median {statistics.median(res['cells']):.1f} s", flush=True)
    for what in ("boot", "wall"):
        ratio = statistics.median([i[what] / d[what] for d, i in zip(got["auto"], got[a.image])])
        print(f"{what}: --vm {a.image} takes {ratio:.2f} × the distribution kernel's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
