"""`fl clean` and `fl run` remove a killed run's testbed by its state file: of an ssh
inventory with several testbeds, the one that run used (its links and routes are put back
as that testbed's inventory names them), never the first by default."""
from __future__ import annotations

from pathlib import Path

import pytest

from flharness.errors import FlError
from flharness.run.recovery import state_inventory

EXAMPLE = Path(__file__).resolve().parents[2] / "inventory-ssh.example.ini"


def two_testbeds(tmp_path: Path) -> Path:
    """The ssh example twice, as lab1 and lab2 (hosts named for their lab; lab2's client
    address its own)."""
    hosts, common = EXAMPLE.read_text().split("[testbed:vars]")
    lines = [ln for ln in hosts.split("[testbed]", 1)[1].splitlines() if ln.strip() and not ln.startswith("#")]
    text = "[testbeds:children]\nlab1\nlab2\n"
    for lab in ("lab1", "lab2"):
        text += f"\n[{lab}]\n" + "".join(f"{lab}-{ln.split()[0]} fl_role={ln.split(maxsplit=1)[0]} {ln.split(maxsplit=1)[1]}\n"
                                         for ln in lines)
    path = tmp_path / "two.ini"
    path.write_text(text.replace("lab2-cli fl_role=cli ansible_host=client.lab fl_if=enp1s0     fl_addr=10.71.1.1/24",
                                 "lab2-cli fl_role=cli ansible_host=client2.lab fl_if=enp1s0     fl_addr=10.72.1.1/24")
                    + "\n[testbeds:vars]" + common)
    return path


def test_the_killed_runs_own_testbed_is_the_one_removed(tmp_path):
    path = two_testbeds(tmp_path)
    second = state_inventory({"source": str(path), "testbed": "lab2"})
    assert second.name == "lab2" and second.hostvars["cli"]["fl_addr"] == "10.72.1.1/24", second.hostvars["cli"]
    assert state_inventory({"source": str(path)}).name == "lab1"  # a state file fl wrote before it named its testbed
    with pytest.raises(FlError, match="no testbed 'lab3'"):
        state_inventory({"source": str(path), "testbed": "lab3"})
