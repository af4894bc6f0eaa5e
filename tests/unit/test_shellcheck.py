"""shellcheck on every shell script fl runs: the helpers and scripts of the repository, each
host's testbed scripts (testbed/testbed_scripts.py) on every kind of testbed, and each host's setup.sh and collect.sh
(testbed/cell_scripts.py) for cells that take each of their branches
(tests/scenarios/every-feature.yml and s5-tunnel.yml's tunnels) on every kind of testbed
(namespaces, a staged VM guest, ssh hosts; POSIX sh: Ansible's raw runs them so), collect.sh
with the host's state script it sources (testbed/state_script.py), and the client's flent.sh
(testbed/flent_script.py) for the same cells."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from flharness.cells import expand
from flharness.programs import HOST_DIR, LOADER, VM_GUEST, helpers
from flharness.scenario import load_scenario
from flharness.testbed.flent_script import FLENT_FILE
from flharness.testbed.inventory import load_inventory
from flharness.testbed.plan import DRY_RUN_ID, DRY_RUN_ROOT, cell_vars, host_dirs, host_scripts, run_vars
from flharness.testbed.state_script import STATE_FILE
from flharness.testbed.testbed_scripts import helpers_script

REPO = Path(__file__).resolve().parents[2]
SCRATCH = host_dirs(DRY_RUN_ID, DRY_RUN_ROOT)  # the hosts' scratch folders as rendered scripts show them
SHELLCHECK = shutil.which("shellcheck")
HELPERS = helpers()
SCRIPTS = [*(p for p in HELPERS if "python" not in p.read_text().partition("\n")[0]), VM_GUEST, LOADER,
           *sorted((REPO / "tests" / "vm").glob("*.sh")),
           *sorted((REPO / "schemes").glob("*.sh")), REPO / "install.sh", *sorted((REPO / ".ci").iterdir())]
INVENTORIES = ["inventory.ini", "inventory-vm.example.ini", "inventory-ssh.example.ini"]  # namespaces, a VM, ssh hosts

pytestmark = pytest.mark.skipif(SHELLCHECK is None and not __import__("os").environ.get("CI"),
                                reason="needs shellcheck (./install.sh)")


def shellcheck(text: str, name: str, dialect: str | None = None, path: Path | None = None) -> str:
    argv = [SHELLCHECK or "shellcheck", "--format=gcc", "-x", "-P", str(HOST_DIR)]
    argv += ["-s", dialect] if dialect else []
    p = subprocess.run([*argv, str(path) if path else "-"], input=None if path else text, capture_output=True, text=True)
    return "" if p.returncode == 0 else f"{name}:\n{p.stdout}{p.stderr}"


def test_the_repositorys_shell_scripts_pass_shellcheck():
    assert SHELLCHECK, "shellcheck is missing (./install.sh installs it)"
    problems = [shellcheck("", str(p.relative_to(REPO)), path=p) for p in SCRIPTS]
    assert not "".join(problems), "".join(problems)


def test_the_cells_and_testbeds_scripts_pass_shellcheck():
    assert SHELLCHECK, "shellcheck is missing (./install.sh installs it)"
    paths = [REPO / "tests" / "scenarios" / "every-feature.yml", REPO / "scenarios" / "s5-tunnel.yml"]
    cells = [c for path in paths for c in expand(load_scenario(path), path)]
    inv = load_inventory(REPO / "inventory.ini")
    kinds = {"netns": {}, "vm": {"vm": True}, "ssh": {"shared_fs": False}}
    problems, scripts = [], 0
    for kind, settings in kinds.items():
        rv = run_vars(cells, ifb=True, nft=True, **settings)
        made = [cell_vars(c, inv, Path("/results") / c.name, tcp_rewrite="tc", run_vars=rv, scratch=SCRATCH) for c in cells]
        for cv in made:
            for host, h in cv.hosts.items():
                for name, text in (("setup.sh", h.setup), ("collect.sh", with_state(h.collect, cv.files[host][STATE_FILE]))):
                    problems.append(shellcheck(text, f"{kind} {cv.name} {host} {name}", dialect="sh"))
                    scripts += 1
        problems += [shellcheck(cv.files["cli"][FLENT_FILE], f"{cv.name} cli {FLENT_FILE}", dialect="sh") for cv in made]
    rv = run_vars(cells, ifb=True, nft=True)
    testbeds = [host_scripts(load_inventory(REPO / i), SCRATCH, rv) for i in INVENTORIES]
    problems += [shellcheck(text, f"{host} {name}", dialect="sh") for made in testbeds
                 for host, texts in made.items() for name, text in texts.model_dump().items() if name != "helpers"]
    assert scripts == len(kinds) * len(cells) * 6 and sum(len(t.model_dump()) for made in testbeds for t in made.values()) == 3 * 3 * 3
    assert not "".join(problems), "".join(problems)


def with_state(collect: str, state: str) -> str:
    """collect.sh as the shell runs it: the host's state script (state_script.py, written by
    setup.sh) in place of the line that sources it."""
    line = f'  . "$dir/cmd/{STATE_FILE}"\n'
    assert line in collect
    return collect.replace(line, state)


def test_every_helper_is_installed_as_it_is(tmp_path):
    """helpers_script, run by sh, copies every helper of flharness/programs (the list is the
    folder's) into the host's folder as it is, executable (0755)."""
    folder = tmp_path / "it's a host"
    subprocess.run(["sh", "-c", helpers_script(str(folder))], check=True)
    assert sorted(p.name for p in folder.iterdir()) == [p.name for p in HELPERS]
    for helper in HELPERS:
        installed = folder / helper.name
        assert installed.read_text() == helper.read_text() and installed.stat().st_mode & 0o777 == 0o755, helper.name
