"""The rate schedule's log: fl-schedule (bash, on the middlebox) writes the records that
teardown_format.schedule_log reads back; run here with tc and fl-first-ping stood in by
scripts that record their calls, so the writer and the reader are checked against each other."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

from flharness.programs import HOST_DIR
from flharness.teardown_format import ScheduleStart, schedule_log, schedule_planned

SCRIPT = HOST_DIR / "fl-schedule"


def _stub(path: Path, body: str) -> None:
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _run(tmp_path: Path, first_ping: str) -> tuple[str, str]:
    bin_dir, cmd = tmp_path / "bin", tmp_path / "cmd"
    bin_dir.mkdir()
    cmd.mkdir()
    shutil.copy(SCRIPT, bin_dir / "fl-schedule")
    _stub(bin_dir / "fl-first-ping", f"echo {first_ping}\n")
    _stub(bin_dir / "tc", f'echo "$*" >>{tmp_path}/tc.calls\n')
    steps = [(0.05, "3mbit pfifo limit 100", "2mbit pfifo limit 100"), (0.1, "5mbit fq_codel", "4mbit fq_codel")]
    (cmd / "schedule.steps").write_text("".join(
        f"{round(at * 1e6)} schedule-{i}.tc {schedule_planned(i, at, up, down)}\n" for i, (at, up, down) in enumerate(steps, 1)))
    log = tmp_path / "schedule.log"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    subprocess.run([str(bin_dir / "fl-schedule"), str(cmd), "mid.l", str(log)], env=env, check=True, timeout=30)
    return log.read_text(), (tmp_path / "tc.calls").read_text()


def test_each_step_is_logged_as_taken_with_its_plan(tmp_path):
    text, calls = _run(tmp_path, f"{time.time():.6f}")
    start, taken = schedule_log(text)
    assert start is not None and start.by == "ping"
    assert [s.planned.step for s in taken] == [1, 2]
    assert [s.planned.up for s in taken] == ["3mbit pfifo limit 100", "5mbit fq_codel"]
    assert [s.planned.down for s in taken] == ["2mbit pfifo limit 100", "4mbit fq_codel"]
    assert all(s.planned.at_s <= s.t_s < s.planned.at_s + 5 for s in taken), taken
    assert calls.split("\n")[:2] == [f"-batch {tmp_path}/cmd/schedule-1.tc", f"-batch {tmp_path}/cmd/schedule-2.tc"]


def test_no_ping_reply_starts_the_clock_at_the_schedules_start(tmp_path):
    text, _ = _run(tmp_path, "")
    start, taken = schedule_log(text)
    assert isinstance(start, ScheduleStart) and start.by == "clock" and start.t0_epoch > 1e9
    assert len(taken) == 2


def test_a_line_cut_short_is_skipped_not_misread():
    start, taken = schedule_log('{"t0_epoch": 1.5, "by": "ping"}\n'
                                '{"t_s": 1.0, "planned": {"step": 1, "at_s": 1.0, "up": "a", "down": "b"}}\n'
                                '{"t_s": 2.0, "planned": {"step": 2, "at_')
    assert start == ScheduleStart(t0_epoch=1.5, by="ping") and [s.t_s for s in taken] == [1.0]


def test_a_cell_recorded_before_the_records_reads_the_same():
    start, taken = schedule_log("t=0 at 1764670000.123456: the first reply of Flent's ping, on its way to the client\n"
                                "t=10.016: up 3mbit pfifo limit 100, down 2mbit pfifo limit 100 (planned t=10.0)\n"
                                "t=12.008: up 5mbit fq_codel, down 4mbit fq_codel (planned t=12.0)\n")
    assert start == ScheduleStart(t0_epoch=1764670000.123456, by="ping")
    assert [(s.t_s, s.planned.step, s.planned.at_s, s.planned.up, s.planned.down) for s in taken] == [
        (10.016, 1, 10.0, "3mbit pfifo limit 100", "2mbit pfifo limit 100"), (12.008, 2, 12.0, "5mbit fq_codel", "4mbit fq_codel")]
