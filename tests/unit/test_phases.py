"""A cell's phases (flharness/phases.py) are agreed by marker, not by task name: every task
of a cell names one of Phase's values in its own variable fl_phase, the callback writes it
with the task's start, and fl times the cell and finds its end by it (issue 40)."""
from __future__ import annotations

import json
import re
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from flharness.phases import TASK_VAR, UNTASKED, Phase
from flharness.results import files
from flharness.results.cell_record import CellRecord
from flharness.testbed.ansible import ansible_env, ansible_playbook, phases
from flharness.testbed.session import cell_result

REPO = Path(__file__).resolve().parents[2]
ROLE_TASKS = REPO / "roles" / "cell" / "tasks"
#: The cell role's task files that no cell runs, with who does.
NOT_IN_CELLS = {"tunnel_down.yml": "testbed_down.yml"}
#: Task keys that fire no task start: Ansible imports them when it reads the playbook.
IMPORT_TASKS = {"import_tasks", "ansible.builtin.import_tasks"}
STATIC = IMPORT_TASKS | {"import_role", "ansible.builtin.import_role"}


def cell_files() -> list[Path]:
    """The files of a cell's tasks: cell.yml, cells.yml, the cell role's main.yml and every
    file it imports (for some runs: WireGuard, fetching), followed through imports."""
    out = [REPO / "playbooks" / "tasks" / "cells.yml", REPO / "playbooks" / "tasks" / "cell.yml"]
    todo = [ROLE_TASKS / "main.yml"]
    while todo:
        path = todo.pop()
        if path in out:
            continue
        out.append(path)
        for task in tasks(yaml.safe_load(path.read_text()), static=True):
            for key in IMPORT_TASKS & task.keys():
                todo += [ROLE_TASKS / name for name in re.findall(r"[\w-]+\.yml", str(task[key]))]
    return out


def tasks(items: list[dict[str, Any]] | None, static: bool = False) -> Iterator[dict[str, Any]]:
    """The tasks in ITEMS, blocks opened; static imports too if STATIC."""
    for item in items or []:
        if "block" in item:
            for key in ("block", "rescue", "always"):
                yield from tasks(item.get(key), static)
        elif static or not STATIC & item.keys():
            yield item


def test_every_task_of_a_cell_names_its_phase():
    where = {path.name: path for path in cell_files()}
    assert set(where) >= {"cell.yml", "cells.yml", "main.yml", "fetch.yml"}
    others = {p.name for p in ROLE_TASKS.glob("*.yml")} - set(where)
    assert others == set(NOT_IN_CELLS), f"say whether these run in a cell: {others ^ set(NOT_IN_CELLS)}"
    valid = {p.value for p in Phase} - {p.value for p in UNTASKED}
    carried: set[str] = set()
    wrong = []
    for path in where.values():
        for task in tasks(yaml.safe_load(path.read_text())):
            phase = (task.get("vars") or {}).get(TASK_VAR)
            if phase not in valid:
                wrong.append(f"{path.relative_to(REPO)}: {task.get('name')!r}: {TASK_VAR} {phase!r}")
            carried.add(phase)
    assert not wrong, f"each task of a cell names one of {sorted(valid)}:\n" + "\n".join(wrong)
    assert carried == valid, f"phases no task carries: {sorted(valid - carried)}"


