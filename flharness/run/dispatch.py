"""Hand a run's cells to its testbeds: longest first, each to whichever testbed is free.

Every testbed runs its own Ansible session (testbed/session.py); this loop only answers
"next cell?", notices testbeds that died (a VM crash, a playbook that ended) or hung
past a cell's deadline, restarts them, and finishes cells in worker threads while their
testbed runs the next one (run/finish.py).
"""
from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from ..cells import Cell
from ..errors import FlError
from ..results import CellRecord
from ..testbed.plan import cell_vars
from ..testbed.testbed import Testbed, TestbedError
from .context import Run
from .finish import Attempt, finish, give_up
from .planning import ScenarioPlan
from .progress import Progress, progress_detail
from .space import disk_full

LOG = logging.getLogger(__name__)
#: Restarts of a testbed after it died mid-run; each resumes with the cells left.
RESTARTS = 2
POLL = 0.005  # seconds


@dataclass
class Slot:
    """A testbed and what it is doing."""

    testbed: Testbed
    limit: Callable[[Cell], float]  # wall seconds a cell may take on it
    attempt: Attempt | None = None
    built: bool = False
    stopped: bool = False  # told there are no more cells
    restarts: int = 0
    restarting: Future | None = None
    removing: Future | None = None  # the testbed removing itself after its last cell
    retired: str = ""  # why it takes no more cells
    waiting: bool = False  # built or its cell collected, it waits for the next one

    @property
    def busy(self) -> bool:
        return (self.attempt is not None or self.restarting is not None or (not self.built and not self.retired)
                or (self.removing is not None and not self.removing.done()))


