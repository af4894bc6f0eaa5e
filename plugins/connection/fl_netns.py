"""Ansible connection plugin: run tasks inside a network namespace on the controller.

fl's default testbed hosts (cli, mid, srv) are network namespaces on this machine. This
plugin is the ``local`` connection with every command wrapped in ``ip netns exec NS``,
so the same roles run unchanged over ssh against physical hosts. Files are shared with
the controller (namespaces share the filesystem), so put/fetch are plain copies.
A command that brings no input of its own (a raw task's script: a cell's setup, which may
hold its tunnel's keys) reaches the namespace's shell on its input, never on a command
line that `ps` shows every user (fl_ssh.py).
"""
from __future__ import annotations

DOCUMENTATION = """
    name: fl_netns
    short_description: run commands in a network namespace on the controller
    description:
        - Like the local connection, with commands run through C(ip netns exec).
    options:
        netns:
            description: Name of the network namespace to enter.
            required: true
            vars:
                - name: fl_netns
        become_success_timeout:
            type: int
            default: 10
            description: As for the local connection.
            vars:
                - name: ansible_local_become_success_timeout
        become_strip_preamble:
            type: bool
            default: true
            description: As for the local connection.
            vars:
                - name: ansible_local_become_strip_preamble
"""

import re
import shlex

from ansible.errors import AnsibleConnectionFailure
from ansible.plugins.connection.local import Connection as LocalConnection

_NETNS_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
#: The shell's argument where the command comes on its input (as fl_ssh.py's).
FROM_INPUT = 'eval "$(cat)"'


class Connection(LocalConnection):
    transport = "fl_netns"

    def exec_command(self, cmd, in_data=None, sudoable=True):
        netns = self.get_option("netns")
        if not _NETNS_RE.match(netns or ""):
            raise AnsibleConnectionFailure(f"fl_netns: invalid namespace name {netns!r}")
        if in_data is None:
            cmd, in_data = FROM_INPUT, cmd if isinstance(cmd, bytes) else cmd.encode()
        wrapped = f"ip netns exec {shlex.quote(netns)} /bin/sh -c {shlex.quote(cmd)}"
        return super().exec_command(wrapped, in_data=in_data, sudoable=sudoable)
