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
from enum import Enum

from ..cells import Cell
from ..errors import FlError
from ..results import CellRecord
from ..testbed.testbed import Testbed, TestbedError
from .context import HOST_WAIT_S
from .evaluate import Verdict
from .finish import Attempt, finish, give_up
from .planning import ScenarioPlan
from .progress import Progress, progress_detail
from .space import disk_full

LOG = logging.getLogger(__name__)
#: Restarts of a testbed after it died mid-run; each resumes with the cells left.
RESTARTS = 2
POLL = 0.005  # seconds


class State(Enum):
    """Where a testbed is. The loop moves a slot on by one transition per poll (`_step`)."""

    BUILDING = "building"  # booting or building (again, after a restart): no cell yet
    RUNNING = "running"  # its cell is under way until it asks for the next one
    WAITING = "waiting"  # nothing queued, but a cell being finished may have to run again
    RESTARTING = "restarting"  # it died mid-run: taken down and built again in a worker
    REMOVING = "removing"  # no cell left: removing itself in a worker
    DONE = "done"  # removed after its last cell
    RETIRED = "retired"  # dead for good: takes no more cells


#: States in which a slot still has something to do (a waiting one: at least removing itself).
ACTIVE = {State.BUILDING, State.RUNNING, State.WAITING, State.RESTARTING, State.REMOVING}


def wall_stopwatch() -> Callable[[], float]:
    """From now: wall seconds."""
    t0 = time.monotonic()
    return lambda: time.monotonic() - t0


@dataclass
class Slot:
    """A testbed, its state, and what that state holds (a cell's attempt while RUNNING,
    a worker's future while RESTARTING or REMOVING, the reason once RETIRED)."""

    testbed: Testbed
    limit: Callable[[Cell], float]  # seconds a cell may take on it, as STOPWATCH counts them
    stopwatch: Callable[[], Callable[[], float]] = lambda: wall_stopwatch()  # a cell's, started
    state: State = State.BUILDING
    attempt: Attempt | None = None
    future: Future[None] | None = None
    built: bool = False  # it was ready for a cell once (a failure later is a restart, not a build error)
    restarts: int = 0
    retired: str = ""

    @property
    def name(self) -> str:
        return self.testbed.label or self.testbed.id


