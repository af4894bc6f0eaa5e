"""Results folder semantics: atomic commit; a completed cell is never replaced by a failure."""
from flharness.results import CellRecord, ScenarioResults


def record(status, cell="c1", h="h1"):
    return CellRecord(scenario="s", cell=cell, config_hash=h, status=status)


def attempt(store, status, payload, h="h1"):
    partial = store.new_partial("c1")
    (partial / "data.txt").write_text(payload)
    return store.commit(partial, record(status, h=h))


def test_ok_is_kept_when_a_later_attempt_fails(tmp_path):
    store = ScenarioResults(tmp_path / "run" / "s")
    attempt(store, "ok", "good")
    for status in ("failed", "interrupted", "skipped"):
        aside = attempt(store, status, "bad", h="h2")
        assert aside.parent.name == ".attempts" and (aside / "cell.json").is_file()
    assert (store.cell_dir("c1") / "data.txt").read_text() == "good"
    assert store.record("c1").status == "ok"
    assert store.is_done("c1", "h1") and not store.is_done("c1", "h2")
    assert not (store.root / ".partial" / "c1").exists()


def test_newer_ok_replaces_and_failures_replace_failures(tmp_path):
    store = ScenarioResults(tmp_path / "s")
    attempt(store, "failed", "first")
    attempt(store, "failed", "second")
    assert (store.cell_dir("c1") / "data.txt").read_text() == "second"
    attempt(store, "ok", "third", h="h3")
    attempt(store, "ok", "fourth", h="h4")
    assert (store.cell_dir("c1") / "data.txt").read_text() == "fourth"
    assert store.record("c1").files == ["cell.json", "data.txt"]
    assert [r.cell for r in store.records()] == ["c1"]


def test_corrupt_cell_json_counts_as_not_done(tmp_path):
    store = ScenarioResults(tmp_path / "s")
    attempt(store, "ok", "x")
    (store.cell_dir("c1") / "cell.json").write_text("{not json")
    assert store.record("c1") is None and not store.is_done("c1", "h1")
