"""A cell's phases, defined once: the marker each task of a cell carries as its task
variable ``fl_phase`` (playbooks/tasks/cell.yml, cells.yml, roles/cell/tasks/), which fl's
callback writes with the task's start (plugins/callback/fl_events.py), and the keys of
cell.json's ``phases``: seconds per phase (testbed/session.py times them, run/finish.py
adds CHECK). Task names are for people: renaming a task changes no data and no behaviour
(tests/unit/test_phases.py checks every task's marker against this enum).
"""
from __future__ import annotations

from enum import StrEnum

#: The task variable that names a task's phase.
TASK_VAR = "fl_phase"


class Phase(StrEnum):
    HAND_OVER = "hand_over"  # from fl handing the cell over (next.json) to its setup: the stop check
    SETUP = "setup"  # each host's setup script
    FLENT = "flent"  # the client's flent.sh: the test itself
    COLLECT = "collect"  # each host's collection script (and its retry)
    FETCH = "fetch"  # the cell's files fetched from ssh hosts
    # Ansible moves on: asks fl for the next cell, or first includes the next batch of cells.
    # A cell ends at the first such task, so this is never a key of cell.json.
    NEXT_CELL = "next_cell"
    CHECK = "check"  # no task: fl compresses and checks the cell while the testbed runs the next
    # No marker: a task of a cell without one (the test keeps there being none), or what
    # followed Ansible's end where the session ended during the cell.
    OTHER = "other"


#: The phases no task may carry: fl times them itself.
UNTASKED: frozenset[Phase] = frozenset({Phase.CHECK, Phase.OTHER})