@dataclass
class Dispatch:
    slots: list[Slot]
    queue: deque[tuple[ScenarioPlan, Cell]]
    start_cell: Callable[[ScenarioPlan, Cell, Testbed], Attempt]  # records the cell and gives it to the testbed
    progress: Progress
    records: list[CellRecord] = field(default_factory=list)
    finishing: dict[Future[tuple[CellRecord, Verdict]], Attempt] = field(default_factory=dict)
    retried: set[tuple[str, str]] = field(default_factory=set)  # (scenario, cell) run again once
    host_wait_s: float = HOST_WAIT_S  # how long a host lost mid-run (unreachable over ssh) may take to answer again

    def run_all(self) -> list[CellRecord]:
        with ThreadPoolExecutor(max_workers=2 * len(self.slots) + 1, thread_name_prefix="fl-finish") as pool:
            self.pool = pool
            try:
                for slot in self.slots:
                    slot.testbed.start()
                while self.queue or self.finishing or any(s.state in ACTIVE for s in self.slots):
                    for slot in self.slots:
                        self._step(slot)
                    self._reap()
                    if self.queue and all(s.state is State.RETIRED for s in self.slots):
                        raise TestbedError(f"no testbed left to run the {len(self.queue)} cell(s) left (fl run "
                                           "again resumes with them): " + "; ".join(s.retired for s in self.slots))
                    time.sleep(POLL)
            except BaseException as e:
                self._abandon("interrupted (SIGINT/SIGTERM)" if isinstance(e, KeyboardInterrupt)
                              else f"interrupted: the run stopped ({e})")
                self._reap_after_all(on_error=True)
                raise
            self._reap_after_all(on_error=False)
        return self.records

    # --- one testbed --------------------------------------------------------------------------

    def _step(self, slot: Slot) -> None:
        """One transition of SLOT, if its testbed or its worker has news."""
        tb = slot.testbed
        match slot.state:
            case State.BUILDING | State.RUNNING:
                if tb.want_cell():  # says so once: built, or its cell collected
                    lost = self._collected(slot) if slot.attempt is not None else []
                    slot.built = True
                    if lost and self.queue:
                        self._lost(slot, lost)
                    else:
                        self._hand_next(slot)
                elif (why := tb.dead()) is not None:
                    self._died(slot, why)
                elif slot.attempt is not None and slot.attempt.elapsed() > slot.limit(slot.attempt.cell):
                    self._died(slot, f"the cell took longer than {slot.limit(slot.attempt.cell):.0f} s "
                                     "(the testbed was taken for hung and restarted)")
            case State.WAITING:
                self._hand_next(slot)
            case State.RESTARTING if slot.future is not None and slot.future.done():
                error, slot.future = slot.future.exception(), None
                slot.state = State.BUILDING
                if error is not None:
                    self._retire(slot, str(error) if isinstance(error, HostLost) else f"restart failed: {error}")
            case State.REMOVING if slot.future is not None and slot.future.done():
                slot.state, slot.future = State.DONE, None

    def _hand_next(self, slot: Slot) -> None:
        if not self.queue:
            if self.finishing:  # a cell still being checked may have to run again: the testbed waits
                slot.state = State.WAITING
            else:
                slot.state, slot.future = State.REMOVING, self.pool.submit(slot.testbed.finish)
            return
        sp, cell = self.queue.popleft()
        attempt = self.start_cell(sp, cell, slot.testbed)
        attempt.elapsed = slot.stopwatch()
        slot.state, slot.attempt = State.RUNNING, attempt
        LOG.debug("cell %s/%s to testbed %s (%s)", sp.name, cell.name, slot.testbed.label or "-", slot.testbed.id)
        self.progress.start(f"{sp.name}/{cell.name}", slot.testbed.label)

    def _collected(self, slot: Slot) -> list[str]:
        """The slot's cell is collected: finish it in a worker while the testbed goes on.
        Returns the hosts Ansible could not reach during the cell (it left them out)."""
        attempt, slot.attempt = slot.attempt, None
        assert attempt is not None
        attempt.record.ended = time.time()
        result = slot.testbed.cell_result()
        self.finishing[self.pool.submit(finish, attempt, result)] = attempt
        return sorted({f.host for f in result.failures if f.unreachable})

    def _lost(self, slot: Slot, hosts: list[str]) -> None:
        """HOSTS of SLOT's testbed could not be reached during its cell, and Ansible's session
        plays on without them: it ends, and the testbed is built again once they answer
        (_rejoin), or takes no more cells, naming them."""
        LOG.warning("testbed %s: %s could not be reached over ssh; waiting up to %.0f s for %s",
                    slot.name, ", ".join(hosts), self.host_wait_s, "it" if len(hosts) == 1 else "them")
        if slot.restarts >= RESTARTS:
            slot.testbed.down()
            self._retire(slot, f"{', '.join(hosts)} lost again after {RESTARTS} restarts")
            return
        slot.restarts += 1
        slot.built = False
        slot.state, slot.future = State.RESTARTING, self.pool.submit(_rejoin, slot.testbed, hosts, self.host_wait_s)

    def _died(self, slot: Slot, why: str) -> None:
        tb = slot.testbed
        if not slot.built and not slot.restarts:
            raise TestbedError(f"building testbed {slot.name} failed: {why} (log: {tb.log})")
        if slot.attempt is not None:
            attempt, slot.attempt = slot.attempt, None
            result = tb.cell_result()
            reason = f"{result.reason()}; {why}" if result.failures else why
            rec = give_up(attempt, "failed", reason, result)
            self.records.append(rec)
            self.progress.finish(rec.cell, "failed", rec.duration or 0, reason.splitlines()[0][:200], tb.label)
        if slot.restarts >= RESTARTS or not self.queue or not slot.built:
            tb.down()
            self._retire(slot, why.splitlines()[0])
            return
        slot.restarts += 1
        LOG.warning("restarting testbed %s (%d/%d): %s", slot.name, slot.restarts, RESTARTS, why.splitlines()[0])
        slot.built = False
        slot.state, slot.future = State.RESTARTING, self.pool.submit(_restart, tb)

    @staticmethod
    def _retire(slot: Slot, why: str) -> None:
        slot.state, slot.retired = State.RETIRED, f"{slot.name}: {why}"

    # --- finishing ----------------------------------------------------------------------------

    def _reap(self, wait: bool = False) -> None:
        for future in [f for f in self.finishing if wait or f.done()]:
            attempt = self.finishing.pop(future)
            try:
                rec, verdict = future.result()
            except OSError as e:  # writing the cell's files: a full disk stops the run in one line
                raise disk_full(e, attempt.partial) or e from None
            sp = attempt.plan
            if verdict.retry and (sp.name, rec.cell) not in self.retried and not wait \
                    and not all(s.state is State.RETIRED for s in self.slots):
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


class HostLost(TestbedError):
    """A testbed's host lost mid-run did not answer again in time."""


def _rejoin(tb: Testbed, hosts: list[str], wait_s: float) -> None:
    """Once HOSTS answer again, TB is removed from every host (from those lost, what their
    cell left) and built anew; if they do not within WAIT_S seconds, it is removed from
    the others, and kept on record for `fl clean`."""
    if tb.session is not None:
        tb.session.stop()
    why = tb.reach(hosts, wait_s)
    if why is not None:
        tb.down()
        raise HostLost(f"{why}, still after {wait_s:.0f} s; the testbed's other hosts are restored, "
                       f"and `fl clean` restores {', '.join(hosts)} once it answers")
    _restart(tb)


def _restart(tb: Testbed) -> None:
    tb.down()
    tb.boot()
    tb.ready()
    tb.start()
