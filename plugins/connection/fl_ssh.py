"""Ansible connection plugin: Ansible's ``ssh`` connection (all its options; its
documentation is reused below), where a command that brings no input of its own reaches
the remote shell on its input instead of the command line.

A raw task's command is its whole script, and a cell's setup script holds its tunnel's
keys (IPsec's, WireGuard's private key): on a command line they would be readable by
every user of either machine for as long as the script runs (``ps``, /proc/PID/cmdline:
ssh's on the controller, the shell's on the host). Here the remote shell is started with
``eval "$(cat)"`` and the script comes on ssh's input; it runs as before, its own
commands reading an input at its end. fl's testbed inventory uses it for ssh hosts
(flharness/testbed/testbed.py); fl_netns.py and fl_netns_ssh.py do the same in
namespaces.
"""
from __future__ import annotations

import yaml
from ansible.plugins.connection import ssh as _ssh

_DOC = yaml.safe_load(_ssh.DOCUMENTATION)
_DOC.update(name="fl_ssh", short_description="ssh, with scripts on the remote shell's input")
DOCUMENTATION = yaml.safe_dump(_DOC)
#: The shell's argument where the command comes on its input.
FROM_INPUT = """/bin/sh -c 'eval "$(cat)"'"""


class Connection(_ssh.Connection):
    transport = "fl_ssh"

    def exec_command(self, cmd, in_data=None, sudoable=True):
        if in_data is None:
            cmd, in_data = FROM_INPUT, cmd if isinstance(cmd, bytes) else cmd.encode()
        return super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
