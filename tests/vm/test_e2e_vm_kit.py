"""fl's modules on a Linux 7.3 host that has none (issue: the L4S lab on real machines):
the l4s image's guest, booted with fl.extra_modules=off (its own tcp_prague and
sch_dualpi2 hidden, none loaded), plays the host. `fl modules build` builds the kit for
its release from Debian's headers (then finds it built), `fl run --load-modules` copies
it into the guest and loads it through Ansible, and a Prague cell through dualpi2 runs:
ECT(1) in the capture, the L queue's counters, and cell.json naming the kit's file."""
from __future__ import annotations

import json
import re

import pytest
from flrun import REPO, needs_vm, run_fl
from guest import KERNEL_TROUBLE
from resultlib import CLI, ECT1, find, read_pcap

from flharness.image.kit import kit_folder, load_kit
from flharness.image.store import load_image
from flharness.testbed.probe import KIT_DIR

pytestmark = [pytest.mark.vm, needs_vm()]
SCENARIO = REPO / "tests" / "scenarios" / "vm-kit.yml"
HOST = ["--vm", "l4s", "--vm-accel", "tcg", "--vm-clock", "virtual", "--vm-append", "fl.extra_modules=off"]


@pytest.fixture(scope="module")
def kit_lab(tmp_path_factory):
    image = run_fl("image", "build", "l4s", timeout=1200)  # the L4S lab's (conftest.py), or cached
    assert image.returncode == 0, image.stdout + image.stderr
    built_image = load_image("l4s")
    assert built_image is not None
    release = built_image.manifest.kernel.release
    built = run_fl("modules", "build", "--release", release, "--force", timeout=1500)
    again = run_fl("modules", "build", "--release", release, timeout=120)
    results = tmp_path_factory.mktemp("kit-results")
    run = run_fl("run", str(SCENARIO), *HOST, "--load-modules", "--results", str(results), timeout=1800)
    return {"release": release, "built": built, "again": again, "run": run, "root": results / "default"}


def test_the_kit_is_built_for_the_release_and_then_found_built(kit_lab):
    built, again, release = kit_lab["built"], kit_lab["again"], kit_lab["release"]
    assert built.returncode == 0, built.stdout + built.stderr
    kit = load_kit(release)
    assert kit is not None and [m.name for m in kit.modules] == ["sch_dualpi2", "tcp_prague"], kit
    assert all(m.vermagic.split()[0] == release for m in kit.modules), kit.modules
    assert str(kit_folder(release)) in built.stdout and kit.suite == "trixie-backports"
    assert again.returncode == 0 and "up to date" in again.stdout + again.stderr, again.stdout + again.stderr


def test_fl_loaded_its_own_modules_into_a_kernel_that_had_none(kit_lab):
    """Neither module was loaded, and the kernel's copy of dualpi2 could not be loaded
    (hidden): fl-load-modules inserted the kit's files."""
    run = kit_lab["run"]
    assert run.returncode == 0, run.stdout + run.stderr
    said = run.stdout + run.stderr
    for name in ("sch_dualpi2", "tcp_prague"):
        assert re.search(rf"module {name} on \S+: loaded \({re.escape(KIT_DIR)}/{name}\.ko\)", said), said


def test_a_prague_cell_through_dualpi2_ran_with_the_kits_prague(kit_lab):
    rec, _, d = find(kit_lab["root"], "vm-kit")
    assert rec["status"] == "ok", rec["reason"]
    assert rec["kernel"] == kit_lab["release"]
    kit = load_kit(kit_lab["release"])
    prague = next(m for m in kit.modules if m.name == "tcp_prague")
    module = rec["cc_modules"]["prague"]
    assert module["file"] == f"{KIT_DIR}/tcp_prague.ko" and module["sha256"] == prague.sha256, module
    data = [p for p in read_pcap(d / "cli.pcap.xz") if p.proto == 6 and p.payload > 0 and p.src == CLI
            and 12865 not in (p.sport, p.dport)]
    assert sum(p.ecn == ECT1 for p in data) >= 0.99 * len(data) > 2000, len(data)
    upload = (d / "teardown.log").read_text().split("$ tc -s -d qdisc show dev mid.r;", 1)[1].split("\n$ ", 1)[0]
    pkts_in_l = int(re.search(r"pkts_in_l (\d+)", upload.split("qdisc dualpi2", 1)[1]).group(1))
    assert pkts_in_l >= 0.99 * len(data), (pkts_in_l, len(data))
    assert json.loads((d / "cell.json").read_text())["cc_modules"]["prague"]["version"] == "3"


def test_the_guests_kernel_log_is_clean_after_loading_the_kit(kit_lab):
    """The guest's kernel messages over the boot, the loads and the cell (kept by fl)."""
    logs = sorted(kit_lab["root"].glob("vm-kernel-*.log"))
    assert len(logs) == 1
    text = logs[0].read_text(errors="replace")
    assert not KERNEL_TROUBLE.search(text), text[-3000:]
