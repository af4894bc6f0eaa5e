"""The dispatcher's states, driven by testbeds that are scripts (no Ansible, no VM): every
cell is handed out once, a testbed that dies mid-cell fails that cell and is restarted
(or retired when its restarts are spent), and every slot ends removed or retired."""
from __future__ import annotations

import io
from collections import deque
from types import SimpleNamespace

import pytest

from flharness.run import dispatch
from flharness.run.dispatch import Dispatch, Slot, State
from flharness.run.evaluate import Verdict
from flharness.run.progress import Progress
from flharness.testbed.ansible import TaskFailure


class ScriptedTestbed:
    """A testbed that asks for a cell as soon as it is built and again as soon as it has
    one (each cell done at once), and dies during the cells named in DIES_DURING."""

    def __init__(self, label: str, dies_during: set[str] = frozenset(), loses_srv_during: set[str] = frozenset(),
                 srv_back: bool = True) -> None:
        self.label, self.id, self.log = label, f"fl-{label}", f"/run/fl/{label}.log"
        self.dies_during, self.loses_srv_during, self.srv_back = set(dies_during), set(loses_srv_during), srv_back
        self.session = None
        self.asks = False
        self.cell: str | None = None
        self.ran: list[str] = []
        self.events: list[str] = []

    def start(self) -> None:
        self.asks = True
        self.events.append("start")

    def want_cell(self) -> bool:
        if self.cell in self.dies_during:
            return False
        asks, self.asks = self.asks, False
        return asks

    def dead(self) -> str | None:
        return f"{self.label} crashed" if self.cell in self.dies_during else None

    def give(self, cell: str) -> None:
        self.cell, self.asks = cell, True
        self.ran.append(cell)

    def cell_result(self) -> SimpleNamespace:
        lost = [TaskFailure("srv", "cell : Collect", "ssh: connect to host 10.0.0.3 port 22: Connection refused", True)]
        return SimpleNamespace(failures=lost if self.cell in self.loses_srv_during else [], reason=lambda: "")

    def reach(self, hosts: list[str], wait_s: float) -> str | None:
        self.events.append(f"reach {','.join(hosts)}")
        return None if self.srv_back else "srv could not be reached over ssh: Connection refused (during reach)"

    def finish(self) -> None:
        self.events.append("finish")

    def down(self) -> None:
        self.cell = None
        self.events.append("down")


@pytest.fixture
def scripted(monkeypatch):
    """finish/give_up/restart without files: a cell's record is its name and status."""
    monkeypatch.setattr(dispatch, "finish", lambda attempt, result: (
        SimpleNamespace(cell=attempt.cell.name, status="ok", duration=1.0), Verdict(status="ok")))
    monkeypatch.setattr(dispatch, "give_up", lambda attempt, status, reason, result=None: SimpleNamespace(
        cell=attempt.cell.name, status=status, duration=1.0, reason=reason))
    monkeypatch.setattr(dispatch, "progress_detail", lambda cell, verdict: "")
    monkeypatch.setattr(dispatch, "_restart", lambda tb: (tb.down(), tb.start()))


def run(testbeds: list[ScriptedTestbed], cells: list[str]) -> tuple[Dispatch, list[tuple[str, str]]]:
    plan = SimpleNamespace(name="s", store=None)

    def start_cell(sp, cell, tb):
        tb.give(cell.name)
        return SimpleNamespace(plan=sp, cell=cell, record=SimpleNamespace(ended=None), testbed=tb.label,
                               deadline=0.0)

    queue = deque((plan, SimpleNamespace(name=c)) for c in cells)
    d = Dispatch([Slot(tb, limit=lambda cell: 60.0) for tb in testbeds], queue, start_cell,
                 Progress([1.0] * len(cells), len(testbeds), out=io.StringIO()))
    records = d.run_all()
    return d, sorted((r.cell, r.status) for r in records)


