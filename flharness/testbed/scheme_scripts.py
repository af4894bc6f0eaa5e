"""The lines of a cell's scripts that run its schemes (user-space congestion controllers,
scenario/schemes.py): each scheme flow's sender on the client and receiver on the server,
from typed SchemeSide values that plan.py builds with every placeholder filled in, each
word quoted for the shell.

A side that listens starts in its host's setup (setup.sh) and waits for the other. The
side that connects starts with the other flows: the client's, in its flent.sh after
Flent's lead-in as the side flows do; the server's, when Flent's first ping arrives there
(fl-first-ping on its own capture device) and the lead-in has passed, by its own clock.
The sender stops at the end of the test (flent.sh), the receiver when the server collects.
Each side runs under a small wrapper that records its start and, if it ends by itself, its
exit status as JSON lines in the cell folder (SchemeSide.status: read by run/evaluate.py).
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Literal

q = shlex.quote
#: The wrapper each side runs under (`sh -c WRAPPER sh STATUS IN OUT ARGV…`, in the side's
#: own folder): "start" when it starts, "exit" with the status if its program ends by itself
#: (stopped, the wrapper dies with it: no line); the program's input is IN (`hold`: an open
#: pipe nothing writes to), its output OUT (`-`: the side's log, as fl-start opened it; a
#: VM's shared folder refuses a second open of it through /dev/stdout).
WRAPPER = ('st=$1 in=$2 out=$3; shift 3; [ "$out" = - ] || exec > "$out"; '
           'echo "{\\"event\\": \\"start\\", \\"at\\": $(date +%s.%N)}" > "$st"; '
           'if [ "$in" = hold ]; then tail -f /dev/null | "$@"; else "$@" < "$in"; fi; '
           'rc=$?; echo "{\\"event\\": \\"exit\\", \\"at\\": $(date +%s.%N), \\"status\\": $rc}" >> "$st"')
SHELLCHECK_WRAPPER = "# shellcheck disable=SC2016  # the wrapper's $ are its own shell's"
#: scheme_cpu PIDFILE STATUS: the CPU seconds the side's process group has used so far
#: (each live process's user and system time, /proc/PID/stat), as a "cpu" JSON line, read
#: before the side is stopped (none once its group is gone: a program that ended by itself
#: left no account): a side whose program uses a whole core is CPU-bound. Each
#: file is read with getline, which returns -1 for a process gone since the glob (awk
#: given a file it cannot open stops, its END unrun: seen in a VM, where processes come
#: and go between the two).
CPU_FUNCTION = ("scheme_cpu() { { read -r pid _ < \"$1\"; } 2>/dev/null || return 0; "
                "awk -v g=\"$pid\" -v hz=\"$(getconf CLK_TCK)\" -v now=\"$(date +%s.%N)\" "
                "'BEGIN { for (i = 1; i < ARGC; i++) { if ((getline s < ARGV[i]) > 0) { sub(/^.*\\) /, \"\", s); "
                "split(s, f, \" \"); if (f[3] == g) { n++; t += f[12] + f[13] } } close(ARGV[i]) } "
                "if (n) printf \"{\\\"event\\\": \\\"cpu\\\", \\\"at\\\": %s, \\\"seconds\\\": %.2f}\\n\", now, t / hz }' "
                "/proc/[0-9]*/stat 2>/dev/null >> \"$2\"; }")
#: The server's connecting side first waits for Flent's first ping to arrive and the lead-in.
AFTER_FIRST_PING = ('fl=$1 dev=$2 lead=$3; shift 3; t0=$("$fl/fl-first-ping" "$dev" request); '
                    '"$fl/fl-wait-from" "$t0" "$lead"; ')


@dataclass(frozen=True)
class SchemeSide:
    """One side of one scheme flow on its host."""

    flow: int  # the flow's number in the cell, from 1
    scheme: str
    side: Literal["sender", "receiver"]
    scratch: str  # the host's scratch folder: fl's helpers, the pid file
    folder: str  # its own folder in the scratch folder ({dir}): keys, the file sent
    log: str  # its output, in the cell folder
    status: str  # its start and exit, in the cell folder
    setup: tuple[tuple[str, ...], ...]  # commands run in setup.sh before it starts
    argv: tuple[str, ...]
    start: Literal["setup", "lead", "first_ping"]  # listening from setup; with the flows (flent.sh); on the server, with them
    stop: str  # the signal that ends it
    stdin: str = "/dev/null"  # its input: a file, or `hold` (open and empty)
    stdout: str = "-"  # its output: its log (-), or /dev/null
    file_bytes: int | None = None  # the sender's file to send ({file}), made sparse
    file: str | None = None
    first_ping_dev: str | None = None  # the server's device Flent's ping arrives on (start: first_ping)

    @property
    def pidfile(self) -> str:
        return q(f"{self.scratch}/scheme-{int(self.flow)}.{self.side}.pid")

    def helper(self, name: str) -> str:
        return q(f"{self.scratch}/{name}")

    @property
    def title(self) -> str:
        return f"flow {self.flow}'s {self.side} (scheme {self.scheme})"


def _start(s: SchemeSide, lead_s: int) -> str:
    """The fl-start line that starts S under its wrapper (fl-start: a process group of its own)."""
    words = " ".join(q(w) for w in s.argv)
    if s.start == "first_ping":
        assert s.first_ping_dev is not None, "a server side that starts with the flows needs its device"
        script, pre = AFTER_FIRST_PING + WRAPPER, f"{q(s.scratch)} {q(s.first_ping_dev)} {int(lead_s)} "
    else:
        script, pre = WRAPPER, ""
    return (f"(cd {q(s.folder)} && {s.helper('fl-start')} {s.pidfile} {q(s.log)} sh -c {q(script)} sh {pre}{q(s.status)} "
            f"{q(s.stdin)} {q(s.stdout)} {words} )")


def setup_lines(sides: tuple[SchemeSide, ...], lead_s: int) -> list[str]:
    """setup.sh's part: each side's folder, its file and its own setup, then the sides that
    listen (and the server's that wait for Flent's first ping) started."""
    out: list[str] = []
    when = {"setup": "it started, listening", "first_ping": "it started, waiting for the flows",
            "lead": "it, started with the flows (flent.sh)"}
    for s in sides:
        out += [f"# {s.title}: its folder, the commands its scheme file runs first, and",
                f"# {when[s.start]}.",
                f"rm -rf {q(s.folder)} {q(s.status)}",
                f"mkdir -p {q(s.folder)}"]
        if s.file is not None and s.file_bytes is not None:
            out.append(f"truncate -s {int(s.file_bytes)} {q(s.file)}  # sparse: it takes no room")
        out += [f"run {' '.join(q(w) for w in argv)}" for argv in s.setup]
        if s.start != "lead":
            out += [f"echo {q('+ ' + ' '.join(s.argv) + ' > ' + s.log)}", SHELLCHECK_WRAPPER, _start(s, lead_s)]
    return out


def flent_lines(sides: tuple[SchemeSide, ...], lead_s: int, end_s: int) -> list[str]:
    """flent.sh's part, after the lead-in (from Flent's first ping, $t0): the client's sides
    that connect started, and every client side stopped at the test's end, END_S after $t0."""
    out = [line for s in sides if s.start == "lead"
           for line in (f"echo {q('+ ' + ' '.join(s.argv))} >> \"$dir/flent.out\"", SHELLCHECK_WRAPPER, _start(s, lead_s))]
    if sides:
        pids = " ".join(s.pidfile for s in sides)
        cpu = "; ".join(f"scheme_cpu {s.pidfile} {q(s.status)}" for s in sides)
        out += [CPU_FUNCTION,
                f'( {sides[0].helper("fl-wait-from")} "$t0" {int(end_s)}; {cpu}; '
                f'{sides[0].helper("fl-stop")} -{q(sides[0].stop)} {pids} ) &',
                "schemes_stop=$!"]
    return out


def after_flent_lines(sides: tuple[SchemeSide, ...]) -> list[str]:
    """flent.sh's part once Flent has ended: the client's sides stopped if still running."""
    if not sides:
        return []
    return ["kill $schemes_stop 2>/dev/null; wait $schemes_stop 2>/dev/null",
            f"{sides[0].helper('fl-stop')} -{q(sides[0].stop)} " + " ".join(s.pidfile for s in sides)]


def collect_lines(sides: tuple[SchemeSide, ...]) -> list[str]:
    """collect.sh's part: the host's sides' CPU time, then they are stopped (those already
    stopped are skipped)."""
    if not sides:
        return []
    return [CPU_FUNCTION, *(f"scheme_cpu {s.pidfile} {q(s.status)}; {s.helper('fl-stop')} -{q(s.stop)} {s.pidfile}"
                            f"  # {s.title}" for s in sides)]
