"""The import graph of flharness: the layers of pyproject.toml's import-linter contract
hold (no stage imports a later one), and no modules import each other in a circle, not
even inside a function or under TYPE_CHECKING (grimp reads every import statement)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[2]


def test_the_pipelines_layers_hold():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    p = subprocess.run([lint, "--no-cache"], cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "0 broken" in p.stdout


def test_no_modules_import_each_other_in_a_circle():
    graph = grimp.build_graph("flharness", cache_dir=None)
    modules = sorted(graph.modules)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for nxt in sorted(graph.find_modules_directly_imported_by(m)):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[m] = 2
        return None

    for m in modules:
        if m not in state and (circle := visit(m)):
            raise AssertionError("import circle: " + " -> ".join(circle))
