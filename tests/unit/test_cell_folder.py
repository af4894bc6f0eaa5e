"""A cell folder's file names are defined once (results/cell_folder.py): no module of fl's
spells one of them itself, so a writer and its reader cannot drift apart."""
from __future__ import annotations

import re
from pathlib import Path

from flharness.results import cell_folder

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


def test_flents_exit_status_is_read_from_the_line_the_script_writes():
    """The client's script writes flent.log's first line from the contract's prefix; the
    reader takes only such a line."""
    import subprocess
    line = subprocess.run(["sh", "-c", f'rc=3; echo "{cell_folder.FLENT_EXIT}$rc"'], capture_output=True,
                          text=True, check=True).stdout.splitlines()[0]
    assert cell_folder.flent_exit(line) == 3
    assert cell_folder.flent_exit("# command: flent …") is None and cell_folder.flent_exit(cell_folder.FLENT_EXIT) is None
