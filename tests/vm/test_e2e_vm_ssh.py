"""An ssh testbed whose hosts run Linux 7.3, end to end, with fl's modules: `fl modules
build` builds the kit for the l4s image's release from Debian's headers (then finds it
built); one guest of the l4s image, booted with its own modules hidden (fl.extra_modules=off: no tcp_prague, no sch_dualpi2), holds
three namespaces, each with an sshd (tests/vm/ssh_hosts.sh); fl drives them as an ssh
inventory, reaching each through the guest's own sshd (ssh's ProxyCommand). `fl check
--inventory` reports each host's 7.3 kernel and what it lacks; `fl run --inventory …
--load-modules` finds that kit, copies it over ssh and loads it on each host (hosts sharing the guest's kernel may find it loaded from the same
build); a Prague cell through dualpi2 runs, its data ECT(1) in the
server's capture, cell.json naming the kit's file and its sha256; and every host reads
back after the run as before it, `fl check` included (addresses, routes, links, qdiscs,
nftables, sysctls; the probe's tunnel trials load ipip, whose tunl0 would appear in every
namespace: the probe unloads what it loaded), and the kernel's log is clean.
(The VM backend's --load-modules plays the same role on its guest, group nsroot instead
of testbed: playbooks/modules.yml's fl_kit_on.)
Selected with `pytest -m vm`.
"""
from __future__ import annotations

import json
import re

import pytest
from flrun import REPO, needs_vm, run_fl
from guest import KERNEL_TROUBLE, booted
from resultlib import CE, ECT1, find, read_pcap
from sshbed import HOSTS, host_line

from flharness.image.kit import kit_folder, load_kit
from flharness.image.store import load_image
from flharness.programs.probe import KIT_DIR
from flharness.testbed.vm import GUEST_RESULTS

pytestmark = [pytest.mark.vm, needs_vm()]
SCENARIO = REPO / "tests" / "scenarios" / "vm-kit.yml"
MGMT = {h: f"10.76.0.{4 * n + 2}" for n, h in enumerate(HOSTS, 1)}  # ssh_hosts.sh's
CLI = "10.74.1.1"  # the client's data address (sshbed.host_line, testbed 0)
#: Each host as fl may change it, read in the guest (the noqueue a veth gets once up left out).
STATE = "; ".join(f"echo '== {h}'; ip -n fl7-{h} -o -4 addr; ip -n fl7-{h} route; ip -n fl7-{h} -br link; "
                  f"tc -n fl7-{h} qdisc show | grep -v noqueue; ip netns exec fl7-{h} nft list tables; "
                  f"ip netns exec fl7-{h} sysctl -n net.ipv4.tcp_ecn net.ipv4.ip_forward" for h in HOSTS)


def inventory(path, vm) -> None:
    """The three hosts as an ssh inventory, each reached through the guest's sshd."""
    s = vm.ssh_settings()
    jump = (f"ssh -p {s['ansible_port']} -i {s['ansible_ssh_private_key_file']} {s['ansible_ssh_common_args']} "
            "-o BatchMode=yes -W %h:%p root@127.0.0.1")
    path.write_text("[testbed]\n" + "\n".join(host_line(h, h, MGMT[h], 0) for h in HOSTS) + "\n\n[testbed:vars]\n"
                    f"fl_backend=ssh\nansible_user=root\nansible_ssh_private_key_file={s['ansible_ssh_private_key_file']}\n"
                    "ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
                    f"-o ProxyCommand=\"{jump}\"'\n"
                    "ansible_python_interpreter=/usr/bin/python3\nansible_ssh_timeout=120\nansible_ssh_retries=3\n"
                    "fl_netperf_port=12865\nfl_irtt_port=2112\n")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    image = run_fl("image", "build", "l4s", timeout=1200)  # the L4S lab's (conftest.py), or cached
    assert image.returncode == 0, image.stdout + image.stderr
    built = load_image("l4s")
    assert built is not None
    release = built.manifest.kernel.release
    kit = run_fl("modules", "build", "--release", release, "--force", timeout=1500)
    kit_again = run_fl("modules", "build", "--release", release, timeout=120)
    tmp = tmp_path_factory.mktemp("vm-ssh")
    with booted("l4s", append="fl.extra_modules=off") as guest:
        (guest.results / "authorized_keys").write_text((guest.vm.folder / "id_ed25519.pub").read_text())
        made = guest.run_script(REPO / "tests" / "vm" / "ssh_hosts.sh", str(GUEST_RESULTS / "authorized_keys"))
        assert made.returncode == 0 and "ready" in made.stdout, made.stdout + made.stderr
        inv = tmp / "inventory.ini"
        inventory(inv, guest.vm)
        before = guest.sh(STATE).stdout
        modules_before = guest.sh("lsmod | grep -E '^(tcp_prague|sch_dualpi2) ' || true").stdout
        check = run_fl("check", "--inventory", str(inv), timeout=1200)
        run = run_fl("run", str(SCENARIO), "--inventory", str(inv), "--load-modules", "--results", str(tmp / "results"),
                     timeout=3000)
        after = guest.sh(STATE).stdout
        kernel_log = guest.kernel_log()
    return {"release": release, "kit": kit, "kit_again": kit_again, "check": check, "run": run, "root": tmp / "results" / "default",
            "before": before, "after": after, "modules_before": modules_before, "kernel_log": kernel_log}


