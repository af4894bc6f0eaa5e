"""The index header's host settings (report/host_settings.py) from recorded cells' teardown
logs (tests/fixtures/corpus), read through CellFiles: each sysctl per host with how many
cells saw each value where they differ, each endpoint's root qdisc; a skipped cell, or
one without a teardown log, counts for nothing."""
from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

from flharness.report.collect import CellResult
from flharness.report.host_settings import host_settings
from flharness.results import files
from flharness.results.cell_record import CellRecord

CORPUS = Path(__file__).parents[1] / "fixtures" / "corpus"
CELLS = ("bidirectional", "ecn-rewrites", "download-rate-schedule")


def _ecn_by_hand(cell: str, host: str) -> str:
    """net.ipv4.tcp_ecn in HOST's part of CELL's teardown log, found by a regex of its own."""
    text = (CORPUS / cell / "teardown.log").read_text()
    part = re.split(r"^=+ (\w+) =+$", text, flags=re.M)
    sections = dict(zip(part[1::2], part[2::2]))
    return re.search(r"^net\.ipv4\.tcp_ecn = (\d+)", sections[host], re.M).group(1)


def test_settings_per_host_with_counts_where_cells_differ(tmp_path):
    cells = [CellResult("s", CORPUS / n, files.read(CellRecord, CORPUS / n / "cell.json")) for n in CELLS]
    empty = tmp_path / "no-log"
    shutil.copytree(CORPUS / CELLS[0], empty, ignore=shutil.ignore_patterns("teardown.log"))
    skipped = files.read(CellRecord, CORPUS / CELLS[1] / "cell.json").model_copy(update={"status": "skipped"})
    cells += [CellResult("s", empty, cells[0].record), CellResult("s", CORPUS / CELLS[1], skipped)]
    got = host_settings(SimpleNamespace(cells=lambda: cells))
    rows = {r["setting"]: r["values"] for r in got["rows"]}
    assert got["hosts"] == ["cli", "mid", "srv"]
    for host in ("cli", "srv"):
        seen = Counter(_ecn_by_hand(c, host) for c in CELLS)
        want = next(iter(seen)) if len(seen) == 1 else "; ".join(f"{v} ({n} of 3 cells)" for v, n in seen.most_common())
        assert rows["net.ipv4.tcp_ecn"][host] == want, rows["net.ipv4.tcp_ecn"]
    assert rows["net.ipv4.ip_forward"] == {"cli": "0", "mid": "1", "srv": "0"}
    assert rows["root qdisc of cli.r"] == {"cli": "noqueue", "mid": "", "srv": ""}
