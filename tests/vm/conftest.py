"""Fixtures of the VM tests: one parallel VM run shared by every module that reads it,
and the L4S lab's image, probes and run shared by the two modules that read those."""
from __future__ import annotations

import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from flrun import REPO, FlProcess, newest_kernel, qemus, run_fl, statuses
from guest import booted

from flharness.image.store import load_image

#: One `fl run --vm --parallel 2` (two VMs, each booted once) serves every VM test module:
#: the acceptance matrix and a repeated cell (test_e2e_vm), path features and the
#: Pantheon scenario (…_features), tunnels (…_tunnel), and four deterministic cells that
#: a serial run repeats (…_parallel). The VM tests ask for what they check: TCG and the
#: virtual clock (on a KVM host fl would pick KVM and the real clock).
VM_SCENARIOS = [str(REPO / "tests" / "scenarios" / f"{n}.yml")
                for n in ("vm-aqm", "vm-det", "vm-features", "pantheon-seed", "vm-tunnel", "vm-par")]
VM_CELLS = 6 + 1 + 9 + 2 + 5 + 4
VM_OPTIONS = ["--vm", "--vm-accel", "tcg", "--vm-clock", "virtual"]


#: test_e2e_vm_parallel's run of vm-par in one VM of its own, its kernel named by path,
#: started in the background once the session's run ended: it takes one core while the
#: modules in between (a kernel image built from .deb files, the l4s image's build) leave
#: one idle; on the virtual clock the load does not change its results. It is also the
#: interrupted run: SIGINT once a cell is done and the next under way, then the same
#: command again, which resumes it.
SERIAL = str(REPO / "tests" / "scenarios" / "vm-par.yml")


class SerialRun:
    """vm-par in one VM, interrupted and resumed, in a thread: `result()` waits for it."""

    def __init__(self, results: Path, image: Path) -> None:
        self.results, self.image = results, image
        self.argv = ("run", SERIAL, "--vm", str(image), "--vm-accel", "tcg", "--vm-clock", "virtual",
                     "--results", str(results))
        self.fl: FlProcess | None = None
        self.stopped = False
        self._pool = ThreadPoolExecutor(max_workers=1)
        self._future = self._pool.submit(self._run)

    def _start(self) -> FlProcess:
        if self.stopped:
            raise RuntimeError("the session ended")
        self.fl = FlProcess(*self.argv)
        return self.fl

    def _run(self) -> dict:
        fl = self._start()
        fl.wait_for_line(" ok ", timeout=1800)  # a cell is done
        fl.wait_for_line(" … (run ETA", timeout=600)  # the next one is under way
        fl.send_signal(signal.SIGINT)
        rc = fl.finish(timeout=180)  # fl kills its VM on SIGTERM: finish() sends it on a timeout
        killed = {"rc": rc, "qemus": qemus(self.results), "statuses": statuses(self.results), "out": fl.output}
        again = self._start()
        return {"killed": killed, "resumed": (again.finish(timeout=2400), again.output)}

    def result(self) -> dict:
        return self._future.result(timeout=3600)

    def stop(self) -> None:
        """At the session's end: fl told to stop (it removes its VM) if it still runs."""
        self.stopped = True
        if self.fl is not None and self.fl.proc.poll() is None:
            self.fl.proc.terminate()
            self.fl.proc.wait(timeout=180)
        self._pool.shutdown(wait=False)


@pytest.fixture(scope="session")
def vm_run(tmp_path_factory):
    """The parallel VM run to its end (its two QEMUs' command lines read while they run
    cells); then the serial run of vm-par starts ("serial": a SerialRun and the kernel
    image it names), stopped at the latest with the session."""
    results = tmp_path_factory.mktemp("vm-results")
    fl = FlProcess("run", *VM_SCENARIOS, *VM_OPTIONS, "--parallel", "2", "--results", str(results))
    fl.wait_for_line(f"/{VM_CELLS}] vm", timeout=900)  # a cell started: both VMs are up
    qemu_argv = [Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode() for pid in qemus(results)]
    rc = fl.finish(timeout=4800)
    image = newest_kernel()
    serial = SerialRun(tmp_path_factory.mktemp("vm-serial"), image)
    yield {"rc": rc, "out": fl.output, "qemu_argv": qemu_argv, "root": results / "default",
           "serial": (serial, serial.results / "default" / "vm-par", image)}
    serial.stop()


#: The L4S lab: `fl image build l4s` (twice: the second finds it built), `fl check` (its
#: QEMU's command line noted) and `fl list` of s1 booting a VM each on the real clock
#: (quicker, and a probe does not depend on time) while a third VM loads, runs and
#: unloads fl's TCP Prague by hand; then
#: one run of the l4s scenarios on two VMs on the virtual clock (results as one VM's, CI's
#: time halved). Read by test_e2e_vm_l4s (dualpi2, AccECN, ECN actions, a reproduction
#: page) and test_e2e_vm_prague (fl's Prague module).
L4S_IMAGE = "l4s"
L4S_SCENARIOS = [str(REPO / "tests" / "scenarios" / f"{n}.yml") for n in ("vm-l4s", "vm-s1", "vm-prague")]
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
    with ThreadPoolExecutor(max_workers=2) as pool:
        cycle, listed = pool.submit(prague_cycle), pool.submit(run_fl, "list", "s1-rttfair", *L4S_REAL, timeout=900)
        qemu = check.qemu_command()
        checked = {"rc": check.finish(timeout=900), "out": check.output, "qemu": qemu}
        module = cycle.result(timeout=900)
    return {
        "build": build, "image": image, "again": again, "built_again": rebuilt.manifest.built if rebuilt else None,
        "check": checked, "list": listed.result(timeout=900), "prague_cycle": module,
        "run": run_fl("run", *L4S_SCENARIOS, *L4S_VIRTUAL, "--parallel", "2", "--results", str(results),
                      timeout=3000),
        "root": results / "default",
    }
