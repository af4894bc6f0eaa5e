"""The VM backend's choice of accelerator and clock, on a host with KVM and on one
without (kvm_usable is replaced; no VM is booted): `auto` takes KVM and the real clock
where KVM works, TCG and the virtual clock elsewhere, and an explicit request (as the
VM tests make: --vm-accel tcg --vm-clock virtual) holds on either host."""
from __future__ import annotations

import pytest

from flharness.errors import FlError
from flharness.testbed import vm

KERNEL = ("/boot/vmlinuz-test", "6.1.0-test")


@pytest.fixture(params=[True, False], ids=["kvm-host", "no-kvm-host"])
def host(request, monkeypatch):
    monkeypatch.setattr(vm, "kvm_usable", lambda: request.param)
    monkeypatch.setattr(vm, "resolve_kernel", lambda spec: KERNEL)
    return request.param


def test_auto_takes_kvm_where_it_works(host):
    cfg = vm.vm_config()
    assert (cfg.accel, cfg.clock) == (("kvm", "real") if host else ("tcg", "virtual"))
    assert ("-icount" in cfg.qemu_opts(2222)) == (not host)


def test_an_explicit_tcg_virtual_clock_holds_on_every_host(host):
    cfg = vm.vm_config(accel="tcg", clock="virtual")
    assert (cfg.accel, cfg.clock, cfg.cpus) == ("tcg", "virtual", 1)
    assert "-accel tcg" in cfg.qemu_opts(2222) and "-icount shift=0,sleep=off" in cfg.qemu_opts(2222)
    assert cfg.describe()["accel"] == "tcg"


def test_impossible_combinations_are_refused(host):
    with pytest.raises(FlError, match="needs --vm-accel tcg"):
        vm.vm_config(accel="kvm", clock="virtual")
    with pytest.raises(FlError, match="one vCPU"):
        vm.vm_config(accel="tcg", clock="virtual", cpus=2)
