"""`fl clean` and `fl run` remove a killed run's testbed by its state file: of an ssh
inventory with several testbeds, the one that run used (its links and routes are put back
as that testbed's inventory names them), never the first by default."""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
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


def test_a_testbed_two_fl_processes_find_stale_at_once_is_removed_once(tmp_path, monkeypatch):
    """`fl clean` and another's `fl run` start removing one killed run's testbed at once:
    one removes it, the other waits until that is done and finds it gone (seen in CI:
    two testbed_down playbooks at once, one of them still running when `fl clean` returned)."""
    from flharness.run import recovery
    state_file = tmp_path / "fl-abc123.json"
    state_file.write_text('{"id": "fl-abc123", "pid": 0}')
    removals: list[str] = []

    def remove(state: dict) -> None:
        time.sleep(0.3)  # a playbook's time
        removals.append(state["id"])
        state_file.unlink()

    monkeypatch.setattr(recovery, "STATE_DIR", tmp_path)
    monkeypatch.setattr(recovery, "stale_testbeds", lambda: [{"id": "fl-abc123", "pid": 0}])
    monkeypatch.setattr(recovery, "remove_testbed", remove)
    with ThreadPoolExecutor(max_workers=2) as pool:
        counts = list(pool.map(lambda _: recovery.recover_stale(), range(2)))
    assert removals == ["fl-abc123"] and sorted(counts) == [0, 1], (removals, counts)
    assert not state_file.exists() and not list(tmp_path.glob(".fl-*.lock"))


def test_removals_of_a_testbed_never_overlap_when_one_leaves_it_behind(tmp_path, monkeypatch):
    """A removal that fails leaves the state file: the next fl removes it again, one at a
    time. A waiter that gets the lock its holder has just deleted locks the file there now,
    else it would run beside an fl that came later and made a new lock file."""
    from flharness.run import recovery
    (tmp_path / "fl-abc123.json").write_text('{"id": "fl-abc123", "pid": 0}')
    running, most, removals = [0], [0], []
    guard = threading.Lock()

    def remove(state: dict) -> None:  # its testbed_down fails: the state file stays
        with guard:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.3)
        with guard:
            running[0] -= 1
            removals.append(state["id"])

    monkeypatch.setattr(recovery, "STATE_DIR", tmp_path)
    monkeypatch.setattr(recovery, "stale_testbeds", lambda: [{"id": "fl-abc123", "pid": 0}])
    monkeypatch.setattr(recovery, "remove_testbed", remove)

    def later(i: int) -> int:
        time.sleep(0.1 * i)  # fl processes arriving while another's removal runs
        return recovery.recover_stale()

    with ThreadPoolExecutor(max_workers=4) as pool:
        counts = list(pool.map(later, range(4)))
    assert counts == [1, 1, 1, 1] and most[0] == 1, (counts, most)


def test_a_kept_testbed_is_no_fls_and_forget_drops_only_one_no_fl_runs(tmp_path, monkeypatch, caplog):
    """A testbed kept for hosts that could not be reached is written as no fl's (the next
    fl, or fl clean, retries it); `fl clean --forget ID` drops such a state and its folder
    without reaching anything, and refuses a testbed whose fl still runs or that is unknown."""
    import json
    import logging
    import os

    from flharness import clean
    from flharness.testbed import testbed
    from flharness.testbed.inventory import load_testbeds
    for mod in (clean, testbed):
        monkeypatch.setattr(mod, "STATE_DIR", tmp_path / "testbeds")
        monkeypatch.setattr(mod, "STATE_ROOT", tmp_path)
    (tmp_path / "testbeds").mkdir()
    tb = testbed.Testbed(load_testbeds(EXAMPLE)[0], None, tmp_path / "log", testbed_id="fl-aaaaaa")
    tb.folder.mkdir(parents=True)
    tb.unreached = ["srv"]
    tb._forget()
    state = json.loads(tb.state_file.read_text())
    assert state["pid"] == 0 and state["unreached"] == ["srv"], state
    (tmp_path / "testbeds" / "fl-bbbbbb.json").write_text(json.dumps({"id": "fl-bbbbbb", "pid": os.getpid()}))
    with pytest.raises(FlError, match="fl-bbbbbb: its fl process is still running"):
        clean.forget(["fl-bbbbbb"])
    with pytest.raises(FlError, match="fl-cccccc: no such testbed"):
        clean.forget(["fl-aaaaaa", "fl-cccccc"])
    assert tb.state_file.exists()  # nothing dropped before every ID was checked
    with caplog.at_level(logging.INFO):
        assert clean.forget(["fl-aaaaaa"]) == 0
    assert "forgetting testbed fl-aaaaaa: what fl changed on srv stays there" in caplog.text
    assert not tb.state_file.exists() and not tb.folder.exists()
    assert (tmp_path / "testbeds" / "fl-bbbbbb.json").exists()


def test_the_inventorys_namespace_names_are_those_fl_removes():
    """inventory.ini's fl_netns, templated by Ansible for a new testbed's id, names each
    host's namespace as netns.py recognises and removes them (TESTBED_NS_RE): a changed
    rule on either side fails here, not in a run that leaves namespaces behind."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template
    from ansible.vars.manager import VariableManager

    from flharness.hosts import HOSTS
    from flharness.testbed import netns
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(EXAMPLE.parent / "inventory.ini")])
    variables = VariableManager(loader=loader, inventory=inventory)
    testbed_id = netns.new_testbed_id()
    names = []
    for host in HOSTS:
        raw = variables.get_vars(host=inventory.get_host(host))["fl_netns"]
        names.append(str(Templar(loader=loader, variables={"fl_testbed_id": testbed_id, "inventory_hostname": host})
                         .template(trust_as_template(raw))))
    assert names == [f"{testbed_id}-{h}" for h in HOSTS] and all(netns.is_fl_namespace(n) for n in names), names
    assert not netns.is_fl_namespace(f"{testbed_id}-cli2") and not netns.is_fl_namespace(f"x{testbed_id}-cli")
