#!/usr/bin/env python3
"""KVM against TCG on the same shipped L4S cells, in one run: each cell with
`--vm IMAGE --vm-accel kvm` at real time, then on TCG's virtual clock, then each cell's
wall time over its Flent run (lead-in, test, lead-out) and `fl compare`'s differences of
goodput, delay and fairness between the two (the KVM run its baseline).

    .venv/bin/python bench/kvm.py [--image l4s] [--scenario FILE] [--only CELL …] [--parallel 2]

Where KVM cannot run a stock kernel it says why in one line and exits 77 (nothing
measured). What it measured the last time it ran is in docs/testbeds.md.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from flharness.results.store import ScenarioFolder  # noqa: E402
from flharness.scenario import load_scenario  # noqa: E402
from flharness.testbed.vm import kvm_unusable  # noqa: E402

SCENARIO = REPO / "scenarios" / "quick" / "s1-rttfair.yml"
#: Two cells of the quick study, 90 s each: finding 3's at 10 Mbit/s and finding 4's at
#: 50 Mbit/s (TCG's cost grows with the rate: about 15 and 29 min of a core here).
CELLS = ("cubic-vs-prague-dualpi2_2020-10mbit-20ms-20ms", "prague-vs-prague-dualpi2_2020-50mbit-80ms-20ms")
RUNS = {"kvm": ("kvm", "real"), "tcg": ("tcg", "virtual")}
NOT_MEASURED = 77  # the exit status of a benchmark that could not run here (automake's "skipped")


def fl(*argv: str) -> None:
    subprocess.run([sys.executable, str(REPO / "fl"), *argv], check=True)


def run(results: Path, args: argparse.Namespace, label: str) -> None:
    accel, clock = RUNS[label]
    only = [w for cell in args.only for w in ("--only", cell)]
    fl("run", str(args.scenario), *only, "--vm", args.image, "--vm-accel", accel, "--vm-clock", clock,
       "--parallel", str(args.parallel if label == "tcg" else 1), "--run", label, "--results", str(results))
    fl("plot", "--run", label, "--results", str(results))


def walls(results: Path, label: str, scenario: str) -> dict[str, float]:
    """Per cell that ran: its wall time over its Flent run's length."""
    out = {}
    for rec in ScenarioFolder(results / label / scenario).records():
        if rec.status == "ok" and rec.duration:
            out[rec.cell] = rec.duration / rec.config.flent_s
    return out


def _num(v: float | None, digits: int = 2) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--image", default="l4s")
    ap.add_argument("--scenario", type=Path, default=SCENARIO)
    ap.add_argument("--only", nargs="+", default=list(CELLS), help="cell names or patterns")
    ap.add_argument("--parallel", type=int, default=2, help="TCG VMs at once (KVM runs one: real time)")
    ap.add_argument("--results", type=Path, help="where the two runs go (default: a new temporary folder)")
    args = ap.parse_args(argv)
    if why := kvm_unusable():
        print(f"bench/kvm.py: KVM cannot run a stock kernel here ({why}): nothing measured")
        return NOT_MEASURED
    results = args.results or Path(tempfile.mkdtemp(prefix="fl-bench-kvm-"))
    for label in RUNS:
        run(results, args, label)
    name = load_scenario(args.scenario).name or args.scenario.stem  # the folder a run stores it in
    kvm, tcg = walls(results, "kvm", name), walls(results, "tcg", name)
    print(f"\n{results}: wall time over Flent's run (lead-in, test, lead-out), per cell")
    print("| cell | KVM, real time | TCG, virtual clock | TCG / KVM |\n|---|---:|---:|---:|")
    for cell in sorted(kvm.keys() | tcg.keys()):
        k, t = kvm.get(cell), tcg.get(cell)
        print(f"| {cell} | {_num(k)} | {_num(t)} | {_num(t / k if k and t else None, 1)} |")
    print("\nGoodput, delay and fairness, TCG against KVM (fl compare; its page under the results folder):")
    fl("compare", str(results / "kvm"), str(results / "tcg"), "--out", "compare-kvm-tcg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
