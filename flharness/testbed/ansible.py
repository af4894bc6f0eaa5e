"""Run fl's playbooks with ansible-playbook: extra vars in, precise failures out."""
from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import IO, Any

import yaml

from .. import REPO

LOG = logging.getLogger(__name__)
PLAYBOOKS = REPO / "playbooks"


@dataclass(frozen=True)
class TaskFailure:
    host: str
    task: str
    message: str
    unreachable: bool = False  # Ansible could not reach the host (ssh): it leaves it out of the play from then on

    def __str__(self) -> str:
        if self.unreachable:
            return f"{self.host} could not be reached over ssh: {self.message} (during {self.task})"
        return f"{self.host}: {self.task}: {self.message}"


@dataclass(frozen=True)
class PlaybookResult:
    playbook: str
    rc: int
    failures: list[TaskFailure]
    phases: dict[str, float] = field(default_factory=dict)  # seconds per task or cell phase (+ start-up, exit)
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)  # registered fl_*_out → host → stdout

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.failures

    def reason(self) -> str:
        if self.failures:
            return str(self.failures[0])
        return f"{self.playbook} exited with status {self.rc}"


class UnsafeDumper(yaml.SafeDumper):
    """Dumps every string that could hold a template (a brace) as ``!unsafe``: Ansible then
    treats fl's values (qdisc templates, notes, names) as data and never evaluates a
    ``{{ }}`` in them. Other strings stay plain: Ansible would read an ``!unsafe`` '0x1f'
    or '300' back as a number."""


UnsafeDumper.add_representer(
    str, lambda d, s: d.represent_scalar("!unsafe", s) if "{" in s else d.represent_str(s))


def ansible_playbook() -> str:
    """ansible-playbook of the Python running fl (the project's virtualenv)."""
    local = Path(sys.executable).parent / "ansible-playbook"
    return str(local) if local.exists() else "ansible-playbook"


def ansible_env(tmp: Path, events: Path) -> dict[str, str]:
    """The environment of fl's ansible-playbook: fl's configuration and callback."""
    return {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
            "ANSIBLE_CALLBACKS_ENABLED": os.environ.get("FL_DEBUG_CALLBACKS", "fl_events"),
            "FL_ANSIBLE_EVENTS": str(events), "ANSIBLE_LOCAL_TEMP": str(tmp / "local"),
            "ANSIBLE_REMOTE_TEMP": "/tmp/.fl-ansible", "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"}


def run_playbook(playbook: str, inventory: Path, extra_vars: dict[str, Any], log: Path,
                 on_start: Callable[[int], None] | None = None) -> PlaybookResult:
    """Run playbooks/<playbook>.yml; output goes to LOG; interrupts kill the whole tree.

    ON_START gets the child's PID (also its process group): `fl clean` uses it to stop
    the playbook of a run that was killed."""
    with tempfile.TemporaryDirectory(prefix="fl-ansible-") as tmp:
        vars_file, events = Path(tmp) / "vars.yml", Path(tmp) / "events.jsonl"
        vars_file.write_text(yaml.dump(extra_vars, Dumper=UnsafeDumper))
        argv = [ansible_playbook(), "-i", str(inventory), str(PLAYBOOKS / f"{playbook}.yml"),
                "-e", f"@{vars_file}"]
        started = time.time()
        with _log_file(log, Path(tmp), playbook) as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=ansible_env(Path(tmp), events),
                                    cwd=REPO, start_new_session=True, stdin=subprocess.DEVNULL)
            if on_start:
                on_start(proc.pid)
            rc = wait_or_kill(proc)
        ended = time.time()
        LOG.debug("ansible-playbook %s.yml on %s: status %s in %.1f s", playbook, inventory, rc, ended - started)
        lines = [json.loads(line) for line in events.read_text().splitlines()] if events.exists() else []
    failures = [failure_of(e) for e in lines if e["event"] in ("failed", "unreachable")]
    return PlaybookResult(playbook, rc, failures, phases(lines, started, ended), outputs_of(lines))


@contextlib.contextmanager
def _log_file(log: Path, spare: Path, playbook: str) -> Iterator[IO[str]]:
    """LOG, opened to append the playbook's output; where it cannot be written (a full
    disk), a file in SPARE instead, so that the playbook still runs (removing a testbed
    must never depend on its log)."""
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        out = log.open("a")
        out.write(f"\n### ansible-playbook {playbook}.yml\n")
        out.flush()
    except OSError as e:
        LOG.warning("%s: %s; the output of %s.yml goes elsewhere", log, e.strerror, playbook)
        out = (spare / "ansible-output.log").open("a")
    with out:
        yield out


def outputs_of(events: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """What fl's registered scripts printed: variable → host → stdout."""
    out: dict[str, dict[str, str]] = {}
    for e in events:
        if e["event"] == "output":
            out.setdefault(e["var"], {})[e["host"]] = e["stdout"] or e["msg"]
    return out


def failure_of(event: dict[str, Any]) -> TaskFailure:
    if event["event"] == "unreachable":  # "Data could not be sent to remote host "A". Make sure … over ssh: ssh: …"
        return TaskFailure(event["host"], event["task"], _failure_text(event).split("reached over ssh: ")[-1], True)
    return TaskFailure(event["host"], event["task"], _failure_text(event))


def task_name(event: dict[str, Any]) -> str:
    return str(event["task"])


def phases(events: list[dict[str, Any]], started: float, ended: float, lead: str = "ansible start-up",
           key: Callable[[dict[str, Any]], str] = task_name, after: str = "ansible exit") -> dict[str, float]:
    """Seconds from each task's start to the next's, summed per KEY of the task's event (its
    name, or a cell's phase); what came before the first task (LEAD: Ansible's start-up, or
    handing a cell over) and after Ansible's end (AFTER) are phases too."""
    marks = [(lead, started)] + [(key(e), e["t"]) for e in events if e["event"] == "task"]
    marks += [(after, next((e["t"] for e in events if e["event"] == "end"), ended)), ("", ended)]
    out: dict[str, float] = {}
    for (name, t), (_, nxt) in pairwise(marks):
        out[name] = round(out.get(name, 0.0) + max(0.0, nxt - t), 3)
    return {k: v for k, v in out.items() if v or k not in (lead, after)}


def wait_or_kill(proc: subprocess.Popen[Any]) -> int:
    """Wait for a child started in its own session; on any exception kill its group."""
    try:
        return proc.wait()
    except BaseException:
        kill_group(proc)
        raise


def kill_group(proc: subprocess.Popen[Any], grace: float = 5.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


_SSH_NOISE = re.compile(r"^Shared connection to \S+ closed\.$")


def _failure_text(event: dict[str, Any]) -> str:
    """The most telling line: stderr's last (ssh's own "connection closed" skipped), else
    stdout's (where a script's errors land over a tty), else the message's."""
    lines: list[str] = []
    for key in ("stderr", "stdout", "msg"):
        lines = [ln for ln in str(event.get(key) or "").splitlines() if ln.strip() and not _SSH_NOISE.match(ln.strip())]
        if lines:
            break
    text = lines[-1] if lines else f"exit status {event.get('rc')}"
    cmd = event.get("cmd")
    return f"`{cmd}`: {text}" if cmd else text
