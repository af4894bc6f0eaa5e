"""An ssh testbed of this machine's namespaces, for the e2e tests of the ssh backend:
three namespaces linked in a line (a testbed's cli, mid, srv), each with an sshd on a
management link of its own, and the inventory lines that name them (test_e2e_ssh,
test_e2e_lost_host). The fixtures are the e2e suite's (tests/e2e/conftest.py)."""
from __future__ import annotations

import secrets
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from flrun import listening, wait_for

needs_sshd = pytest.mark.skipif(shutil.which("sshd") is None and not Path("/usr/sbin/sshd").exists(),
                                reason="needs openssh-server (./install.sh)")
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