def test_every_cell_runs_once_and_every_testbed_is_removed(scripted):
    """Also a testbed that waited at the end (its cell, the last ones, being finished, and a
    retry could come) removes itself: the run does not end with it waiting, which would
    leave its removal to the slower teardown playbook."""
    tbs = [ScriptedTestbed("a"), ScriptedTestbed("b")]
    d, records = run(tbs, ["c1", "c2", "c3", "c4", "c5"])
    assert records == [(c, "ok") for c in ("c1", "c2", "c3", "c4", "c5")]
    assert sorted(tbs[0].ran + tbs[1].ran) == ["c1", "c2", "c3", "c4", "c5"]
    assert [s.state for s in d.slots] == [State.DONE, State.DONE]
    assert all(tb.events == ["start", "finish"] for tb in tbs)


def test_a_testbed_dying_mid_cell_fails_that_cell_and_restarts(scripted):
    tb = ScriptedTestbed("a", dies_during={"c2"})
    d, records = run([tb], ["c1", "c2", "c3"])
    assert records == [("c1", "ok"), ("c2", "failed"), ("c3", "ok")]
    assert tb.events == ["start", "down", "start", "finish"] and d.slots[0].restarts == 1
    assert d.slots[0].state is State.DONE


def test_a_testbed_that_keeps_dying_is_retired_and_the_others_run_the_rest(scripted):
    dying = ScriptedTestbed("a", dies_during={f"c{i}" for i in range(1, 7)})
    d, records = run([dying, ScriptedTestbed("b")], [f"c{i}" for i in range(1, 7)])
    assert {c for c, _ in records} == {f"c{i}" for i in range(1, 7)}
    assert [c for c, status in records if status == "failed"] == sorted(dying.ran)
    assert d.slots[0].state is State.RETIRED and "a crashed" in d.slots[0].retired
    assert d.slots[1].state is State.DONE


def test_the_run_stops_when_its_last_testbed_spent_its_restarts(scripted):
    dying = ScriptedTestbed("a", dies_during={f"c{i}" for i in range(1, 7)})
    with pytest.raises(dispatch.TestbedError, match=r"no testbed left to run the 3 cell\(s\) left \(fl run again resumes with them\): a: a crashed"):
        run([dying], [f"c{i}" for i in range(1, 7)])
    assert dying.ran == ["c1", "c2", "c3"] and dying.events == ["start", "down", "start", "down", "start", "down"]


def test_a_testbed_that_dies_while_being_built_stops_the_run(scripted):
    tb = ScriptedTestbed("a")
    tb.start = lambda: None  # never asks for a cell
    tb.dead = lambda: "its VM did not boot"
    with pytest.raises(dispatch.TestbedError, match="building testbed a failed: its VM did not boot"):
        run([tb], ["c1"])


def test_a_host_lost_during_a_cell_and_back_rebuilds_the_testbed_for_the_rest(scripted):
    """Ansible plays on without a host it could not reach: the testbed is built again (once
    the host answers) before the next cell, which runs on it."""
    tb = ScriptedTestbed("a", loses_srv_during={"c2"})
    d, records = run([tb], ["c1", "c2", "c3"])
    assert [c for c, _ in records] == ["c1", "c2", "c3"] and tb.ran == ["c1", "c2", "c3"]
    assert tb.events == ["start", "reach srv", "down", "start", "finish"] and d.slots[0].restarts == 1


def test_a_host_that_stays_away_stops_the_run_in_one_line(scripted):
    tb = ScriptedTestbed("a", loses_srv_during={"c1"}, srv_back=False)
    with pytest.raises(dispatch.TestbedError) as e:
        run([tb], ["c1", "c2", "c3"])
    assert str(e.value).startswith("no testbed left to run the 2 cell(s) left (fl run again resumes with them): a: "
                                   "srv could not be reached over ssh") and "still after 60 s" in str(e.value)
    assert "\n" not in str(e.value) and tb.ran == ["c1"] and tb.events == ["start", "reach srv", "down"]
