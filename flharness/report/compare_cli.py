"""`fl compare RUN…` / `fl compare RUN --by AXIS`: collect the runs (metrics computed where
missing), match their cells, compare them, write the page and print the summary."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import REPO
from ..errors import FlError
from ..scenario.values import valid_name
from . import compare_page
from .collect import collect
from .compare import compare_sides, output_dir, summary_lines
from .matching import axis_sides, check_axes, match, run_sides


@dataclass(frozen=True)
class CompareRequest:
    runs: list[str]  # labels or run folders; the first is the baseline
    by: str | None = None  # an axis within the one run
    baseline: str | None = None  # with by: the value compared against
    match: str | None = None  # comma-separated axes
    ignore: str | None = None
    out: str | None = None  # results/<OUT>/ for the page
    jobs: int | None = None


def run_folder(spec: str, results: Path) -> Path:
    """A run label (results/LABEL/) or a path to a run folder."""
    if "/" in spec:
        return Path(spec)
    return results / valid_name(spec, "run name")


def _axes(text: str | None, option: str) -> list[str]:
    return check_axes([a.strip() for a in text.split(",") if a.strip()], option) if text else []


def _check(req: CompareRequest) -> None:
    """Every argument, before a run is read."""
    if req.by is not None:
        check_axes([req.by], "--by")
        if len(req.runs) != 1:
            raise FlError(f"--by {req.by} compares within one run: name one, not {len(req.runs)}")
    elif len(req.runs) < 2:
        raise FlError("name two runs or more (the first is the baseline), or one run with --by AXIS")
    if req.baseline is not None and req.by is None:
        raise FlError("--baseline chooses a value of --by's axis: give --by too")
    if req.out is not None:
        valid_name(req.out, "--out")


def compare_command(req: CompareRequest, results: Path, template_dir: Path = REPO) -> int:
    _check(req)
    extra, ignore = _axes(req.match, "--match"), _axes(req.ignore, "--ignore")
    runs = [collect(run_folder(x, results), req.jobs) for x in req.runs]
    folders = [r.dir.resolve() for r in runs]
    if len(set(folders)) < len(folders):
        raise FlError(f"{', '.join(req.runs)}: the same run folder named twice")
    sides = axis_sides(runs[0], req.by, req.baseline) if req.by else run_sides(runs)
    cmp = compare_sides(sides, match(sides, extra, ignore, req.by))
    if not cmp.matched:
        keys = "; ".join(f"{sc}: {', '.join(axes) or 'none'}" for sc, axes in cmp.matching.axes.items())
        raise FlError(f"{', '.join(str(r.dir) for r in runs)}: no cell in common (matched by scenario and the key "
                      f"axes {keys}; --match and --ignore change them)")
    page = compare_page.write(cmp, results / req.out if req.out else output_dir(results, sides, req.by), template_dir)
    print("\n".join(summary_lines(cmp)))
    print(f"page: {page}/README.md, {page}/index.html")
    return 0
