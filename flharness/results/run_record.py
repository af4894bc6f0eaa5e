"""run.json: one entry per `fl run` invocation into a run folder (who, where, what, outcome)."""
from __future__ import annotations

from typing import Final, Literal

from .cell_record import Backend, FlSource
from .files import Contract, Sparse, Versioned

#: Bumped when run.json's layout changes; files of another version are not read.
RUN_VERSION: Final = 1  # and the version field's Literal below (mypy holds them equal)


class Controller(Contract):
    """The machine fl ran on."""

    hostname: str
    kernel: str
    python: str


class Planned(Contract):
    run: int
    skip: int
    """The kernel cannot run them."""
    done: int
    """Completed earlier with the same configuration."""


class Outcome(Contract):
    ok: int
    failed: int
    skipped: int
    interrupted: int


class Invocation(Sparse):
    """One `fl run`; `ended`, `interrupted` and `outcome` are written when it ends (a
    killed run has none)."""

    started: float
    scenarios: list[str]
    kernel: str
    only: list[str]
    force: bool
    planned: Planned
    fl: FlSource
    controller: Controller
    testbeds: dict[str, str]
    """Label → testbed id."""
    tools: dict[str, str | None]
    backend: Backend
    ended: float | None = None
    interrupted: bool | None = None
    outcome: Outcome | None = None


class RunRecord(Versioned):
    """run.json: one entry per `fl run` invocation into the run folder."""

    WHAT = "run record"

    version: Literal[1] = RUN_VERSION
    run: str
    invocations: list[Invocation] = []

    def add(self, entry: Invocation) -> None:
        """Append ENTRY, or replace the entry it completes (the same start)."""
        if self.invocations and self.invocations[-1].started == entry.started:
            self.invocations[-1] = entry
        else:
            self.invocations.append(entry)
