"""A cell folder's file names are defined once (results/cell_folder.py), and a run folder's
(results/run_folder.py): no module of fl's spells one of them itself, so a writer and its
reader cannot drift apart."""
from __future__ import annotations

import re
from pathlib import Path

from flharness.results import cell_folder, run_folder

PACKAGE = Path(cell_folder.__file__).parents[1]
NAMES = [v for k, v in vars(cell_folder).items() if k.isupper() and isinstance(v, str) and "." in v and "*" not in v]
PATTERNS = [r"\.pcap(\.xz)?[\"']", r"\.ss\.log[\"']", r"\.flent\.gz[\"']", r"scheme-\{[^}]*\}\.\{[^}]*\}\.(log|json)"]


def test_no_module_spells_a_cell_folders_file_name():
    assert {"cell.json", "metrics.json", "teardown.log", "mid.qdisc.log", "probe.json.gz"} <= set(NAMES)
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "cell_folder.py":
            continue
        text = path.read_text()
        found += [f"{path.relative_to(PACKAGE)}: {n}" for n in NAMES if f'"{n}"' in text or f"'{n}'" in text]
        found += [f"{path.relative_to(PACKAGE)}: {m.group(0)}" for p in PATTERNS for m in re.finditer(p, text)]
    assert found == []


def test_no_module_spells_a_run_folders_file_name():
    names = [v for k, v in vars(run_folder).items() if k.isupper() and isinstance(v, str) and "." in v]
    assert {"run.json", "fl.log", "debug.log", "scenario.yml", "dataset.csv", "README.md", "index.html"} <= set(names)
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name in ("run_folder.py", "log.py"):  # log.py defines debug.log, run_folder.py names it
            continue
        text = path.read_text()
        found += [f"{path.relative_to(PACKAGE)}: {n}" for n in names if f'"{n}"' in text or f"'{n}'" in text]
        found += [f"{path.relative_to(PACKAGE)}: {m.group(0)}" for m in re.finditer(r"vm-kernel-|/ [\"']charts[\"']", text)]
    assert found == []


def test_flents_exit_status_is_read_from_the_line_the_script_writes():
    """The client's script writes flent.log's first line from the contract's prefix; the
    reader takes only such a line."""
    import subprocess
    line = subprocess.run(["sh", "-c", f'rc=3; echo "{cell_folder.FLENT_EXIT}$rc"'], capture_output=True,
                          text=True, check=True).stdout.splitlines()[0]
    assert cell_folder.flent_exit(line) == 3
    assert cell_folder.flent_exit("# command: flent …") is None and cell_folder.flent_exit(cell_folder.FLENT_EXIT) is None


def test_what_a_host_writes_is_fetched_from_a_host_that_keeps_it():
    """A host without the controller's filesystem keeps a cell's files: fetch.yml takes
    those HOST_WRITTEN names (TestbedVars' fl_cell_files), and they cover every file the
    hosts' scripts write into the cell's folder."""
    from fnmatch import fnmatch

    from flharness.testbed.playbook_vars import TestbedVars
    written = [cell_folder.flent_data("c"), cell_folder.FLENT_LOG, cell_folder.UDP_LOG, cell_folder.VIDEO_LOG,
               cell_folder.PROBE, cell_folder.PROBE_LOG, cell_folder.QUEUE_LOG, *cell_folder.CAPTURES,
               *cell_folder.SS_LOGS, cell_folder.scheme_log(1, "sender"), cell_folder.scheme_events(2, "receiver")]
    assert [n for n in written if not any(fnmatch(n, p) for p in cell_folder.HOST_WRITTEN)] == []
    assert not any(fnmatch(n, p) for n in (cell_folder.CELL, cell_folder.METRICS, cell_folder.TEARDOWN_LOG)
                   for p in cell_folder.HOST_WRITTEN)  # fl's own
    assert TestbedVars.model_fields["fl_cell_files"].default == list(cell_folder.HOST_WRITTEN)
    fetch = (Path(__file__).parents[2] / "roles" / "cell" / "tasks" / "fetch.yml").read_text()
    assert 'patterns: "{{ fl_cell_files }}"' in fetch


def test_the_queue_samplers_header_is_the_contracts():
    """fl-qdisc-sample (shell) prints QUEUE_DEVICES_HEADER then its NAME=DEV arguments
    (queue_device's), which queue_devices reads back."""
    from flharness.programs import HOST_DIR
    assert f'echo "{cell_folder.QUEUE_DEVICES_HEADER}$*"' in (HOST_DIR / "fl-qdisc-sample").read_text()
    line = cell_folder.QUEUE_DEVICES_HEADER + " ".join([cell_folder.queue_device("up", "mid.r"), cell_folder.queue_device("down", "mid.l")])
    assert cell_folder.queue_devices(line) == [("up", "mid.r"), ("down", "mid.l")]
    assert cell_folder.queue_devices("# 1764670000.1") is None
