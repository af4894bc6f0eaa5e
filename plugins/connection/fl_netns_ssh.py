"""Ansible connection plugin: run tasks inside a network namespace of an ssh host.

fl drives the namespace testbed inside a VM guest from the host: the guest runs an sshd
(flharness/programs/vm_guest.sh) and each testbed host (cli, mid, srv) is a namespace
in it. This is Ansible's ``ssh`` connection, with all its options (its documentation is
reused below), and every command wrapped in ``ip netns exec NS``. One multiplexed ssh
connection (ControlPersist) serves all three hosts. A command that brings no input of its
own reaches the namespace's shell on its input, as with fl_ssh.py.
"""
from __future__ import annotations

import re
import shlex

import yaml
from ansible.errors import AnsibleConnectionFailure
from ansible.plugins.connection import ssh as _ssh

_DOC = yaml.safe_load(_ssh.DOCUMENTATION)
_DOC.update(name="fl_netns_ssh",
            short_description="run commands in a network namespace of a host reached over ssh")
_DOC["options"]["netns"] = {"description": "Name of the network namespace to enter.",
                            "required": True, "vars": [{"name": "fl_netns"}]}
DOCUMENTATION = yaml.safe_dump(_DOC)

_NETNS_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
#: The shell's argument where the command comes on its input (as fl_ssh.py's).
FROM_INPUT = 'eval "$(cat)"'


class Connection(_ssh.Connection):
    transport = "fl_netns_ssh"

    def exec_command(self, cmd, in_data=None, sudoable=True):
        netns = self.get_option("netns")
        if not _NETNS_RE.match(netns or ""):
            raise AnsibleConnectionFailure(f"fl_netns_ssh: invalid namespace name {netns!r}")
        if in_data is None:
            cmd, in_data = FROM_INPUT, cmd if isinstance(cmd, bytes) else cmd.encode()
        wrapped = f"ip netns exec {shlex.quote(netns)} /bin/sh -c {shlex.quote(cmd)}"
        return super().exec_command(wrapped, in_data=in_data, sudoable=sudoable)
