"""fl's Ansible connection plugins (plugins/connection): a raw task's script (a cell's
setup holds its tunnel's keys) reaches the shell on its input, so no process's command
line shows it while it runs; it runs as before. The oracle: every process's
/proc/PID/cmdline, read while the script runs in a network namespace of its own."""
from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import threading
import time
from pathlib import Path

import pytest
from ansible.playbook.play_context import PlayContext
from ansible.plugins.loader import connection_loader

PLUGINS = Path(__file__).resolve().parents[2] / "plugins" / "connection"


@pytest.fixture
def netns():
    name = f"fltest-{secrets.token_hex(4)}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    yield name
    subprocess.run(["ip", "netns", "del", name], check=True)


def command_lines() -> list[bytes]:
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            with contextlib.suppress(OSError):  # ended meanwhile
                out.append(Path(f"/proc/{pid}/cmdline").read_bytes())
    return out


def test_a_raw_script_runs_in_the_namespace_and_no_command_line_shows_it(netns):
    connection_loader.add_directory(str(PLUGINS))
    conn = connection_loader.get("fl_netns", PlayContext(), None)
    conn.set_options(var_options={"fl_netns": netns})
    key = secrets.token_hex(16)
    script = f"key={key}\nip -o link show lo | cut -d: -f2\nsleep 1\nprintf 'in %s\\n' \"$(ip netns identify)\"\nexit 3"
    done: dict[str, tuple[int, bytes, bytes]] = {}
    runner = threading.Thread(target=lambda: done.setdefault("r", conn.exec_command(script)))
    runner.start()
    seen, looks = [], 0
    while runner.is_alive():
        seen += [c for c in command_lines() if key.encode() in c]
        looks += 1
        time.sleep(0.05)
    rc, out, err = done["r"]
    assert (rc, out.decode().split(), err) == (3, ["lo", "in", netns], b""), (rc, out, err)
    assert looks > 5 and not seen, seen


@pytest.mark.parametrize("extra, connection", [("", "fl_ssh"), ("ansible_connection=ssh\n", "fl_ssh"),
                                               ("ansible_connection=paramiko\n", None)])
def test_an_ssh_testbeds_hosts_run_fl_ssh_unless_the_inventory_names_another_connection(tmp_path, extra, connection):
    from flharness.testbed.inventory import load_inventory
    from flharness.testbed.testbed import ssh_connection
    example = (PLUGINS.parents[1] / "inventory-ssh.example.ini").read_text()
    path = tmp_path / "ssh.ini"
    path.write_text(example.replace("fl_backend=ssh\n", f"fl_backend=ssh\n{extra}"))
    assert ssh_connection(load_inventory(path)) == ({"ansible_connection": connection} if connection else None)
    assert ssh_connection(load_inventory(PLUGINS.parents[1] / "inventory.ini")) is None  # namespaces: fl_netns
