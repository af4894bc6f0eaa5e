"""The calibration verdict's readers, on logs written as fl's scripts write them:
tcpdump's kernel drops per host and offloads read back on from the teardown log, and
per-core CPU saturation from the /proc/stat counters the ss sampler records each second."""
from __future__ import annotations

from flharness.analysis.teardown_log import host_sections
from flharness.run.calibration import _stolen, capture_drops, cpu_intervals, offloads_on, saturated_share, stolen_share, unrecorded_hosts


def test_capture_drops_per_host(tmp_path):
    log = tmp_path / "teardown.log"
    log.write_text("# fl teardown log\n\n======== cli ========\n$ tcpdump statistics\n9 packets captured\n"
                   "9 packets received by filter\n0 packets dropped by kernel\n\n======== mid ========\n$ uname -r\n"
                   "6.1\n\n======== srv ========\n$ tcpdump statistics\n5 packets captured\n17 packets dropped by kernel\n")
    sections = host_sections(log.read_text())
    assert capture_drops(sections) == {"cli": 0, "srv": 17}
    assert unrecorded_hosts(sections) == []


def test_a_host_whose_state_was_not_recorded(tmp_path):
    log = tmp_path / "teardown.log"  # as cell_logs.py writes it when a host's collection printed nothing
    log.write_text("======== cli ========\n$ uname -r\n6.1\n\n======== mid ========\n\n\n"
                   "======== srv ========\n(not collected: host failed)\n")
    assert unrecorded_hosts(host_sections(log.read_text())) == ["mid", "srv"]


def test_offloads_read_back_on(tmp_path):
    log = tmp_path / "teardown.log"
    log.write_text("======== cli ========\n$ ethtool -k cli.0\ncli.0 tcp-segmentation-offload: off\n"
                   "cli.0 generic-segmentation-offload: off\ncli.0 generic-receive-offload: off\n\n"
                   "======== mid ========\nmid.l tcp-segmentation-offload: off\nmid.l generic-receive-offload: on\n"
                   "mid.r generic-segmentation-offload: on [fixed]\n")
    assert offloads_on(host_sections(log.read_text())) == ["mid mid.l generic-receive-offload", "mid mid.r generic-segmentation-offload"]


def test_a_core_busy_most_of_the_test_is_saturated(tmp_path):
    """cpu0 is 99 % busy in 3 of the 4 intervals inside the test window, cpu1 idles; the
    sample before the window (a busy interval) does not count."""
    lines, user0, idle0, idle1 = [], 0, 0, 0
    for k, busy0 in enumerate([True, False, True, True, True, False]):
        lines += [f"# {100 + k}.000000", f"% cpu0 {user0} 0 0 {idle0} 0 0 0 0 0 0",
                  f"% cpu1 0 0 0 {idle1} 0 0 0 0 0 0", "ESTAB 0 0 10.71.1.1:1 10.71.2.1:2"]
        user0 += 99 if busy0 else 10
        idle0 += 1 if busy0 else 90
        idle1 += 100
    log = tmp_path / "cli.ss.log"
    log.write_text("\n".join(lines) + "\n")
    assert saturated_share(cpu_intervals(log.read_text(), 101, 105)) == {"cpu0": 0.75, "cpu1": 0.0}


def test_cpu_time_the_hypervisor_took_is_stolen_and_flagged(tmp_path):
    """/proc/stat's steal (8th counter) over the window: cpu0 loses 20 of 100 ticks in each
    interval, cpu1 none; over 5 % of a core's time flags the cell."""
    lines, steal0, idle = [], 0, 0
    for k in range(5):
        lines += [f"# {100 + k}.000000", f"% cpu0 10 0 0 {idle} 0 0 0 {steal0} 0 0", f"% cpu1 10 0 0 {idle} 0 0 0 0 0 0"]
        steal0 += 20
        idle += 80
    log = tmp_path / "cli.ss.log"
    log.write_text("\n".join(lines) + "\n")
    shares = stolen_share(cpu_intervals(log.read_text(), 100, 104))
    assert shares["cpu1"] == 0 and abs(shares["cpu0"] - 0.2) < 1e-9, shares
    assert _stolen({"cli cpu0": 0.04}) == []
    (flag,) = _stolen({"cli cpu0": 0.2, "cli cpu1": 0.0})
    assert (flag.kind, flag.code) == ("calibration", "cpu_stolen")
    assert flag.text.startswith("the hypervisor took 20% of CPU cli cpu0's time")


def test_niced_time_of_idle_class_cgroups_counts_as_idle(tmp_path):
    """Both cores busy with niced work in each interval of the window (99 of 100 ticks).
    The idle cgroups' CPU time ("% idle NAME NS") covers all of it in one log: the cores
    count as idle; 1 % of it in another: each core is credited 1 % of its niced
    time, busy still; without those lines (niced work outside such cgroups, or an older sampler) the niced
    time is busy time."""
    def log(idle_ns_per_s: int | None) -> str:
        lines = []
        for k in range(6):
            lines += [f"# {100 + k}.000000", f"% cpu0 {k} {99 * k} 0 0 0 0 0 0 0 0", f"% cpu1 {k} {99 * k} 0 0 0 0 0 0 0 0"]
            if idle_ns_per_s is not None:  # two cgroups, one of them new in the window
                lines += [f"% idle ci {k * idle_ns_per_s // 2}"] + ([f"% idle late {(k - 2) * idle_ns_per_s // 2}"] if k >= 2 else [])
        return "\n".join(lines) + "\n"
    everything = log(2 * 99 * 10**7)  # 2 cores × 99 ticks of 10 ms each
    spans = cpu_intervals(everything, 101, 105)
    assert [free for *_, free in spans["cpu0"]] == [49.5, 99, 99, 99]  # 101-102: "late" not yet seen
    assert saturated_share(cpu_intervals(everything, 102, 105)) == {"cpu0": 0.0, "cpu1": 0.0}
    assert [round(free, 6) for *_, free in cpu_intervals(log(2 * 99 * 10**5), 102, 105)["cpu1"]] == [0.99] * 3
    assert saturated_share(cpu_intervals(log(2 * 99 * 10**5), 102, 105)) == {"cpu0": 1.0, "cpu1": 1.0}
    assert saturated_share(cpu_intervals(log(None), 102, 105)) == {"cpu0": 1.0, "cpu1": 1.0}
