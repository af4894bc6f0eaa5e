"""Ansible lookup plugin: the next cell of a testbed session, handed over by fl.

One ansible-playbook runs a testbed for a whole `fl run` (playbooks/session.yml): it
builds the testbed, then asks for cells one at a time, so there is no Ansible start-up
per cell. The hand-over is two files in fl's session folder ($FL_SESSION_DIR):
``want`` (made here: the previous cell is collected, the testbed is free) and
``next.json`` (written by fl: the next cell's variables, or ``{"stop": true}``).
"""
from __future__ import annotations

DOCUMENTATION = """
    name: fl_cell
    short_description: wait for fl to hand this testbed its next cell
    description:
        - Signals that the testbed is free, then blocks until fl writes the next cell.
        - Returns the cell's variables (fl_cell), or a mapping with stop true.
"""

import json
import os
import time

from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase

POLL = 0.005  # seconds


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        folder = os.environ.get("FL_SESSION_DIR")
        if not folder or not os.path.isdir(folder):
            raise AnsibleError("fl_cell: FL_SESSION_DIR is not a folder (run through fl)")
        path = os.path.join(folder, "next.json")
        open(os.path.join(folder, "want"), "w").close()
        while not os.path.exists(path):
            time.sleep(POLL)
        with open(path, encoding="utf-8") as f:
            cell = json.load(f)
        os.unlink(path)
        return [cell]
