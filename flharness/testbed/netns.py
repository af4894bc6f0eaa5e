"""Direct namespace handling: the safety net under the Ansible teardown, and `fl clean`.

fl's namespaces are named ``fl-<6 hex>-<host>`` (testbeds: a testbed's id, new_testbed_id,
then the host, as inventory.ini's fl_netns names them; a unit test holds the two equal)
and ``fl-probe-<6 hex>`` (capability probes); nothing else is ever touched.
"""
from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import subprocess
import time

TESTBED_NS_RE = re.compile(r"^fl-[0-9a-f]{6}-(cli|mid|srv)$")
PROBE_NS_RE = re.compile(r"^fl-probe-[0-9a-f]{6}$")


def new_testbed_id() -> str:
    """A testbed's id: its namespaces, state file and scratch folders are named with it."""
    return f"fl-{secrets.token_hex(3)}"


def list_namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def is_fl_namespace(name: str) -> bool:
    return bool(TESTBED_NS_RE.match(name) or PROBE_NS_RE.match(name))


def pids_in(ns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
    return [int(p) for p in out.split() if p.isdigit()]


#: Rounds of killing a namespace's processes: a script killed while it forks leaves a child
#: that was not there when the PIDs were listed (CI once left a Flent so), so fl lists again.
KILL_ROUNDS = 20


def remove(ns: str) -> None:
    """Kill every process in one of fl's namespaces (by PID) until none is left, then delete it."""
    if not is_fl_namespace(ns):
        raise ValueError(f"refusing to touch namespace {ns!r}: not one of fl's")
    for _ in range(KILL_ROUNDS):
        if not (pids := pids_in(ns)):
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def testbed_namespaces(testbed_id: str) -> list[str]:
    return [n for n in list_namespaces() if n.startswith(f"{testbed_id}-") and TESTBED_NS_RE.match(n)]
