"""A damaged file costs its cell, never the report: `fl plot`'s collect, index, dataset and
JUnit over a run of two copies of the golden cell (tests/fixtures/golden/), one of them
damaged, by hand (a truncated capture, a truncated Flent file, a broken cell.json or
scenario.yml) and by Hypothesis (each kind of file cut or overwritten at generated
offsets). The intact cell is always reported; the damaged one is either analysed as it
is (damage the analysis does not read) or unreadable with its file and reason."""
from __future__ import annotations

import csv
import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flharness.report.collect import UNREADABLE, collect
from flharness.report.pipeline import build
from flharness.results import files
from flharness.results.run_record import RunRecord

GOLDEN = Path(__file__).parents[1] / "fixtures" / "golden"
SCENARIO = Path(__file__).parents[1] / "fixtures" / "golden.yml"
CELL = "cubic-vs-reno-pfifo_20-4mbit-0ms"
KINDS = ["cell.json", "cli.pcap.xz", "srv.pcap.xz", f"{CELL}.flent.gz", "cli.ss.log", "mid.qdisc.log", "teardown.log"]
#: Hypothesis's examples per kind: a fixed number with a seed in CI, more locally with FL_FUZZ_EXAMPLES.
EXAMPLES = int(os.environ.get("FL_FUZZ_EXAMPLES", "4"))


@pytest.fixture(scope="module")
def analysed(tmp_path_factory) -> Path:
    """A run folder with the golden cell in two scenarios, 'intact' and 'damaged', its
    metrics computed once (the copies keep their files' times, so they stay current)."""
    run = tmp_path_factory.mktemp("golden-run") / "run"
    for name in ("intact", "damaged"):
        (run / name).mkdir(parents=True)
        shutil.copy(SCENARIO, run / name / "scenario.yml")
        shutil.copytree(GOLDEN, run / name / CELL)
    files.write(run / "run.json", RunRecord(run="run"))
    collect(run, workers=1)
    return run


@pytest.fixture
def make_run(analysed):
    def copy(root: Path) -> Path:
        shutil.copytree(analysed, root / "run")
        return root / "run"
    return copy


def damaged(run: Path, name: str) -> Path:
    return run / "damaged" / CELL / name


def cut(path: Path, keep: float) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def test_a_truncated_capture_costs_its_cell_and_names_the_file(tmp_path, make_run):
    run = make_run(tmp_path)
    cut(damaged(run, "srv.pcap.xz"), 0.5)
    result = collect(run, workers=1)
    intact, broken = (s.cells[0] for s in sorted(result.scenarios, key=lambda s: s.name != "intact"))
    assert intact.valid and intact.metrics is not None
    assert broken.status == UNREADABLE and broken.damage.startswith("srv.pcap.xz: Compressed file ended"), broken.damage
    assert result.unreadable_count() == 1


def test_a_truncated_flent_file_costs_its_cell(tmp_path, make_run):
    run = make_run(tmp_path)
    cut(damaged(run, f"{CELL}.flent.gz"), 0.5)
    (broken,) = next(s for s in collect(run, workers=1).scenarios if s.name == "damaged").cells
    assert broken.damage and broken.damage.startswith(f"{CELL}.flent.gz: "), broken.damage


def test_fl_plot_reports_the_rest_and_exits_1(tmp_path, make_run):
    """A broken cell.json, a broken scenario.yml elsewhere: the index, the dataset and the
    JUnit file still come, each naming the unreadable ones; the exit status is 1."""
    run = make_run(tmp_path)
    damaged(run, "cell.json").write_text('{"version": 1, "scenario": ')
    shutil.copytree(run / "intact", run / "lost")
    (run / "lost" / "scenario.yml").write_text("test: [unclosed\n")
    junit = tmp_path / "junit.xml"
    assert build(run, workers=1, junit=junit) == 1
    index = (run / "README.md").read_text()
    assert "**Unreadable** (a file that cannot be read" in index and f"- {CELL}: " in index
    assert "**Unreadable scenarios**" in index and "- lost: " in index and "scenario.yml" in index
    assert "## intact" in index and (run / "index.html").is_file()
    with (run / "dataset.csv").open() as f:
        statuses = {(r["scenario"], r["status"]) for r in csv.DictReader(f)}
    assert ("intact", "ok") in statuses and ("damaged", UNREADABLE) in statuses and ("lost", UNREADABLE) in statuses
    cases = ET.parse(junit).getroot().iter("testcase")
    assert any(c.find("error") is not None and "cell.json" in c.find("error").get("message") for c in cases)


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=EXAMPLES, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keep=st.floats(0, 0.999), garble=st.booleans(), at=st.floats(0, 0.999))
def test_any_damage_to_any_file_costs_at_most_its_cell(tmp_path_factory, make_run, kind, keep, garble, at):
    """KIND cut to KEEP of its bytes, or (GARBLE) 64 bytes overwritten at AT: collect never
    raises, the intact scenario's cell is analysed, the damaged one analysed or unreadable."""
    run = make_run(tmp_path_factory.mktemp("fuzz"))
    path = damaged(run, kind)
    if garble:
        data = bytearray(path.read_bytes())
        i = int(len(data) * at)
        data[i:i + 64] = os.urandom(min(64, len(data) - i))
        path.write_bytes(bytes(data))
    else:
        cut(path, keep)
    result = collect(run, workers=1)
    intact = next(s for s in result.scenarios if s.name == "intact").cells[0]
    assert intact.valid, intact.invalid
    broken = next((s for s in result.scenarios if s.name == "damaged"), None)
    assert broken is not None
    assert broken.cells or broken.unreadable, "the damaged cell vanished"
    for c in broken.cells:
        assert c.metrics is not None or (c.damage and ": " in c.damage), c.damage
    for why in broken.unreadable.values():
        assert "cell.json" in why and "\n" not in why
