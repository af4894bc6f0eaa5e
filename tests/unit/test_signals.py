"""SIGTERM and SIGHUP stop fl as Ctrl-C does (run/signals.py), so that a probe's VM or
ssh session is removed when `fl list --vm` or `fl check` is killed mid-boot (a `timeout`
round them left the VM running, its vng re-parented to init)."""
from __future__ import annotations

import os
import signal
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import pytest

from flharness.run import vm_probe
from flharness.run.signals import signals_as_interrupt


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_within_is_an_interrupt_and_the_handler_is_restored_after(signum):
    before = signal.getsignal(signum)
    with pytest.raises(KeyboardInterrupt), signals_as_interrupt():
        os.kill(os.getpid(), signum)
    assert signal.getsignal(signum) == before


class SignalledTestbed:
    """A testbed whose boot is interrupted by SIGTERM, as `timeout` does."""
    made: ClassVar[list[SignalledTestbed]] = []

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.downed = False
        SignalledTestbed.made.append(self)

    def boot(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)

    def down(self) -> None:
        self.downed = True


class Unhandled(Exception):
    """SIGTERM reached the handler the test put in place of Python's default (which would
    end the test run itself): the probe did not handle it."""


def unhandled(signum: int, frame: object) -> None:
    raise Unhandled


def test_a_probe_killed_while_its_vm_boots_removes_the_vm(monkeypatch):
    previous = signal.signal(signal.SIGTERM, unhandled)
    try:
        _probes_interrupted(monkeypatch)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _probes_interrupted(monkeypatch) -> None:
    monkeypatch.setattr(vm_probe, "Testbed", SignalledTestbed)
    monkeypatch.setattr(vm_probe, "load_inventory", lambda path: None)
    cfg = SimpleNamespace(release="7.3", accel="tcg", clock="virtual")
    with pytest.raises(KeyboardInterrupt):
        vm_probe.probe_in_vm(cfg, Path("inventory.ini"), None)  # type: ignore[arg-type]
    with pytest.raises(KeyboardInterrupt):
        vm_probe.probe_ssh(SimpleNamespace(path="hosts.ini"), None)  # type: ignore[arg-type]
    assert len(SignalledTestbed.made) == 2 and all(tb.downed for tb in SignalledTestbed.made)