def test_the_callback_writes_a_tasks_own_phase(tmp_path):
    """A tiny playbook on this machine (connection local, controller-side tasks only), with
    the callback enabled as fl enables it: a task's phase is its own, never an include's."""
    (tmp_path / "inner.yml").write_text(textwrap.dedent("""\
        - name: Inner, marked
          vars: {fl_phase: setup}
          ansible.builtin.debug: {msg: inner}
        - name: Inner, unmarked
          ansible.builtin.debug: {msg: inner}
        """))
    (tmp_path / "play.yml").write_text(textwrap.dedent("""\
        - name: Phases
          hosts: localhost
          connection: local
          gather_facts: false
          tasks:
            - name: Marked
              vars: {fl_phase: flent}
              ansible.builtin.debug: {msg: marked}
            - name: Unmarked
              ansible.builtin.debug: {msg: unmarked}
            - name: Include
              vars: {fl_phase: next_cell}
              ansible.builtin.include_tasks: inner.yml
        """))
    events = tmp_path / "events.jsonl"
    p = subprocess.run([ansible_playbook(), "-i", "localhost,", str(tmp_path / "play.yml")], cwd=REPO,
                       env=ansible_env(tmp_path, events), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    started = [(e["task"], e["phase"]) for e in lines if e["event"] == "task"]
    assert started == [("Marked", "flent"), ("Unmarked", None), ("Include", "next_cell"),
                       ("Inner, marked", "setup"), ("Inner, unmarked", None)]
    assert all(isinstance(e["t"], float) for e in lines if e["event"] == "task")
    assert lines[-1]["event"] == "end"


def task(name: str, phase: str | None, t: float) -> dict[str, Any]:
    return {"event": "task", "task": name, "phase": phase, "t": t}


def test_a_cell_is_timed_by_phase_and_ends_where_ansible_moves_on():
    events = [task("Stop when fl has no cell left", "hand_over", 100.5),
              task("Configure the cell", "setup", 101.0),
              {"event": "output", "host": "cli", "var": "fl_setup_out", "stdout": "set up", "msg": ""},
              task("WireGuard peer", "setup", 102.0),
              task("Run Flent", "flent", 103.0),
              {"event": "failed", "host": "cli", "task": "Run Flent", "msg": "", "rc": 1, "cmd": "sh flent.sh",
               "stderr": "flent died", "stdout": ""},
              task("Collect", "collect", 120.0),
              task("Print the collection again where its output was lost", "collect", 121.0),
              task("A task someone added", None, 121.5),
              task("Renamed, unknown phase", "bogus", 121.75),
              task("Batch of cells", "next_cell", 122.0),
              task("Next cell", "next_cell", 122.5),
              task("Stop when fl has no cell left", "hand_over", 130.0)]  # the next cell's
    result = cell_result(events, handed=100.0, now=200.0)
    assert result.phases == {"hand_over": 1.0, "setup": 2.0, "flent": 17.0, "collect": 1.5, "other": 0.5}
    assert set(result.phases) <= {p.value for p in Phase}
    assert [str(f) for f in result.failures] == ["cli: Run Flent: `sh flent.sh`: flent died"]
    assert result.outputs == {"fl_setup_out": {"cli": "set up"}}


def test_a_cell_whose_session_died_ends_now():
    """No next cell: the last task runs until Ansible's end, and what follows is OTHER."""
    events = [task("Stop", "hand_over", 10.0), task("Configure the cell", "setup", 11.0), {"event": "end", "t": 15.0}]
    assert cell_result(events, handed=9.5, now=16.0).phases == {"hand_over": 1.5, "setup": 4.0, "other": 1.0}
    assert cell_result([], handed=9.5, now=16.0).phases == {"hand_over": 6.5}


def test_other_playbooks_are_timed_by_task_name():
    events = [task("Build", None, 1.0), task("Serve", None, 3.0), {"event": "end", "t": 4.0}]
    assert phases(events, 0.5, 5.0) == {"ansible start-up": 0.5, "Build": 2.0, "Serve": 1.0, "ansible exit": 1.0}


@pytest.mark.parametrize("path", [REPO / "tests" / "fixtures" / "golden" / "cell.json",
                                  *sorted((REPO / "tests" / "fixtures" / "corpus").glob("*/cell.json"))],
                         ids=lambda p: p.parent.name)
def test_cells_recorded_with_task_names_still_read(path):
    """Cells recorded before the markers keep their phases as they were: keyed by task name."""
    record = files.read(CellRecord, path)
    assert record.phases == json.loads(path.read_text())["phases"]
    assert "cell : Run Flent" in record.phases