def test_the_kit_is_built_for_the_release_and_then_found_built(lab):
    built, again, release = lab["kit"], lab["kit_again"], lab["release"]
    assert built.returncode == 0, built.stdout + built.stderr
    kit = load_kit(release)
    assert kit is not None and [m.name for m in kit.modules] == ["sch_dualpi2", "tcp_prague"], kit
    assert all(m.vermagic.split()[0] == release for m in kit.modules), kit.modules
    assert str(kit_folder(release)) in built.stdout and kit.suite == "trixie-backports"
    assert again.returncode == 0 and "up to date" in again.stdout + again.stderr, again.stdout + again.stderr


def test_fl_check_reports_each_hosts_73_kernel_and_what_it_lacks(lab):
    p = lab["check"]
    assert p.returncode == 0, p.stdout + p.stderr
    for h in HOSTS:
        assert re.search(rf"^{h}: kernel {re.escape(lab['release'])}; lacks: nothing fl needs", p.stdout, re.M), p.stdout
    assert "dualpi2 missing" in p.stdout and "prague missing" in p.stdout, p.stdout  # before --load-modules
    assert lab["modules_before"] == "", lab["modules_before"]  # neither module loaded at first


def test_the_kit_is_copied_over_ssh_and_loaded_on_every_host(lab):
    """fl-load-modules on each host, the three at once (Ansible's forks): a host inserts
    the kit's file, or finds the module loaded from the same build by a host sharing its
    kernel, which is no error; a module is loaded from the kit at least once."""
    run = lab["run"]
    assert run.returncode == 0, run.stdout + run.stderr
    said = run.stdout + run.stderr
    for name in ("sch_dualpi2", "tcp_prague"):
        lines = re.findall(rf"module {name} on (\S+): (\w+)(.*)", said)
        assert sorted(h for h, _, _ in lines) == sorted(HOSTS), said
        assert {s for _, s, _ in lines} <= {"loaded", "already"}, (name, lines)
        assert any(f"{KIT_DIR}/{name}.ko" in detail for _, s, detail in lines if s == "loaded"), lines


def test_a_prague_cell_through_dualpi2_on_the_ssh_hosts(lab):
    rec, _, d = find(lab["root"], "vm-kit")
    assert rec["status"] == "ok", rec["reason"]
    assert rec["backend"]["testbed"] == "ssh" and rec["kernel"] == lab["release"]
    prague = next(m for m in load_kit(lab["release"]).modules if m.name == "tcp_prague")
    module = rec["cc_modules"]["prague"]
    assert module["file"] == f"{KIT_DIR}/tcp_prague.ko" and module["sha256"] == prague.sha256, module
    assert module["version"] == "3", module  # fl's Prague with its loss_2020 parameter
    sent, got = ([p for p in read_pcap(d / f"{h}.pcap.xz") if p.proto == 6 and p.payload > 0 and p.src == CLI
                  and 12865 not in (p.sport, p.dport)] for h in ("cli", "srv"))
    assert sum(p.ecn == ECT1 for p in sent) >= 0.99 * len(sent) > 1000, len(sent)  # Prague's ECT(1), as sent
    ce = sum(p.ecn == CE for p in got)  # dualpi2's L queue marks ECT(1) as CE (checked: 1476 of 9344 at 20 Mbit/s)
    assert sum(p.ecn == ECT1 for p in got) + ce >= 0.99 * len(got) and ce > 0, (len(got), ce)
    queue = json.loads((d / "metrics.json").read_text())["qdisc_totals"]["up"]  # tc's counters
    assert queue["kind"] == "dualpi2" and queue["pkts_in_l"] >= len(sent), (queue, len(sent))
    # every CE the server saw is one mark; ecn_mark may count a packet twice (CI measured
    # step_mark 1502 = the capture's CE 1502, ecn_mark 1504): the packets are the oracle
    assert queue["step_marks"] <= ce <= queue["ecn_marks"] <= 1.005 * ce, (queue, ce)


def test_the_hosts_read_back_as_before_and_the_kernel_log_is_clean(lab):
    assert lab["after"] == lab["before"], (lab["before"], lab["after"])
    assert not KERNEL_TROUBLE.search(lab["kernel_log"]), lab["kernel_log"][-3000:]
