"""The index header's provenance (report/cell_provenance.py, templates/provenance.md.j2) read
from the cells' own records (tests/fixtures/corpus): a run resumed across fl commits,
kernels and backends names each with its cell count, not only the last invocation's;
skipped cells count for nothing; a run no cell of which reached a testbed shows its last
invocation."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from flharness.report.cell_provenance import cell_provenance
from flharness.report.collect import CellResult
from flharness.report.index import environment
from flharness.results import files
from flharness.results.cell_record import CellRecord
from flharness.results.run_record import RunRecord

CORPUS = Path(__file__).parents[1] / "fixtures" / "corpus"
HOST, VM = "bidirectional", "vm-dualpi2-prague"


def _cell(name: str, **update: object) -> CellResult:
    record = files.read(CellRecord, CORPUS / name / "cell.json")
    return CellResult("s", CORPUS / name, record.model_copy(update=update))


def _run(cells: list[CellResult], invocations: list[dict] | None = None) -> SimpleNamespace:
    return SimpleNamespace(cells=lambda: cells, provenance=RunRecord(run="r", invocations=invocations or []))


def test_each_commit_kernel_and_backend_with_its_cell_count():
    host, vm = _cell(HOST), _cell(VM)
    later = _cell(HOST, fl=host.record.fl.model_copy(update={"commit": "f" * 40, "dirty": True}))
    skipped = _cell(HOST, status="skipped", fl=host.record.fl.model_copy(update={"commit": "e" * 40}))
    got = cell_provenance(_run([host, vm, later, skipped]))
    rows = got["rows"]
    assert got["cells"] == 3
    commits = {host.record.fl.commit, vm.record.fl.commit}
    assert rows["fl"].count("of 3 cells") == len(commits) + 1 and "e" * 40 not in rows["fl"]
    assert f"{'f' * 40} (with uncommitted changes) (1 of 3 cells)" in rows["fl"]
    assert f"{host.record.kernel} (2 of 3 cells)" in rows["kernel"] and f"{vm.record.kernel} (1 of 3 cells)" in rows["kernel"]
    assert "host (netns testbed) (2 of 3 cells)" in rows["backend"]
    assert f"vm ({vm.record.backend.accel}, {vm.record.backend.clock} clock)" in rows["backend"]
    flent = {c.record.tools["flent"] for c in (host, vm)}
    assert ("flent " + next(iter(flent))) in rows["tools"] if len(flent) == 1 else "of 3 cells" in rows["tools"]


def test_one_value_stands_alone_and_the_page_shows_it():
    host = _cell(HOST)
    run = _run([host, _cell(HOST)])
    got = cell_provenance(run)
    assert got["rows"]["fl"] == host.record.fl.commit and got["rows"]["kernel"] == host.record.kernel
    invocation = {"started": 1.0, "scenarios": ["s"], "kernel": "k", "only": [], "force": False,
                  "planned": {"run": 1, "skip": 0, "done": 0}, "fl": {"commit": "a" * 40},
                  "controller": {"hostname": "h", "kernel": "k", "python": "3"}, "testbeds": {},
                  "tools": {}, "backend": host.record.backend.model_dump()}
    run = _run([host, _cell(HOST)], [invocation])
    page = environment().get_template("provenance.md.j2").render(run=run, cell_provenance=got, host_settings={"rows": []})
    assert f"| fl | {host.record.fl.commit} |" in page and "| cells | 2 reached a testbed" in page


def test_no_cell_ran_shows_the_last_invocation():
    invocation = {"started": 1.0, "scenarios": ["s"], "kernel": "6.1", "only": [], "force": False,
                  "planned": {"run": 1, "skip": 0, "done": 0}, "fl": {"commit": "a" * 40},
                  "controller": {"hostname": "h", "kernel": "6.1", "python": "3"}, "testbeds": {},
                  "tools": {"flent": "2.2.0"}, "backend": {"kind": "host", "testbed": "netns", "inventory": "i",
                                                          "clock": "real"}}
    got = cell_provenance(_run([_cell(HOST, status="skipped")], [invocation]))
    assert got == {"cells": 0, "rows": {"fl": "a" * 40, "kernel": "6.1", "backend": "host (netns testbed)",
                                         "tools": "flent 2.2.0"}}
    assert cell_provenance(_run([])) == {}
