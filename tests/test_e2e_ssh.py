"""The same roles over ssh: 'physical' hosts that fl does not create.

The test builds three namespaces itself, links them, and runs an sshd in each on a
management link of its own; the inventory says fl_backend=ssh. fl must configure them
through Ansible's ssh connection, fetch the results, and at the end leave the hosts as
it found them: no qdiscs, IFBs, nftables table, processes or scratch files of fl, and
the sysctls it changed restored.
"""
from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from conftest import REPO, needs_root_tools, run_fl

pytestmark = [pytest.mark.e2e, needs_root_tools(),
              pytest.mark.skipif(shutil.which("sshd") is None and not Path("/usr/sbin/sshd").exists(),
                                 reason="needs openssh-server (./install.sh)")]
HOSTS = ("cli", "mid", "srv")


def sh(*argv: str, ns: str | None = None) -> str:
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(argv)
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def hosts(tmp_path):
    tag = secrets.token_hex(3)
    ns = {h: f"fltest-{tag}-{h}" for h in HOSTS}
    key = tmp_path / "id"
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key))
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "hostkey"))
    (tmp_path / "authorized_keys").write_text((tmp_path / "id.pub").read_text())
    Path("/run/sshd").mkdir(exist_ok=True)
    sshds = []
    try:
        for h in HOSTS:
            sh("ip", "netns", "add", ns[h])
            sh("ip", "-n", ns[h], "link", "set", "lo", "up")
        sh("ip", "link", "add", "name", "e0", "netns", ns["cli"], "type", "veth", "peer", "name", "e0", "netns", ns["mid"])
        sh("ip", "link", "add", "name", "e1", "netns", ns["mid"], "type", "veth", "peer", "name", "e0", "netns", ns["srv"])
        for i, h in enumerate(HOSTS, 1):  # management link: this machine ↔ host, for ssh
            sh("ip", "link", "add", "name", f"flm{tag}{i}", "type", "veth", "peer", "name", "mgmt", "netns", ns[h])
            sh("ip", "addr", "add", f"10.73.{i}.1/30", "dev", f"flm{tag}{i}")
            sh("ip", "link", "set", f"flm{tag}{i}", "up")
            sh("ip", "-n", ns[h], "addr", "add", f"10.73.{i}.2/30", "dev", "mgmt")
            sh("ip", "-n", ns[h], "link", "set", "mgmt", "up")
            cfg = tmp_path / f"sshd-{h}.conf"
            cfg.write_text(textwrap.dedent(f"""\
                ListenAddress 10.73.{i}.2
                HostKey {tmp_path}/hostkey
                AuthorizedKeysFile {tmp_path}/authorized_keys
                PidFile {tmp_path}/sshd-{h}.pid
                PermitRootLogin prohibit-password
                PasswordAuthentication no
                StrictModes no
                UsePAM no
                Subsystem sftp internal-sftp
                """))
            sshds.append(subprocess.Popen(["ip", "netns", "exec", ns[h], "/usr/sbin/sshd", "-D", "-e", "-f", str(cfg)],
                                          stderr=subprocess.DEVNULL))
        inventory = tmp_path / "inventory.ini"
        inventory.write_text(textwrap.dedent(f"""\
            [testbed]
            cli ansible_host=10.73.1.2 fl_if=e0 fl_addr=10.74.1.1/24 fl_route_to=10.74.2.0/24 fl_gateway=10.74.1.2
            mid ansible_host=10.73.2.2 fl_if_cli=e0 fl_addr_cli=10.74.1.2/24 fl_if_srv=e1 fl_addr_srv=10.74.2.2/24
            srv ansible_host=10.73.3.2 fl_if=e0 fl_addr=10.74.2.1/24 fl_route_to=10.74.1.0/24 fl_gateway=10.74.2.2

            [testbed:vars]
            fl_backend=ssh
            ansible_user=root
            ansible_ssh_private_key_file={key}
            ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'
            ansible_python_interpreter=/usr/bin/python3
            fl_netperf_port=12865
            fl_irtt_port=2112
            """))
        time.sleep(1)
        yield ns, inventory, {p.pid for p in sshds}
    finally:
        for p in sshds:
            p.terminate()
            p.wait(timeout=10)
        for h in HOSTS:
            for pid in sh("ip", "netns", "pids", ns[h]).split() if ns[h] in sh("ip", "netns", "list") else []:
                subprocess.run(["kill", "-KILL", pid])
            subprocess.run(["ip", "netns", "del", ns[h]], capture_output=True)


def test_roles_run_unchanged_over_ssh_and_leave_the_hosts_as_found(hosts, tmp_path):
    ns, inventory, sshd_pids = hosts
    before = {h: sh("sysctl", "-n", "net.ipv4.tcp_ecn", ns=ns[h]) for h in HOSTS}
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
    for h in HOSTS:
        leftover = [pid for pid in sh("ip", "netns", "pids", ns[h]).split()
                    if "sshd" not in Path(f"/proc/{pid}/comm").read_text(errors="replace")]
        assert leftover == [], (h, [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in leftover])
    assert not list(Path("/run/fl").glob(f"{rec['backend']['testbed_id']}*"))
