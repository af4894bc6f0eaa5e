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
import secrets
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from flrun import REPO, listening, needs_root_tools, run_fl, wait_for

from flharness.analysis.flent_data import load as load_flent

pytestmark = [pytest.mark.e2e, needs_root_tools(),
              pytest.mark.skipif(shutil.which("sshd") is None and not Path("/usr/sbin/sshd").exists(),
                                 reason="needs openssh-server (./install.sh)")]
HOSTS = ("cli", "mid", "srv")


def sh(*argv: str, ns: str | None = None) -> str:
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(argv)
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def build_testbed(tmp_path: Path, tag: str, index: int, sshds: list, made: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Three namespaces (a testbed's cli, mid, srv) linked in a line, each with an sshd on a
    management link of its own; returns their namespaces and management addresses."""
    ns = {h: f"fltest-{tag}{index}-{h}" for h in HOSTS}
    mgmt = {}
    for h in HOSTS:
        sh("ip", "netns", "add", ns[h])
        made.append(ns[h])
        sh("ip", "-n", ns[h], "link", "set", "lo", "up")
    sh("ip", "link", "add", "name", "e0", "netns", ns["cli"], "type", "veth", "peer", "name", "e0", "netns", ns["mid"])
    sh("ip", "link", "add", "name", "e1", "netns", ns["mid"], "type", "veth", "peer", "name", "e0", "netns", ns["srv"])
    for i, h in enumerate(HOSTS, 1):  # management link: this machine ↔ host, for ssh
        sub = 4 * (3 * index + i)
        host_if = f"flm{tag}{index}{i}"
        sh("ip", "link", "add", "name", host_if, "type", "veth", "peer", "name", "mgmt", "netns", ns[h])
        sh("ip", "addr", "add", f"10.73.0.{sub + 1}/30", "dev", host_if)
        sh("ip", "link", "set", host_if, "up")
        mgmt[h] = f"10.73.0.{sub + 2}"
        sh("ip", "-n", ns[h], "addr", "add", f"{mgmt[h]}/30", "dev", "mgmt")
        sh("ip", "-n", ns[h], "link", "set", "mgmt", "up")
        cfg = tmp_path / f"sshd-{index}-{h}.conf"
        cfg.write_text(textwrap.dedent(f"""\
            ListenAddress {mgmt[h]}
            HostKey {tmp_path}/hostkey
            AuthorizedKeysFile {tmp_path}/authorized_keys
            PidFile {tmp_path}/sshd-{index}-{h}.pid
            PermitRootLogin prohibit-password
            PasswordAuthentication no
            StrictModes no
            UsePAM no
            Subsystem sftp internal-sftp
            """))
        sshds.append(subprocess.Popen(["ip", "netns", "exec", ns[h], "/usr/sbin/sshd", "-D", "-e", "-f", str(cfg)],
                                      stderr=subprocess.DEVNULL))
    return ns, mgmt


def host_line(name: str, role: str, mgmt: str, index: int) -> str:
    """An inventory line for one host; testbed INDEX uses 10.74.(10·INDEX + 1|2).0/24."""
    a, b = f"10.74.{10 * index + 1}", f"10.74.{10 * index + 2}"
    links = {"cli": f"fl_if=e0 fl_addr={a}.1/24 fl_route_to={b}.0/24 fl_gateway={a}.2",
             "mid": f"fl_if_cli=e0 fl_addr_cli={a}.2/24 fl_if_srv=e1 fl_addr_srv={b}.2/24",
             "srv": f"fl_if=e0 fl_addr={b}.1/24 fl_route_to={a}.0/24 fl_gateway={b}.2"}
    return f"{name} ansible_host={mgmt} {links[role]}" + (f" fl_role={role}" if name != role else "")


def common_vars(key: Path) -> str:
    return textwrap.dedent(f"""\
        fl_backend=ssh
        ansible_user=root
        ansible_ssh_private_key_file={key}
        ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'
        ansible_python_interpreter=/usr/bin/python3
        fl_netperf_port=12865
        fl_irtt_port=2112
        """)


@pytest.fixture
def ssh_testbeds(tmp_path):
    """build(N): N ssh testbeds of this test's own; returns [(namespaces, management addresses)]."""
    tag = secrets.token_hex(2)
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "id"))
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "hostkey"))
    (tmp_path / "authorized_keys").write_text((tmp_path / "id.pub").read_text())
    Path("/run/sshd").mkdir(exist_ok=True)
    sshds: list = []
    made: list[str] = []

    def build(n: int) -> list[tuple[dict[str, str], dict[str, str]]]:
        testbeds = [build_testbed(tmp_path, tag, i, sshds, made) for i in range(n)]
        for _, mgmt in testbeds:
            for addr in mgmt.values():
                wait_for(lambda a=addr: listening(a, 22), f"sshd on {addr} listens")
        return testbeds
    try:
        yield build
    finally:
        for p in sshds:
            p.terminate()
            p.wait(timeout=10)
        listed = sh("ip", "netns", "list")
        for ns in made:
            for pid in sh("ip", "netns", "pids", ns).split() if ns in listed else []:
                subprocess.run(["kill", "-KILL", pid])
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@pytest.fixture
def hosts(ssh_testbeds, tmp_path):
    (ns, mgmt), = ssh_testbeds(1)
    inventory = tmp_path / "inventory.ini"
    inventory.write_text("[testbed]\n" + "\n".join(host_line(h, h, mgmt[h], 0) for h in HOSTS)
                         + "\n\n[testbed:vars]\n" + common_vars(tmp_path / "id"))
    return ns, inventory


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


def host_state(ns: str) -> dict[str, str]:
    """What fl changes on a host besides qdiscs and sysctls, read back: IPv4 addresses
    (the kernel's own IPv6 link-local ones come and go with a link), routes, links up or
    down, each data link's offloads."""
    links = [line.split()[1].split("@")[0] for line in sh("ip", "-o", "link", ns=ns).splitlines()]
    offloads = {dev: [line for line in sh("ethtool", "-k", dev, ns=ns).splitlines()
                      if line.split(":")[0] in ("tcp-segmentation-offload", "generic-segmentation-offload",
                                                 "generic-receive-offload")]
                for dev in links if dev in ("e0", "e1")}
    return {"addr": sh("ip", "-o", "-4", "addr", ns=ns), "route": sh("ip", "route", ns=ns),
            "link": sh("ip", "-br", "link", ns=ns), "offloads": repr(offloads)}


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
