"""bench/kvm.py: one line and exit status 77 where KVM cannot run a stock kernel (this
machine's: the real command, nothing faked); where it can, the two runs it starts and the
table it prints from their records (fl itself replaced by a recorder)."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from flharness.testbed.vm import kvm_unusable

REPO = Path(__file__).parents[2]


def bench():
    spec = importlib.util.spec_from_file_location("bench_kvm", REPO / "bench" / "kvm.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(kvm_unusable() is None, reason="this machine has KVM: the command would run its cells")
def test_without_kvm_it_says_why_in_one_line():
    p = subprocess.run([sys.executable, str(REPO / "bench" / "kvm.py")], capture_output=True, text=True, timeout=60)
    assert p.returncode == 77 and p.stderr == "", (p.returncode, p.stderr)
    assert len(p.stdout.splitlines()) == 1 and "KVM cannot run a stock kernel here (" in p.stdout, p.stdout
    assert kvm_unusable() in p.stdout


def test_with_kvm_it_runs_the_cells_both_ways_and_sets_their_walls_side_by_side(tmp_path, monkeypatch, capsys):
    b = bench()
    calls = []
    monkeypatch.setattr(b, "kvm_unusable", lambda: None)
    template = json.loads(next((REPO / "tests" / "fixtures" / "corpus").glob("*/cell.json")).read_text())

    def fl(*argv: str) -> None:  # records the command; a run leaves a record of its cell
        calls.append(argv)
        if argv[0] == "run":
            label = argv[argv.index("--run") + 1]
            d = tmp_path / label / "s1-rttfair" / "c1"
            d.mkdir(parents=True)
            flent_s = template["config"]["length"] + 2 * template["config"].get("lead", 5)
            rec = {**template, "cell": "c1", "status": "ok", "started": 100.0,
                   "ended": 100.0 + flent_s * (1.0 if label == "kvm" else 2.5)}
            (d / "cell.json").write_text(json.dumps(rec))

    monkeypatch.setattr(b, "fl", fl)
    assert b.main(["--results", str(tmp_path), "--only", "c1"]) == 0
    runs = [c for c in calls if c[0] == "run"]
    assert [c[c.index("--vm-accel") + 1] for c in runs] == ["kvm", "tcg"]
    assert [c[c.index("--vm-clock") + 1] for c in runs] == ["real", "virtual"]
    assert all(c[c.index("--vm") + 1] == "l4s" and c[c.index("--only") + 1] == "c1" for c in runs)
    assert calls[-1][:1] == ("compare",) and calls[-1][1:3] == (str(tmp_path / "kvm"), str(tmp_path / "tcg"))
    assert "| c1 | 1.00 | 2.50 | 2.5 |" in capsys.readouterr().out
