"""Each testbed host's scripts for a run (flharness/testbed/testbed_scripts.py), as
plan.host_scripts makes them from an inventory: what a namespace testbed and an ssh one
(whose hosts fl must leave as it found them) each do, by host."""
from __future__ import annotations

from pathlib import Path

from flharness.cells import expand
from flharness.scenario import load_scenario
from flharness.testbed.inventory import load_inventory
from flharness.testbed.plan import DRY_RUN_ID, DRY_RUN_ROOT, host_dirs, host_scripts, run_vars

REPO = Path(__file__).resolve().parents[2]
SCRATCH = host_dirs(DRY_RUN_ID, DRY_RUN_ROOT)
CELLS = [c for s in ("tests/scenarios/every-feature.yml",) for c in expand(load_scenario(REPO / s), REPO / s)]


def scripts(inventory: str, ifb: bool = True, nft: bool = True) -> dict[str, dict[str, str]]:
    """Each host's scripts as Ansible gets them (fl_testbed)."""
    made = host_scripts(load_inventory(REPO / inventory), SCRATCH, run_vars(CELLS, ifb=ifb, nft=nft))
    return {h: s.model_dump(exclude_none=True) for h, s in made.items()}


def lines(text: str) -> list[str]:
    return text.splitlines()


def test_namespaces_bring_up_loopback_and_are_deleted_whole():
    made = scripts("inventory.ini")
    for host, s in made.items():
        assert "ip link set dev lo up" in lines(s["up"]) and "links-restore" not in s["up"], host
        assert "tc qdisc del" not in s["down"] and "sysctl-restore" not in s["down"], host
        assert lines(s["down"])[-3:] == ['rm -rf "$dir"', 'rmdir "$(dirname "$dir")" 2>/dev/null', "exit 0"]
    mid = lines(made["mid"]["up"])
    assert mid.index("sysctl -qw net.ipv4.ip_forward=1") < mid.index("ip link add name ifb4mid.l type ifb")
    assert "ip route replace 10.71.2.0/24 via 10.71.1.2" in lines(made["cli"]["up"])


def test_ssh_hosts_are_noted_as_found_then_restored():
    made = scripts("inventory-ssh.example.ini")
    cli_up, cli_down = made["cli"]["up"], made["cli"]["down"]
    assert cli_up.index('> "$dir/links-restore"') < cli_up.index("ethtool -K ") and "ip link set dev lo up" not in cli_up
    route_save = next(x for x in lines(cli_up) if x.startswith("ip route save to "))
    assert cli_up.index(route_save) < cli_up.index("ip route replace ")
    assert "ip route restore < \"$dir/route-restore\"" in cli_down and "nft delete table" not in cli_down
    assert "ip link del" not in cli_down  # IFBs are the middlebox's
    mid_down = made["mid"]["down"]
    assert "nft delete table inet fl 2>/dev/null" in lines(mid_down)
    assert sum(x.startswith("ip link del ifb4") for x in lines(mid_down)) == 2


def test_the_middleboxs_ifbs_and_table_only_when_the_run_needs_them():
    bare = scripts("inventory.ini", ifb=False, nft=False)["mid"]["up"]
    assert "type ifb" not in bare and "nft -f" not in bare
    full = scripts("inventory.ini")["mid"]["up"]
    table = full[full.index("table inet fl {"):full.index("' | nft -f -")]
    assert 'iifname "mid.l" counter comment "up: all"' in table and 'iifname "mid.r" ip ecn ce counter comment "down: CE"' in table
    assert "chain ecn_rewrite" in table  # filled per cell (commands.py's ecn.nft)


def test_each_sysctl_a_cell_sets_is_saved_before_the_run():
    """every-feature sets sysctls on cli and srv: each is saved (for the restore before each
    cell and at the end) with its key quoted."""
    made = scripts("inventory.ini")
    rv = run_vars(CELLS, ifb=True, nft=True)
    assert rv.sysctl_keys
    for host, keys in rv.sysctl_keys.items():
        saved = [x for x in lines(made[host]["up"]) if x.startswith("printf '%s=%s\\n' ")]
        assert [x.split()[2] for x in saved] == keys, host
    assert "printf 'net.ipv4.ip_forward=%s\\n'" in made["mid"]["up"]  # the middlebox forwards for the run


def test_without_a_run_only_the_helpers_and_the_removal():
    made = host_scripts(load_inventory(REPO / "inventory.ini"), SCRATCH, None)
    assert {h: tuple(sorted(s.model_dump(exclude_none=True))) for h, s in made.items()} == dict.fromkeys(("cli", "mid", "srv"), ("down", "helpers"))
