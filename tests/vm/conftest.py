"""Fixtures of the VM tests: one parallel VM run shared by every module that reads it,
and the L4S lab's image, probes and run shared by the two modules that read those."""
from __future__ import annotations

import shutil
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from flrun import REPO, FlProcess, newest_kernel, qemus, run_fl, statuses
from guest import booted

from flharness.image.store import load_image

#: One `fl run --vm --parallel 2` (two VMs, each booted once) serves every VM test module:
#: the acceptance matrix and a repeated cell (test_e2e_vm), path features and the
#: Pantheon scenario (…_features), tunnels (…_tunnel), and two single-flow cells (a serial
#: run repeats them: …_parallel). The VM tests ask for what they check: TCG and the
#: virtual clock (on a KVM host fl would pick KVM and the real clock).
VM_SCENARIOS = [str(REPO / "tests" / "scenarios" / f"{n}.yml")
                for n in ("vm-aqm", "vm-det", "vm-features", "pantheon-seed", "vm-tunnel", "vm-par")]
VM_CELLS = 6 + 1 + 9 + 4 + 6 + 2
VM_OPTIONS = ["--vm", "--vm-accel", "tcg", "--vm-clock", "virtual"]


#: test_e2e_vm_parallel's run of vm-par in one VM of its own, started in the background
#: once the session's run ended: it takes one core while the modules in between (a kernel
#: image built from .deb files, the l4s image's build) leave one idle; on the virtual
#: clock the load does not change its results.
SERIAL = str(REPO / "tests" / "scenarios" / "vm-par.yml")
SERIAL_CELLS = "*-20ms"  # vm-par's cells (all at 20 ms: at 80 ms one flow's goodput varies most, test_e2e_vm_parallel)


@pytest.fixture(scope="session")
def vm_run(tmp_path_factory):
    """The parallel VM run, interrupted (SIGINT) after its first two cells completed while
    both VMs run cells, then resumed; then the serial run of vm-par's cells starts ("serial": its
    process, results folder and kernel image), ended at the latest with the session."""
    results = tmp_path_factory.mktemp("vm-results")
    fl = FlProcess("run", *VM_SCENARIOS, *VM_OPTIONS, "--parallel", "2", "--results", str(results))
    fl.wait_for_line(f"/{VM_CELLS}] vm", timeout=900)  # a cell started
    fl.wait_for_line(" ok ", timeout=900)  # the first cell is done
    fl.wait_for_line(" ok ", timeout=900)  # and the second (little of a cell is lost at SIGINT)
    fl.wait_for_line(" … (run ETA", timeout=300)  # the VM that ran it has its next cell: both run cells
    qemu_argv = [Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode() for pid in qemus(results)]
    fl.send_signal(signal.SIGINT)
    rc = fl.finish(timeout=180)  # fl kills its VMs on SIGTERM: finish() sends it on a timeout
    killed = {"rc": rc, "qemus": qemus(results), "statuses": statuses(results), "out": fl.output,
              "qemu_argv": qemu_argv}
    resumed = run_fl("run", *VM_SCENARIOS, *VM_OPTIONS, "--parallel", "2", "--results", str(results),
                     timeout=4800)
    serial_results, image = tmp_path_factory.mktemp("vm-serial"), newest_kernel()
    serial = FlProcess("run", SERIAL, "--only", SERIAL_CELLS, "--vm", str(image), "--vm-accel", "tcg",
                       "--vm-clock", "virtual", "--results", str(serial_results))
    yield {"killed": killed, "resumed": resumed, "root": results / "default",
           "serial": (serial, serial_results / "default" / "vm-par", image), "serial_only": SERIAL_CELLS}
    if serial.proc.poll() is None:  # the session ended before a test waited for it
        serial.proc.terminate()
        serial.proc.wait(timeout=180)


#: The L4S lab: `fl image build l4s` (twice: the second finds it built), `fl check` (its
#: QEMU's command line noted) and `fl list` of s1 booting a VM each on the real clock
#: (quicker, and a probe does not depend on time) while a third VM loads, runs and
#: unloads fl's TCP Prague by hand and a fourth, booted without IPv6, provokes its
#: responses (tests/vm/prague_probe.sh); then
#: one run of the l4s scenarios on two VMs on the virtual clock (results as one VM's, CI's
#: time halved). Read by test_e2e_vm_l4s (dualpi2, AccECN, ECN actions, a reproduction
#: page), test_e2e_vm_prague (fl's Prague module) and test_e2e_vm_schemes (QUIC).
L4S_IMAGE = "l4s"
L4S_SCENARIOS = [str(REPO / "tests" / "scenarios" / f"{n}.yml") for n in ("vm-l4s", "vm-s1", "vm-prague", "vm-video",
                                                                             "vm-schemes")]
