"""The results contract: cell.json, metrics.json and run.json through their models.

Results folder semantics (atomic commit; a completed cell is never replaced by a
failure); every cell of every scenario fl ships round-trips through cell.json to the
configuration it hashed; files of another version give one line naming the file (an
old metrics.json is recomputed instead); backends of both VM shapes validate; unknown
keys are refused."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from flharness.analysis import cache
from flharness.analysis.metrics import Settings
from flharness.cells import expand
from flharness.results import cell_folder, files
from flharness.results.cell_metrics import METRICS_VERSION, CellMetrics
from flharness.results.cell_record import CELL_VERSION, Backend, BottleneckPorts, CellRecord, Coordinate, Endpoints
from flharness.results.cell_series import CellSeries
from flharness.results.run_record import Invocation, Outcome, RunRecord
from flharness.results.store import ScenarioFolder
from flharness.scenario import load_scenario
from flharness.scenario.load import SCENARIO_DIR, find_scenario, list_scenarios

TESTS = Path(__file__).parents[1]
CONFIG = {"format": 1, "test": "tcp_1up", "length": 10, "step_size": 0.2, "repetition": 1,
          "flows": [{"direction": "up", "cc": "cubic", "rtt": "0ms", "tos": None}],
          "bottleneck": {d: {"rate": "10mbit", "rate_bps": 1e7, "qdisc": "pfifo limit 100", "self_shaping": False}
                         for d in ("up", "down")}, "sysctls": {}}
HOST = {"kind": "host", "testbed": "netns", "inventory": "/repo/inventory.ini", "clock": "real"}
VM = {"kind": "vm", "testbed": "netns", "inventory": "/repo/inventory.ini", "clock": "virtual",
      "kernel": "/boot/vmlinuz-6.1.0-9-amd64", "release": "6.1.0-9-amd64", "accel": "tcg", "cpus": 1, "memory": "1G"}


def record(status, cell="c1", h="h1"):
    return CellRecord(scenario="s", cell=cell, config_hash=h, status=status, config=CONFIG, backend=HOST)


def attempt(store, status, payload, h="h1"):
    partial = store.new_partial("c1")
    (partial / "data.txt").write_text(payload)
    return store.commit(partial, record(status, h=h))


def test_ok_is_kept_when_a_later_attempt_fails(tmp_path):
    store = ScenarioFolder(tmp_path / "run" / "s")
    attempt(store, "ok", "good")
    for status in ("failed", "interrupted", "skipped"):
        aside = attempt(store, status, "bad", h="h2")
        assert aside.parent.name == ".attempts" and (aside / "cell.json").is_file()
    assert (store.cell_dir("c1") / "data.txt").read_text() == "good"
    assert store.record("c1").status == "ok"
    assert store.is_done("c1", "h1") and not store.is_done("c1", "h2")
    assert not (store.root / ".partial" / "c1").exists()


def test_newer_ok_replaces_and_failures_replace_failures(tmp_path):
    store = ScenarioFolder(tmp_path / "s")
    attempt(store, "failed", "first")
    attempt(store, "failed", "second")
    assert (store.cell_dir("c1") / "data.txt").read_text() == "second"
    attempt(store, "ok", "third", h="h3")
    attempt(store, "ok", "fourth", h="h4")
    assert (store.cell_dir("c1") / "data.txt").read_text() == "fourth"
    assert store.record("c1").files == ["cell.json", "data.txt"]
    assert [r.cell for r in store.records()] == ["c1"]


def test_corrupt_cell_json_counts_as_not_done(tmp_path):
    store = ScenarioFolder(tmp_path / "s")
    attempt(store, "ok", "x")
    (store.cell_dir("c1") / "cell.json").write_text("{not json")
    assert store.record("c1") is None and not store.is_done("c1", "h1")


def _all_cells():
    paths = [find_scenario(n) for n in list_scenarios(SCENARIO_DIR)] + sorted((TESTS / "scenarios").glob("*.yml"))
    return [c for p in paths for c in expand(load_scenario(p), p)]


def test_every_shipped_cell_round_trips_to_the_configuration_it_hashed(tmp_path):
    """Every feature of every scenario (netem, rate schedules, tunnels, per-flow ECN and
    start delays, sysctls, client qdiscs, UDP): cell.json's config is the very
    configuration that was hashed into config_hash, keys left out where a feature is
    unused, and the coordinates come back as written."""
    from flharness.cells.resolve import config_hash
    cells = _all_cells()
    assert len(cells) > 500
    path = tmp_path / "cell.json"
    for cell in cells:
        files.write(path, CellRecord(scenario=cell.scenario, cell=cell.name, config_hash=cell.config_hash, status="ok",
                                     coordinates=cell.coordinates(), config=cell.config, backend=HOST))
        written = json.loads(path.read_text())
        assert written["config"] == cell.config.model_dump(mode="json") and written["coordinates"] == cell.coordinates(), cell.name
        read = files.read(CellRecord, path).config
        assert read == cell.config and config_hash(read) == cell.config_hash, cell.name


def test_a_record_round_trips_with_checks_endpoints_ports_and_a_vm_backend(tmp_path):
    rec = record("ok")
    rec.backend = Backend.model_validate(VM).on_testbed("fl-1a2b3c", "vm2")
    rec.endpoints = Endpoints(server="10.71.2.1", netperf_port=23456)
    rec.ports = BottleneckPorts(up="mid.r", down="mid.l")
    rec.checks.flent_exit, rec.checks.late_start_s = 0, {"TCP upload::1": 3.5}
    files.write(tmp_path / "cell.json", rec)
    again = files.read(CellRecord, tmp_path / "cell.json")
    assert again == rec and again.endpoints.netperf_port == 23456
    written = json.loads((tmp_path / "cell.json").read_text())
    assert written["checks"] == {"flent_exit": 0, "late_start_s": {"TCP upload::1": 3.5}}  # only what was checked
    assert written["backend"]["testbed_label"] == "vm2" and written["version"] == CELL_VERSION
    assert written["ports"] == {"up": "mid.r", "down": "mid.l"} and again.ports.by_direction() == written["ports"]
    assert "testbed_label" not in record("ok").backend.on_testbed("fl-1", "").model_dump()  # one testbed: no label


def test_a_record_of_this_version_without_ports_reads_as_an_older_fl_wrote_it(tmp_path):
    """cell.json's ports came without a new version: a record written before them (the
    corpus, users' results) reads, with none (the analysis takes its queue samples' header)."""
    older = record("ok").model_dump(mode="json")
    del older["ports"]
    again = files.read(CellRecord, _old(tmp_path / "cell.json", older))
    assert again.ports is None and again.version == CELL_VERSION
    with pytest.raises(ValidationError, match="down"):
        BottleneckPorts.model_validate({"up": "mid.r"})


def test_both_vm_backend_shapes_validate_and_unknown_keys_do_not():
    """VmConfig.describe() with or without a root image (and the testbed's id and label)."""
    with_image = Backend.model_validate({**VM, "image": "debian-12", "root": "/var/lib/fl/images/debian-12",
                                         "testbed_id": "fl-1a2b3c", "testbed_label": "vm1"})
    assert with_image.image == "debian-12" and not Backend.model_validate(VM).image
    assert Backend.model_validate({**VM, "image": None, "root": None}).model_dump()["root"] is None
    with pytest.raises(ValidationError, match="ramdisk"):
        Backend.model_validate({**VM, "ramdisk": "/boot/initrd"})
    with pytest.raises(ValidationError, match="testbed"):
        Backend.model_validate({**HOST, "testbed": "docker"})


def _old(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_a_cell_record_of_another_version_is_one_clear_error(tmp_path):
    """An unversioned cell.json (an older fl) and a newer one: one line naming the file
    and what to do, from the store (fl run, fl list) as from the report (fl plot)."""
    store = ScenarioFolder(tmp_path / "s")
    attempt(store, "ok", "x")
    path = store.cell_dir("c1") / "cell.json"
    current = json.loads(path.read_text())
    _old(path, {k: v for k, v in current.items() if k != "version"})
    with pytest.raises(files.VersionError) as e:
        store.is_done("c1", "h1")
    assert str(e.value) == (f"{path}: a cell record with no version (written by an older fl); this fl reads "
                            f"version {CELL_VERSION}: run into another folder (--run LABEL), or read it with the fl that "
                            "wrote it")
    _old(path, {**current, "version": CELL_VERSION + 1, "new_key": 1})
    with pytest.raises(files.VersionError, match=rf"cell.json: a cell record with version {CELL_VERSION + 1}; this fl reads "
                                                 rf"version {CELL_VERSION}"):
        files.read(CellRecord, path)


def test_a_forced_failure_never_replaces_an_old_completed_cell(tmp_path):
    """--force over an older fl's completed cell: a failed attempt goes aside."""
    store = ScenarioFolder(tmp_path / "s")
    attempt(store, "ok", "old")
    path = store.cell_dir("c1") / "cell.json"
    _old(path, {"scenario": "s", "cell": "c1", "status": "ok", "config": {}})
    assert attempt(store, "failed", "new").parent.name == ".attempts"
    assert (store.cell_dir("c1") / "data.txt").read_text() == "old"


def test_an_invalid_file_names_the_key(tmp_path):
    path = _old(tmp_path / "cell.json", {**record("ok").model_dump(mode="json"), "status": "finished"})
    with pytest.raises(files.InvalidFile, match=r"cell.json: not a valid cell record: status: Input should be 'ok'"):
        files.read(CellRecord, path)


def test_a_run_record_of_another_version_is_one_clear_error(tmp_path):
    path = _old(tmp_path / "run.json", {"run": "default", "invocations": [{"started": 1.0, "scenarios": ["demo"]}]})
    with pytest.raises(files.VersionError) as e:
        files.read(RunRecord, path)
    assert str(e.value).startswith(f"{path}: a run record with no version") and "--run LABEL" in str(e.value)
    assert "\n" not in str(e.value)


def test_an_invocation_is_completed_in_place_and_a_killed_one_has_no_end(tmp_path):
    entry = Invocation(started=100.0, scenarios=["demo"], kernel="6.1", only=[], force=False,
                       planned={"run": 12, "skip": 0, "done": 0}, fl={"version": "0.1.0", "commit": "abc", "dirty": False},
                       controller={"hostname": "h", "kernel": "6.1", "python": "3.11"}, testbeds={"": "fl-1"},
                       tools={"flent": "2.1.1", "wg": None}, backend=HOST)
    run = RunRecord(run="default")
    run.add(entry)
    files.write(tmp_path / "run.json", run)
    assert "ended" not in json.loads((tmp_path / "run.json").read_text())["invocations"][0]
    run = files.read(RunRecord, tmp_path / "run.json")
    done = run.invocations[-1].model_copy(update={"ended": 160.0, "interrupted": False,
                                                  "outcome": Outcome(ok=12, failed=0, skipped=0, interrupted=0)})
    run.add(done)
    run.add(entry.model_copy(update={"started": 200.0}))
    files.write(tmp_path / "run.json", run)
    written = json.loads((tmp_path / "run.json").read_text())["invocations"]
    assert [i.get("ended") for i in written] == [160.0, None] and written[0]["outcome"]["ok"] == 12


def test_an_old_metrics_file_is_recomputed(tmp_path):
    """metrics.json is a cache: another version, or other inputs, or without the series
    written with it, and it is stale."""
    (tmp_path / "cell.json").write_text("{}")
    key = cache.fingerprint(tmp_path, Settings())
    current = CellMetrics(cell="c1", key=key)
    files.write(tmp_path / "metrics.json", current)
    assert cache.cached(tmp_path, Settings()) is None  # no series.npz
    CellSeries().write(tmp_path / cell_folder.SERIES)
    assert cache.cached(tmp_path, Settings()) == current
    assert cache.cached(tmp_path, Settings(steady_window=20)) is None
    _old(tmp_path / "metrics.json", {**current.model_dump(mode="json"), "version": METRICS_VERSION - 1})
    assert cache.cached(tmp_path, Settings()) is None
    (tmp_path / "metrics.json").write_text(current.model_dump_json()[:-20])  # cut short
    assert cache.cached(tmp_path, Settings()) is None


def test_coordinates_keep_labels_and_typed_values():
    coords = TypeAdapter(dict[str, Coordinate]).validate_python(
        {"rate": {"label": "10mbit", "value": {"up": "10mbit", "down": "10mbit", "up_bps": 1e7, "down_bps": 1e7}},
         "repetition": {"label": "r1", "value": 1}})
    rec = record("ok").model_copy(update={"coordinates": coords})
    assert rec.label("rate") == "10mbit" and rec.label("tunnel") is None
    assert coords["rate"].value["up_bps"] == 1e7
