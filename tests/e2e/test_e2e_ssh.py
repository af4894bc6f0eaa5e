"""The same roles over ssh: 'physical' hosts that fl does not create.

The test builds three namespaces itself, links them, and runs an sshd in each on a
management link of its own; the inventory says fl_backend=ssh. fl must configure them
through Ansible's ssh connection, fetch the results, and at the end leave the hosts as
it found them: no qdiscs, IFBs, nftables table, processes or scratch files of fl, and
the sysctls, addresses, routes, links' state and offloads it changed restored.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from flrun import REPO, needs_root_tools, run_fl
from sshbed import HOSTS, common_vars, host_line, host_state, needs_sshd, sh

from flharness.analysis.flent_data import load as load_flent

pytestmark = [pytest.mark.e2e, needs_root_tools(), needs_sshd]


def test_check_and_list_probe_the_inventorys_hosts(hosts, tmp_path):
    """`fl check --inventory` and `fl list --inventory` of an ssh inventory probe its hosts
    over ssh, not this machine: one line per host (named as the inventory names it) with
    its kernel and what fl needs there that it lacks; the list counts the cells the ssh
    testbed's kernel can run."""
    _, inventory = hosts
    p = run_fl("check", "--inventory", str(inventory), timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    for h in HOSTS:
        assert re.search(rf"^{h}: kernel {re.escape(os.uname().release)}; lacks: nothing fl needs", p.stdout, re.M), p.stdout
    p = run_fl("list", str(REPO / "tests" / "scenarios" / "ssh-short.yml"), "--inventory", str(inventory),
               "--results", str(tmp_path / "results"), timeout=300)
    assert p.returncode == 0 and "1 to run on the ssh testbed's kernel" in p.stdout, p.stdout + p.stderr



def test_roles_run_unchanged_over_ssh_and_leave_the_hosts_as_found(hosts, tmp_path):
    ns, inventory = hosts
    before = {h: sh("sysctl", "-n", "net.ipv4.tcp_ecn", ns=ns[h]) for h in HOSTS}
    state = {h: host_state(ns[h]) for h in HOSTS}
    assert all("on" in state[h]["offloads"] for h in HOSTS), state  # fl turns them off: restored?
    results = tmp_path / "results"
    p = run_fl("run", str(REPO / "tests" / "scenarios" / "ssh-short.yml"), "--inventory", str(inventory),
               "--results", str(results), timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    cell = results / "default" / "ssh-short" / "cubic-vs-reno-pfifo_200-20mbit-0ms"
    rec = json.loads((cell / "cell.json").read_text())
    assert rec["status"] == "ok" and rec["backend"]["testbed"] == "ssh"
    for f in ("cli.pcap.xz", "srv.pcap.xz", "cli.ss.log", "flent.log", "setup.log", "teardown.log",
              f"{cell.name}.flent.gz"):
        assert (cell / f).stat().st_size > 0, f
    assert "net.ipv4.tcp_ecn = 1" in (cell / "teardown.log").read_text().split("======== srv")[1]
    # the hosts are as fl found them
    for dev in ("e0", "e1"):
        assert "htb" not in sh("tc", "qdisc", "show", "dev", dev, ns=ns["mid"])
        assert "ingress" not in sh("tc", "qdisc", "show", "dev", dev, ns=ns["mid"])
    assert "ifb" not in sh("ip", "-o", "link", ns=ns["mid"])
    assert "fl" not in sh("nft", "list", "tables", ns=ns["mid"])
    assert sh("sysctl", "-n", "net.ipv4.ip_forward", ns=ns["mid"]).strip() == "0"
    assert {h: sh("sysctl", "-n", "net.ipv4.tcp_ecn", ns=ns[h]) for h in HOSTS} == before
    for h in HOSTS:  # addresses, routes, links' state and offloads read back as before
        assert host_state(ns[h]) == state[h], h
    for h in HOSTS:
        leftover = [pid for pid in sh("ip", "netns", "pids", ns[h]).split()
                    if "sshd" not in Path(f"/proc/{pid}/comm").read_text(errors="replace")]
        assert leftover == [], (h, [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in leftover])
    assert not list(Path("/run/fl").glob(f"{rec['backend']['testbed_id']}*"))
    # one-way delay across the hosts' clocks: measured from the pings (these hosts share this
    # machine's clock, so the true offset is 0: within the stated bound), every flow's OWD kept
    p = run_fl("plot", "--results", str(results), timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    metrics = json.loads((cell / "metrics.json").read_text())
    clock = metrics["clock"]
    assert clock and clock["exchanges"] > 10 and abs(clock["offset_ms"]) <= clock["bound_ms"] < 1, clock
    assert all(f["owd_ms"] and f["owd_ms"]["n"] > 1000 for f in metrics["flows"]), metrics["flows"]
    readme = (results / "default" / "README.md").read_text()
    assert "the server's capture is read on the client's clock" in readme


def test_two_ssh_testbeds_share_one_matrix(ssh_testbeds, tmp_path):
    """An inventory with two dumbbells (child groups of `testbeds`, hosts named freely,
    their part given by fl_role): fl runs a matrix on both at once and leaves both as found."""
    beds = ssh_testbeds(2)
    lines = ["[testbeds:children]", "lab1", "lab2"]
    for i, (_, mgmt) in enumerate(beds):
        lines += ["", f"[lab{i + 1}]", *[host_line(f"lab{i + 1}-{h}", h, mgmt[h], i) for h in HOSTS]]
    lines += ["", "[testbeds:vars]", common_vars(tmp_path / "id")]
    inventory = tmp_path / "two.ini"
    inventory.write_text("\n".join(lines))
    results = tmp_path / "results"
    p = run_fl("run", str(REPO / "tests" / "scenarios" / "three-short.yml"), "--inventory", str(inventory),
               "--results", str(results), timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "3 ok, 0 failed" in p.stdout
    recs = [json.loads(c.read_text()) for c in (results / "default" / "three-short").glob("*/cell.json")]
    assert sorted({r["backend"]["testbed_label"] for r in recs}) == ["lab1", "lab2"]
    for rec in recs:  # each cell's flows went to its own testbed's server
        i = int(rec["backend"]["testbed_label"][-1]) - 1
        flent = next((results / "default" / "three-short" / rec["cell"]).glob("*.flent.gz"))
        assert load_flent(flent)["metadata"]["HOSTS"] == [f"10.74.{10 * i + 2}.1"]
    for ns, _ in beds:
        assert "htb" not in sh("tc", "qdisc", "show", "dev", "e1", ns=ns["mid"])
        assert sh("sysctl", "-n", "net.ipv4.ip_forward", ns=ns["mid"]).strip() == "0"
        for h in HOSTS:
            leftover = [pid for pid in sh("ip", "netns", "pids", ns[h]).split()
                        if "sshd" not in Path(f"/proc/{pid}/comm").read_text(errors="replace")]
            assert leftover == [], (h, leftover)
