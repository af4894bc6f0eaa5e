"""A cell's setup.log and teardown.log: what fl's scripts printed on each host (from
Ansible's callback), under a header naming the cell."""
from __future__ import annotations

from pathlib import Path

from ..cells import Cell
from ..hosts import HOSTS
from ..results import cell_folder
from ..teardown_format import host_header
from ..testbed.ansible import PlaybookResult

SETUP = ("# fl setup log: cell {name} ({scenario}), config {hash}\n"
         "# Commands fl ran on each testbed host for this cell, with their output, and the\n"
         "# resulting qdiscs. Generated scripts: setup.sh (flharness/testbed/cell_scripts.py).\n")
TEARDOWN = ("# fl teardown log: cell {name} ({scenario}), config {hash}\n"
            "# State of every testbed host after the test: qdisc/class statistics of fl's\n"
            "# interfaces, firewall counters, tunnel counters, TCP metrics, sysctls, kernel release,\n"
            "# tcpdump's statistics and the rate schedule as applied (collect.sh: flharness/testbed/cell_scripts.py).\n")


def write_cell_logs(cell: Cell, cell_dir: Path, result: PlaybookResult) -> None:
    head = {"name": cell.name, "scenario": cell.scenario, "hash": cell.config_hash}
    out = result.outputs
    setup = {h: out["fl_setup_out"][h] for h in HOSTS if h in out.get("fl_setup_out", {})}
    collected = {h: out.get("fl_collect_out", {}).get(h, "(not collected: host failed)") for h in HOSTS}
    if any(setup.values()):
        (cell_dir / cell_folder.SETUP_LOG).write_text(SETUP.format(**head) + _sections(setup))
    if "fl_collect_out" in out:
        (cell_dir / cell_folder.TEARDOWN_LOG).write_text(TEARDOWN.format(**head) + _sections(collected))


def _sections(per_host: dict[str, str]) -> str:
    return "".join(f"\n{host_header(h)}\n{text.rstrip()}\n" for h, text in per_host.items())
