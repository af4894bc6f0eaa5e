"""`fl push` over ssh: rsync to a web host (a namespace of the test's own, with its own
sshd and key), then the pushed index checked over HTTP through a real nginx."""
from __future__ import annotations

import secrets
import shutil
import signal
import subprocess
import tempfile
import textwrap
from pathlib import Path

import pytest
from flrun import listening, needs_root_tools, run_fl, wait_for
from weblib import start_nginx, stop_nginx

pytestmark = [pytest.mark.e2e, needs_root_tools(), pytest.mark.alone,  # reads the demo run: made once, where it runs
              pytest.mark.skipif(not Path("/usr/sbin/sshd").exists() or not Path("/usr/sbin/nginx").exists(),
                                 reason="needs openssh-server and nginx (./install.sh)")]


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


@pytest.fixture
def web_host(tmp_path):
    """Namespace fltest-<tag>-web reachable at 10.75.1.2 over a veth, running sshd."""
    tag = secrets.token_hex(3)
    ns, dev = f"fltest-{tag}-web", f"flw{tag}"
    key = tmp_path / "id"
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key))
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "hostkey"))
    (tmp_path / "authorized_keys").write_text((tmp_path / "id.pub").read_text())
    Path("/run/sshd").mkdir(exist_ok=True)
    cfg = tmp_path / "sshd.conf"
    cfg.write_text(textwrap.dedent(f"""\
        ListenAddress 10.75.1.2
        HostKey {tmp_path}/hostkey
        AuthorizedKeysFile {tmp_path}/authorized_keys
        PidFile {tmp_path}/sshd.pid
        PermitRootLogin prohibit-password
        PasswordAuthentication no
        StrictModes no
        UsePAM no
        """))
    sshd = None
    try:
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "link", "add", "name", dev, "type", "veth", "peer", "name", "mgmt", "netns", ns)
        sh("ip", "addr", "add", "10.75.1.1/30", "dev", dev)
        sh("ip", "link", "set", dev, "up")
        sh("ip", "-n", ns, "addr", "add", "10.75.1.2/30", "dev", "mgmt")
        sh("ip", "-n", ns, "link", "set", "mgmt", "up")
        sshd = subprocess.Popen(["ip", "netns", "exec", ns, "/usr/sbin/sshd", "-D", "-e", "-f", str(cfg)],
                                stderr=subprocess.DEVNULL)
        wait_for(lambda: listening("10.75.1.2", 22), "sshd on 10.75.1.2 listens")
        rsh = (f"ssh -i {key} -o BatchMode=yes -o StrictHostKeyChecking=no "
               f"-o UserKnownHostsFile=/dev/null -o ConnectTimeout=10")
        yield rsh
    finally:
        if sshd is not None:
            sshd.send_signal(signal.SIGTERM)
            sshd.wait(timeout=10)
        subprocess.run(["ip", "link", "del", dev], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def test_push_over_ssh_then_links_checked_over_http(demo_run, web_host, tmp_path):
    results = demo_run.results
    assert run_fl("plot", "--run", "e2e", "--results", str(results)).returncode == 0
    www = Path(tempfile.mkdtemp(prefix="fl-www-"))  # the web host shares this filesystem
    www.chmod(0o755)
    nginx, url = start_nginx(tmp_path, www)
    try:
        p = run_fl("push", "--run", "e2e", "--results", str(results), "--dest", f"root@10.75.1.2:{www}",
                   "--url", url, "--rsh", web_host)
        assert p.returncode == 0, p.stdout + p.stderr
        assert f"to root@10.75.1.2:{www}/e2e/" in p.stdout and "all links ok" in p.stdout
        assert (www / "e2e" / "index.html").is_file() and (www / "e2e" / "demo" / "charts").is_dir()
    finally:
        stop_nginx(nginx)
        shutil.rmtree(www)
