"""One testbed of a run: its id, the inventory fl writes for it, its Ansible session and,
on the VM backend, its VM. Built once, fed cells one at a time, removed whatever happens.

A state file under /run/fl/testbeds/ records each live testbed (its id, inventory, the
fl process, its playbook and VM) so that a later fl can remove what a killed run left.
FL_STATE_ROOT moves /run/fl: fl processes with different ones never see (or remove) each
other's testbeds (CI runs its two suites at once that way).
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from ..errors import FlError
from ..hosts import HOSTS
from ..programs import probe
from ..results import run_folder
from . import netns
from .ansible import PlaybookResult, run_playbook
from .inventory import Inventory, testbed_inventory
from .plan import host_dirs, playbook_extra_vars
from .playbook_vars import CellVars, RunVars
from .probe_reply import ProbeReply
from .probing import probe_hosts
from .session import Session
from .vm import Vm, VmConfig

LOG = logging.getLogger(__name__)
STATE_ROOT = Path(os.environ.get("FL_STATE_ROOT") or "/run/fl")
STATE_DIR = STATE_ROOT / "testbeds"
REACH_RETRY_S = 2.0  # between tries to reach a host lost mid-run
#: Cells per included batch of the session playbook (playbooks/tasks/cells.yml).
BATCH = 16

#: Ansible's names of its ssh connection: an ssh testbed's hosts with it run fl_ssh.
SSH_CONNECTIONS = (None, "ssh", "ansible.builtin.ssh", "smart")


def ssh_connection(inv: Inventory) -> dict[str, Any] | None:
    """An ssh testbed's hosts reached by fl_ssh (plugins/connection: Ansible's ssh, with
    the cells' scripts, which hold their tunnels' keys, on the remote shell's input, not
    on command lines), unless the inventory names another connection."""
    if inv.backend != "ssh" or any(inv.written[h].get("ansible_connection") not in SSH_CONNECTIONS for h in HOSTS):
        return None
    return {"ansible_connection": "fl_ssh"}


class TestbedError(FlError):
    pass


class Testbed:
    """`start` builds the testbed (booting its VM first, if any); `want_cell` / `give`
    hand it cells; `down` removes everything of it."""

    def __init__(self, inv: Inventory, run_vars: RunVars | None, log: Path, label: str = "",
                 vm: VmConfig | None = None, results: Path | None = None, testbed_id: str | None = None) -> None:
        self.inv, self.log, self.label = inv, log, label
        self.id = testbed_id or netns.new_testbed_id()
        self.run_vars = run_vars  # fl_run: None until the run has planned its cells
        self.folder = STATE_ROOT / "ctl" / self.id  # this machine's: session, inventory, VM
        self.inventory = self.folder / "inventory.yml"
        self.state_file = STATE_DIR / f"{self.id}.json"
        self.vm = Vm(vm, self.folder / "vm", results, log.parent / run_folder.vm_kernel_log(self.id)) if vm else None
        self.session: Session | None = None
        self.started = time.time()
        self.touched = False  # something was started or configured: down must undo it
        self.removed = False  # its session removed it (after its last cell)
        self.unreached: list[str] = []  # hosts its removal could not reach (ssh): its state stays for `fl clean`
        self.kept = False  # its state file stayed for that reason

    @property
    def kind(self) -> str:
        return "vm" if self.vm else self.inv.backend

    @property
    def host_dirs(self) -> dict[str, str]:
        """Each host's scratch folder (plan.host_dirs)."""
        return host_dirs(self.id, str(STATE_ROOT))

    def extra_vars(self) -> dict[str, Any]:
        return playbook_extra_vars(self.id, str(STATE_ROOT), self.inv, self.run_vars).to_ansible()

    # --- building ---------------------------------------------------------------------------

    def boot(self) -> None:
        """Start the VM (if any) without waiting for it; writes the state file first (before
        the testbed's folder: `fl clean` removes folders without one)."""
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        self._save_state()
        self.folder.mkdir(parents=True, exist_ok=True)
        self.folder.chmod(0o700)
        if self.vm:
            self.touched = True
            self.vm.boot()
            self._save_state()

    def ready(self) -> None:
        """Wait for the VM's sshd (if any) and write the testbed's inventory."""
        if self.vm:
            self.vm.wait_ready()
        host_settings, nsroot = ssh_connection(self.inv), None
        if self.inv.backend == "netns":
            nsroot = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
        if self.vm:
            ssh = self.vm.ssh_settings()
            host_settings = {**ssh, "ansible_connection": "fl_netns_ssh"}
            nsroot = {**ssh, "ansible_connection": "ssh"}
        self.inventory.write_text(yaml.safe_dump(testbed_inventory(self.inv, host_settings, nsroot), sort_keys=False))

    def start(self) -> None:
        """Start the session playbook: it builds the testbed, then asks for a first cell."""
        self.session = Session(self.inventory, self.extra_vars(), self.folder / "session", self.log)
        self.touched = True
        self.session.start()
        self._save_state()

    def probe(self, request: probe.Request) -> dict[str, ProbeReply]:
        """Run the kernel probe on the testbed's hosts (ssh) or in its VM guest, per host."""
        asked = request.copy()
        asked["timeouts"] = not (self.vm and self.vm.cfg.virtual_clock)  # probe.COMMAND_TIMEOUT_S
        return probe_hosts(self.inventory, asked, "nsroot" if self.vm else "testbed", self.folder / "kernel-probe.log")

    # --- cells --------------------------------------------------------------------------------

    def path_on_testbed(self, path: Path) -> Path:
        """Where the testbed's hosts see PATH of the results folder (a VM: its share)."""
        return self.vm.guest_path(path) if self.vm else path

    def want_cell(self) -> bool:
        return self.session is not None and self.session.wants_cell()

    def give(self, cell: CellVars | None) -> None:
        assert self.session is not None
        self.session.give(cell)

    def cell_result(self) -> PlaybookResult:
        assert self.session is not None
        return self.session.cell_result()

    def finish(self) -> None:
        """No more cells: the session removes the testbed and ends."""
        assert self.session is not None
        self.session.finish()
        self.removed = self.session.exited() == 0 and not self.session.failures()

    def dead(self) -> str | None:
        """Why the testbed can no longer run cells (its VM or its playbook ended), or None."""
        if self.vm and not self.vm.alive():
            return "the VM stopped unexpectedly (guest kernel panic or QEMU crash); its last kernel " \
                   f"messages:\n{self.vm.last_words()}"
        if self.session and (rc := self.session.exited()) is not None:
            return f"the testbed's ansible-playbook ended (status {rc}): {self.session.build_failure()}"
        return None

    def reach(self, hosts: list[str], wait_s: float) -> str | None:
        """Wait until HOSTS answer over ssh again (WAIT_S at most): None once they do, else
        why the last try failed."""
        deadline = time.monotonic() + wait_s
        while True:
            result = run_playbook("reach", self.inventory, {}, self.log)
            failed = [f for f in result.failures if f.host in hosts]
            if not failed:
                return None
            if time.monotonic() >= deadline:
                return str(failed[0])
            time.sleep(REACH_RETRY_S)

    # --- removal ----------------------------------------------------------------------------

    def down(self) -> None:
        """Remove everything; Ctrl-C is ignored meanwhile so cleanup cannot be cut short."""
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if _main_thread() else None
        try:
            for step in self._down_steps():
                try:  # each step, whatever the one before met (a full disk under fl.log, …)
                    step()
                except OSError as e:
                    LOG.warning("removing testbed %s: %s", self.label or self.id, e)
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)

    def _down_steps(self) -> list[Callable[[], None]]:
        steps: list[Callable[[], None]] = []
        if self.session:
            steps.append(self.session.stop)
        if self.touched and not self.removed and not self.vm:  # a VM's guest takes all fl made in it along
            steps.append(self._playbook_down)
        if self.vm:
            steps.append(self.vm.stop)
        if self.inv.backend == "netns" and not self.vm:
            steps.append(self._remove_namespaces)  # their processes, then the namespaces (netns.remove)
        steps.append(self._forget)
        return steps

    def _forget(self) -> None:
        """Its folder and state file go, unless a host could not be reached to undo what fl
        did there: then both stay, and `fl clean` (or the next run) removes it once it answers."""
        if self.unreached:
            if not self.kept:  # said once
                self.kept = True
                LOG.warning("testbed %s: %s could not be reached; what fl left there is removed by `fl clean` "
                            "once it answers", self.label or self.id, ", ".join(self.unreached))
            self._save_state()
            return
        shutil.rmtree(self.folder, ignore_errors=True)
        self.state_file.unlink(missing_ok=True)

    def _remove_namespaces(self) -> None:
        for ns in netns.testbed_namespaces(self.id):
            netns.remove(ns)

    def _playbook_down(self) -> None:
        if not self.inventory.is_file():
            return
        result = run_playbook("testbed_down", self.inventory, self.extra_vars(), self.log)
        self.unreached = sorted({f.host for f in result.failures if f.unreachable})
        if not result.ok:
            with self.log.open("a") as f:
                f.write(f"\n# testbed_down: {result.reason()}\n")

    def _save_state(self) -> None:
        state = {"id": self.id, "kind": self.kind, "label": self.label, "inventory": str(self.inventory),
                 "source": str(self.inv.path), "testbed": self.inv.name, "backend": self.inv.backend,
                 "pid": 0 if self.kept else os.getpid(),  # a kept testbed is no fl's: the next one removes it
                 "started": self.started, "run_vars": self.run_vars.to_ansible() if self.run_vars else {},
                 "playbook_pid": self.session.pid if self.session else None,
                 "vm_pid": self.vm.pid if self.vm else None, "unreached": self.unreached}
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        tmp.rename(self.state_file)


def _main_thread() -> bool:
    import threading
    return threading.current_thread() is threading.main_thread()


def stale_testbeds() -> list[dict[str, Any]]:
    """State files of testbeds whose fl process is gone."""
    out = []
    for path in sorted(STATE_DIR.glob("fl-*.json")) if STATE_DIR.is_dir() else []:
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not _alive(int(state.get("pid", 0))):
            out.append(state)
    return out


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
