"""`fl check`: tools and versions, kernel qdiscs and congestion controls, privileges."""
from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from .capabilities import OPTIONAL_TOOLS, REQUIRED_TOOLS, Capabilities, probe_request
from .image.kit import KIT_KERNEL
from .programs import probe
from .results.cell_record import CcModule
from .testbed.ansible import ansible_playbook
from .testbed.probe_reply import ProbeReply, parse_reply
from .testbed.probing import merge_hosts

if TYPE_CHECKING:
    from .testbed.vm import VmConfig


#: Features named more plainly than the probe's keys.
FEATURE_NAMES = {"accecn": "accecn (tcp_ecn=3 accepted)"}
TCP_REWRITE = {"tc": "tc filter (u32, pedit, csum)",
               "nft": "nftables (no act_pedit/act_csum here; this kernel applies nftables' TCP header writes)",
               None: "NOT POSSIBLE here (no act_pedit/act_csum, and nftables' TCP header writes refused)"}


def print_hosts(per_host: dict[str, ProbeReply]) -> None:
    """Per host of an ssh testbed: its kernel, and what fl needs there that it lacks."""
    for host, reply in per_host.items():
        lacks = [f"{t} ({REQUIRED_TOOLS[t]})" for t in REQUIRED_TOOLS if not reply.tools.get(t)]
        lacks += [] if reply.root else ["root (fl configures qdiscs, sysctls and captures)"]
        lacks += [f"a working probe: {reply.error}"] if reply.error else []
        optional = [t for t in OPTIONAL_TOOLS if not reply.tools.get(t)]
        print(f"{host}: kernel {reply.kernel}; lacks: {'; '.join(lacks) or 'nothing fl needs'}"
              + (f"; optional, missing: {', '.join(optional)}" if optional else ""))


def check(vm: VmConfig | None = None, inventory: Path | None = None) -> int:
    """This machine's kernel and tools, or (VM) the guest's, probed for real."""
    from .run.vm_probe import probe_in_vm, probe_ssh, ssh_inventory
    request = probe_request([], catalogue=True)
    if vm is not None and inventory is not None:
        caps = probe_in_vm(vm, inventory, request)
    elif (inv := ssh_inventory(inventory)) is not None:
        per_host = probe_ssh(inv, request)
        print_hosts(per_host)
        caps = Capabilities(merge_hosts(per_host))
        print("\nthe testbed as a whole (qdiscs: the middlebox's; a CC: if both ends have it; a tool: if every host has it):")
    else:
        caps = Capabilities(parse_reply(probe.probe(request), "this machine"))
    ok = True
    print(f"kernel {caps.kernel}; running as {'root' if caps.reply.root else 'a regular user'}")
    print("\ntools:")
    for name, what in {**REQUIRED_TOOLS, **OPTIONAL_TOOLS}.items():
        version = caps.tools.get(name)
        needed = name in REQUIRED_TOOLS
        ok &= bool(version) or not needed
        print(f"  {name:<10} {version or ('MISSING' if needed else 'missing (optional)'):<12} {what}")
    ansible = _ansible_version()
    ok &= ansible is not None
    print(f"  {'ansible':<10} {ansible or 'MISSING':<12} builds the testbed")
    if caps.error or caps.reply.features is None:
        print(f"\nno kernel probe: {caps.error}")
        return 1
    kinds = caps.reply.kinds
    print("\nqdiscs (tried in a throwaway namespace):")
    print("  supported:   " + " ".join(k for k, v in kinds.items() if v == "ok"))
    print("  unsupported: " + (" ".join(k for k, v in kinds.items() if v != "ok") or "none"))
    ccs = caps.reply.ccs
    print("\ncongestion controls (setsockopt TCP_CONGESTION):")
    print("  usable:      " + " ".join(c for c, v in ccs.items() if v))
    print("  unavailable: " + (" ".join(c for c, v in ccs.items() if not v) or "none"))
    for cc in ccs:
        if (module := caps.cc_module(cc)) and module.parameters:
            print(f"  {cc}: {module_summary(module)}")
    features = caps.reply.features.model_dump(exclude_none=True).items()
    print("\nfeatures: " + ", ".join(f"{FEATURE_NAMES.get(k, k)} {'yes' if v else 'NO'}" for k, v in features))
    nft_writes = "take effect" if caps.reply.tcp_rewrite.get("nft") else "are refused by this kernel"
    print(f"ECN strip-negotiation (a SYN's AE, CWR, ECE cleared): {TCP_REWRITE[caps.tcp_rewrite]}"
          + (f"; nftables' TCP header writes {nft_writes}" if caps.tcp_rewrite == "tc" else ""))
    for line in hints(caps):
        print("  " + line)
    return 0 if ok and caps.reply.root else 1


def hints(caps: Capabilities) -> list[str]:
    """What to do about the L4S pieces and netem this kernel lacks."""
    out = []
    kit = kit_hint(caps.kernel)
    if not caps.feature("netem"):
        out.append("without netem, cells with an RTT, loss or jitter are skipped on this kernel")
    if caps.reply.kinds.get("dualpi2") != "ok":
        out.append("dualpi2 missing: it needs Linux ≥ 6.17 with sch_dualpi2 and iproute2 ≥ 6.17 (tc says "
                   "'Unknown qdisc' where iproute2 is older: Debian's trixie-backports and sid have one that knows "
                   f"it){kit} (./fl image build l4s builds both, then --vm l4s)")
    if not caps.feature("accecn"):
        out.append("AccECN missing (tcp_ecn=3 refused): it needs Linux ≥ 6.18 (--vm l4s)")
    if not caps.cc_ok("prague") and (refused := caps.reply.cc_errors.get("prague")):
        out.append(f"prague refused: this kernel has tcp_prague but would not load it: {refused} (a parameter "
                   "outside its range, from --vm-append or modprobe.d: docs/prague.md#parameters gives each one's)")
    elif not caps.cc_ok("prague"):
        out.append(f"prague missing: it needs Linux ≥ 7.3 (AccECN's hooks) with fl's tcp_prague module{kit} "
                   "(./fl image build l4s builds it, then --vm l4s), or the L4STeam kernel fork's own: an image "
                   "from its .deb files (images/l4s-prague.example.yml), a kernel with its modules in "
                   "/lib/modules/RELEASE (--vm /path/to/vmlinuz) or its tree after make (--vm /path/to/linux)")
    return out


def kit_hint(release: str | None) -> str:
    """How to get fl's modules into a kernel of release 7.3 or later, in the hints' words."""
    m = re.match(r"^(\d+)\.(\d+)", release or "")
    if not m or (int(m.group(1)), int(m.group(2))) < KIT_KERNEL:
        return ""
    return (f"; on this kernel: ./fl modules build --release {release} builds fl's for it (from Debian's "
            "headers of that release), ./fl run --load-modules loads them")


def module_summary(module: CcModule) -> str:
    """A CC module in one line: its file's name and hash, what it says it is, its parameters."""
    params = dict(module.parameters)
    what = params.pop("implementation", None) or module.version or module.module
    sha = (module.sha256 or "")[:12]
    return (f"{what}; {Path(module.file).name if module.file else module.module}"
            f"{f' sha256 {sha}…' if sha else ''}; " + " ".join(f"{k}={v}" for k, v in params.items()))


def _ansible_version() -> str | None:
    import subprocess
    try:
        out = subprocess.run([ansible_playbook(), "--version"], capture_output=True, text=True).stdout
    except OSError:
        return None
    first = out.splitlines()[0] if out else ""
    return first.split("[core")[-1].strip(" ]") if "core" in first else (first or None)