L4S_REAL = ["--vm", L4S_IMAGE, "--vm-accel", "tcg", "--vm-clock", "real"]
L4S_VIRTUAL = ["--vm", L4S_IMAGE, "--vm-accel", "tcg", "--vm-clock", "virtual"]
#: In a guest of the l4s image: fl's Prague in use, unloaded, loaded again; the netfilter
#: hooks it registers in every network namespace listed at each step (`nft list hooks`
#: names every hook and its module), tc and nftables state of a namespace of its own
#: before and after, and the kernel's messages.
PRAGUE_CYCLE = r"""
hooks() { echo "== hooks $1"; nft list hooks ip; nft list hooks ip6; ip netns exec pmod nft list hooks ip; }
ip netns add pmod && ip -n pmod link set lo up
ip netns exec pmod nft add table inet pmodt && ip netns exec pmod nft add chain inet pmodt c
tc -n pmod qdisc add dev lo root fq_codel
sysctl -qw net.ipv4.tcp_ecn=3; ip netns exec pmod sysctl -qw net.ipv4.tcp_ecn=3
echo "== available"; cat /proc/sys/net/ipv4/tcp_available_congestion_control
hooks loaded
ip netns exec pmod iperf -s -p 5201 >/dev/null 2>&1 & server=$!
sleep 1
echo "== flow"; ip netns exec pmod iperf -c 127.0.0.1 -p 5201 -Z prague -t 2 -f m 2>&1 | tail -1
kill $server; wait $server 2>/dev/null; sleep 1
echo "== rmmod"; rmmod tcp_prague && echo unloaded
echo "== available after"; cat /proc/sys/net/ipv4/tcp_available_congestion_control
hooks unloaded
echo "== modprobe"; modprobe tcp_prague && echo loaded
ip netns add pmod2
echo "== new namespace"; ip netns exec pmod2 nft list hooks ip
hooks reloaded
echo "== state"; ip netns exec pmod nft list tables; tc -n pmod qdisc show dev lo
echo "== dmesg"; dmesg
ip netns del pmod; ip netns del pmod2
"""


def prague_cycle() -> dict:
    with booted(L4S_IMAGE) as guest:
        done = guest.sh(PRAGUE_CYCLE, timeout=600)
        return {"rc": done.returncode, "out": done.stdout, "err": done.stderr, "kernel_log": guest.kernel_log()}


#: fl's Prague provoked by hand (tests/vm/prague_probe.sh) in a guest booted without IPv6:
#: its parameters, who may select it, its .release, and three flows whose tracepoints
#: show its answers to a loss inside a CE cut's CWR state, to local congestion and to
#: heavy loss. Read by test_e2e_vm_prague_module.
PRAGUE_PROBE = REPO / "tests" / "vm" / "prague_probe.sh"


def prague_probe(keep: Path) -> dict:
    with booted(L4S_IMAGE, append="ipv6.disable=1") as guest:
        done = guest.run_script(PRAGUE_PROBE, "/run/fl-results/probe", timeout=1200)
        shutil.copytree(guest.results / "probe", keep)
        return {"rc": done.returncode, "out": done.stdout, "err": done.stderr, "traces": keep,
                "kernel_log": guest.kernel_log()}


@pytest.fixture(scope="session")
def l4s_lab(tmp_path_factory):
    build = run_fl("image", "build", L4S_IMAGE, timeout=1200)
    assert build.returncode == 0, build.stdout + build.stderr
    image = load_image(L4S_IMAGE)
    assert image is not None
    again = run_fl("image", "build", L4S_IMAGE, timeout=120)
    rebuilt = load_image(L4S_IMAGE)
    results = tmp_path_factory.mktemp("l4s-results")
    check = FlProcess("check", *L4S_REAL)
    with ThreadPoolExecutor(max_workers=3) as pool:
        cycle, listed = pool.submit(prague_cycle), pool.submit(run_fl, "list", "s1-rttfair", *L4S_REAL, timeout=900)
        probe = pool.submit(prague_probe, tmp_path_factory.mktemp("prague-probe") / "traces")
        qemu = check.qemu_command()
        checked = {"rc": check.finish(timeout=900), "out": check.output, "qemu": qemu}
        module = cycle.result(timeout=900)
        probed = probe.result(timeout=1500)
    return {
        "build": build, "image": image, "again": again, "built_again": rebuilt.manifest.built if rebuilt else None,
        "check": checked, "list": listed.result(timeout=900), "prague_cycle": module, "prague_probe": probed,
        "run": run_fl("run", *L4S_SCENARIOS, *L4S_VIRTUAL, "--parallel", "2", "--results", str(results),
                      timeout=3000),
        "root": results / "default",
    }