@dataclass
class Dispatch:
    run: Run
    slots: list[Slot]
    queue: deque[tuple[ScenarioPlan, Cell]]
    new_attempt: Callable[[ScenarioPlan, Cell, Testbed], Attempt]
    progress: Progress
    records: list[CellRecord] = field(default_factory=list)
    finishing: dict[Future, Attempt] = field(default_factory=dict)
    plans: dict[int, ScenarioPlan] = field(default_factory=dict)  # id(attempt) → its scenario
    retried: set[tuple[str, str]] = field(default_factory=set)  # (scenario, cell) run again once

    def run_all(self) -> list[CellRecord]:
        with ThreadPoolExecutor(max_workers=2 * len(self.slots) + 1, thread_name_prefix="fl-finish") as pool:
            self.pool = pool
            try:
                for slot in self.slots:
                    slot.testbed.start()
                while self.queue or self.finishing or any(s.busy for s in self.slots):
                    for slot in self.slots:
                        self._poll(slot)
                    self._reap()
                    if self.queue and all(s.retired for s in self.slots):
                        raise TestbedError("no testbed left to run the remaining cells: "
                                           + "; ".join(s.retired for s in self.slots))
                    time.sleep(POLL)
            except BaseException as e:
                self._abandon("interrupted (SIGINT/SIGTERM)" if isinstance(e, KeyboardInterrupt)
                              else f"interrupted: the run stopped ({e})")
                self._reap_after_all(on_error=True)
                raise
            self._reap_after_all(on_error=False)
        return self.records

    # --- one testbed --------------------------------------------------------------------------

    def _poll(self, slot: Slot) -> None:
        if slot.retired:
            return
        if slot.restarting is not None:
            self._restarted(slot)
            return
        tb = slot.testbed
        if slot.waiting or tb.want_cell():  # want_cell() says so once
            slot.waiting = False
            if slot.attempt is not None:
                self._collected(slot)
            slot.built = True
            self._hand_next(slot)
        elif (why := tb.dead()) is not None and not slot.stopped:
            self._died(slot, why)
        elif slot.attempt is not None and time.monotonic() > slot.attempt.deadline:
            self._died(slot, f"the cell took longer than {slot.limit(slot.attempt.cell):.0f} s "
                             "(the testbed was taken for hung and restarted)")

    def _hand_next(self, slot: Slot) -> None:
        if not self.queue and self.finishing:
            slot.waiting = True  # a cell still being checked may have to run again: the testbed waits
            return
        if not self.queue:
            slot.stopped = True
            slot.removing = self.pool.submit(slot.testbed.finish)
            return
        sp, cell = self.queue.popleft()
        attempt = self.new_attempt(sp, cell, slot.testbed)
        self.plans[id(attempt)] = sp
        attempt.deadline = time.monotonic() + slot.limit(cell)
        slot.attempt = attempt
        LOG.debug("cell %s/%s to testbed %s (%s)", sp.name, cell.name, slot.testbed.label or "-", slot.testbed.id)
        slot.testbed.give(cell_vars(cell, slot.testbed.inv, slot.testbed.path_on_testbed(attempt.partial),
                                    not self.run.virtual_clock, tcp_rewrite=self.run.caps.tcp_rewrite,
                                    run=slot.testbed.run_vars))
        self.progress.start(f"{sp.name}/{cell.name}", slot.testbed.label)

    def _collected(self, slot: Slot) -> None:
        """The slot's cell is collected: finish it in a worker while the testbed goes on."""
        attempt, slot.attempt = slot.attempt, None
        assert attempt is not None
        attempt.record.ended = time.time()
        result = slot.testbed.cell_result()
        self.finishing[self.pool.submit(finish, attempt, result)] = attempt

    def _died(self, slot: Slot, why: str) -> None:
        tb = slot.testbed
        if not slot.built and not slot.restarts:
            raise TestbedError(f"building testbed {tb.label or tb.id} failed: {why} (log: {tb.log})")
        if slot.attempt is not None:
            attempt, slot.attempt = slot.attempt, None
            result = tb.cell_result()
            reason = f"{result.reason()}; {why}" if result.failures else why
            rec = give_up(attempt, "failed", reason, result)
            self.records.append(rec)
            self.progress.finish(rec.cell, "failed", rec.duration or 0, reason.splitlines()[0][:200], tb.label)
        if slot.restarts >= RESTARTS or not self.queue or not slot.built:
            tb.down()
            slot.retired = f"{tb.label or tb.id}: {why.splitlines()[0]}"
            return
        slot.restarts += 1
        LOG.warning("restarting testbed %s (%d/%d): %s", tb.label or tb.id, slot.restarts, RESTARTS, why.splitlines()[0])
        slot.built = False
        slot.restarting = self.pool.submit(_restart, tb)

    def _restarted(self, slot: Slot) -> None:
        assert slot.restarting is not None
        if not slot.restarting.done():
            return
        future, slot.restarting = slot.restarting, None
        if (error := future.exception()) is not None:
            slot.retired = f"{slot.testbed.label or slot.testbed.id}: restart failed: {error}"

    # --- finishing ----------------------------------------------------------------------------

    def _reap(self, wait: bool = False) -> None:
        for future in [f for f in self.finishing if wait or f.done()]:
            attempt = self.finishing.pop(future)
            try:
                rec, verdict = future.result()
            except OSError as e:  # writing the cell's files: a full disk stops the run in one line
                raise disk_full(e, attempt.partial) or e from None
            sp = self.plans.pop(id(attempt))
            if verdict.retry and (sp.name, rec.cell) not in self.retried and not wait \
                    and not all(s.retired for s in self.slots):
                self._again(sp, attempt, rec.reason)
                continue
            self.records.append(rec)
            self.progress.finish(rec.cell, rec.status, rec.duration or 0, progress_detail(attempt.cell, verdict),
                                 attempt.testbed)

    def _again(self, sp: ScenarioPlan, attempt: Attempt, reason: str) -> None:
        """Run a cell once more whose failure was the testbed's timing (its attempt goes
        to .attempts/), before any other."""
        self.retried.add((sp.name, attempt.cell.name))
        attempt.store.set_aside(attempt.cell.name, "retried")
        self.queue.appendleft((sp, attempt.cell))
        self.progress.again(attempt.cell.name, attempt.record.duration or 0, reason[:200], attempt.testbed)

    def _abandon(self, why: str) -> None:
        """Interrupted (or a fatal error): cells under way are recorded as interrupted,
        where that can still be written (a full disk leaves them in .partial/: never ok)."""
        for slot in self.slots:
            if slot.attempt is not None:
                attempt, slot.attempt = slot.attempt, None
                try:
                    rec = give_up(attempt, "interrupted", why)
                except OSError as e:
                    LOG.warning("%s: not recorded as interrupted: %s", attempt.partial, e.strerror)
                    continue
                self.records.append(rec)
                self.progress.finish(rec.cell, "stopped", rec.duration or 0, "", attempt.testbed)

    def _reap_after_all(self, on_error: bool) -> None:
        """The cells still being finished, when the run ends; when it ends ON_ERROR, a
        second one (a full disk again) is only reported: the first says what happened."""
        try:
            self._reap(wait=True)
        except (OSError, FlError) as e:
            if not on_error:
                raise
            LOG.warning("finishing the last cells: %s", e)


def _restart(tb: Testbed) -> None:
    tb.down()
    tb.boot()
    tb.ready()
    tb.start()
