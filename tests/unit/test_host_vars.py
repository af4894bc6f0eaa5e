"""An inventory's fl_* variables are typed (testbed/host_vars.py): a key fl does not know,
a value of the wrong kind, or a key a host's part needs that is missing is an error naming
the file, the host and the key, before anything runs; the values read back typed."""
from __future__ import annotations

from pathlib import Path

import pytest

from flharness.errors import FlError
from flharness.testbed.inventory import load_inventory

REPO = Path(__file__).resolve().parents[2]
SHIPPED = (REPO / "inventory.ini").read_text()


@pytest.mark.parametrize(("old", "new", "said"), [
    ("fl_if=cli.r", "fl_ifname=cli.r", "cli: fl_ifname is not a variable fl knows (a typo?)"),
    ("fl_netperf_port=12865", "fl_netperf_port=70000", "fl_netperf_port='70000': Input should be less than 65536"),
    ("fl_if=cli.r", "fl_if='e0;reboot'", "cli: fl_if='e0;reboot': not an interface name"),
    ("fl_addr=10.71.1.1/24", "fl_addr=10.71.1.300/24", "cli: fl_addr='10.71.1.300/24': not an IPv4/IPv6 address/prefix"),
    ("fl_backend=netns", "fl_backend=docker", "fl_backend='docker': Input should be 'netns' or 'ssh'"),
    ("fl_if=cli.r ", "", "cli: fl_if is missing"),
])
def test_a_bad_inventory_value_is_named_with_its_file_host_and_key(tmp_path, old, new, said):
    assert old in SHIPPED
    path = tmp_path / "inventory.ini"
    path.write_text(SHIPPED.replace(old, new, 1))
    with pytest.raises(FlError) as e:
        load_inventory(path)
    assert str(e.value).startswith(f"{path}: ") and said in str(e.value), str(e.value)


def test_the_shipped_inventory_reads_back_typed():
    inv = load_inventory(REPO / "inventory.ini")
    assert inv.netperf_port == int(inv.hostvars["cli"]["fl_netperf_port"]) and isinstance(inv.irtt_port, int)
    cli = inv.endpoint("cli")
    assert cli.dev == inv.hostvars["cli"]["fl_if"] and cli.ip == inv.hostvars["cli"]["fl_addr"].split("/")[0]
    assert inv.middlebox.cli_dev == inv.hostvars["mid"]["fl_if_cli"] and inv.srv_ip == inv.endpoint("srv").ip
