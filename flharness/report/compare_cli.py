"""`fl compare A B`: collect both runs (metrics computed where missing), compare them,
write the page and print the summary."""
from __future__ import annotations

from pathlib import Path

from .. import REPO
from ..errors import FlError
from ..scenario.values import check_name
from . import compare_page
from .collect import collect
from .compare import compare_runs, output_dir, summary_lines


def run_folder(spec: str, results: Path) -> Path:
    """A run label (results/LABEL/) or a path to a run folder."""
    if "/" in spec:
        return Path(spec)
    try:
        check_name(spec, "run name")
    except ValueError as e:
        raise FlError(str(e)) from None
    return results / spec


def compare_command(a: str, b: str, out: str | None, results: Path, jobs: int | None, template_dir: Path = REPO) -> int:
    run_a, run_b = (collect(run_folder(x, results), jobs) for x in (a, b))
    if run_a.dir.resolve() == run_b.dir.resolve():
        raise FlError(f"{a} and {b} are the same run folder")
    if out is not None:
        try:
            check_name(out, "--out")
        except ValueError as e:
            raise FlError(str(e)) from None
    cmp = compare_runs(run_a, run_b)
    if not cmp.matched:
        raise FlError(f"{run_a.dir} and {run_b.dir} have no cell in common (cells are matched by scenario and cell name)")
    page = compare_page.write(cmp, results / out if out else output_dir(results, run_a.name, run_b.name), template_dir)
    print("\n".join(summary_lines(cmp)))
    print(f"page: {page}/README.md, {page}/index.html")
    return 0
