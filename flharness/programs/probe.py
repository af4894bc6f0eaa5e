#!/usr/bin/env python3
"""Probe what this kernel and userland can do, for real, in a throwaway namespace.

Standard library only: fl runs it in-process on the controller and ships it as a
script to ssh hosts. Input (JSON, argv[1] or stdin): ``layout`` (where fl puts a qdisc,
from layout.py: ``shaper`` lines, ``root`` and ``child`` lines for ``{dev}`` and
``{qdisc}``, and the ``root_handle``), optional lists ``qdiscs``
(``[tokens, self_shaping]``), ``ccs``, ``sysctls`` (keys) and ``sysctl_sets`` (one host's
``[key, value]`` settings of one cell, tried in order) and ``tcp_rewrite`` (the ways fl
rewrites a SYN's TCP flags: tc batch lines for a device ``{dev}`` whose ingress qdisc
exists, and an nftables statement), ``tunnels`` (the kinds to try) and ``catalogue``
(fl check: every qdisc kind, CC and tunnel besides; a run tries only what it needs, as
each module loaded costs). Output (stdout): JSON with the kernel release, tool
versions, features, qdisc/CC/sysctl verdicts, the usable CCs that are modules (file,
sha256, parameters) and which TCP rewrites work (nftables' only tried where tc's is not
possible, or with ``nft_always``).

A qdisc spec is tried in the exact position fl uses (an htb class child, or the root
for self-shaping qdiscs): "unsupported" means the kernel lacks the qdisc kind,
"invalid" means tc rejected the arguments.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TypedDict

#: Kinds `fl check` reports on, with the smallest arguments each accepts.
KINDS = {
    "pfifo": "pfifo", "bfifo": "bfifo", "pfifo_fast": "pfifo_fast", "htb": "htb",
    "tbf": "tbf rate 1mbit burst 32k latency 400ms", "netem": "netem delay 1ms",
    "fq_codel": "fq_codel", "codel": "codel", "cake": "cake", "fq": "fq", "pie": "pie",
    "fq_pie": "fq_pie", "red": "red limit 400000 avpkt 1000 bandwidth 10mbit adaptive",
    "sfq": "sfq", "dualpi2": "dualpi2", "prio": "prio", "hfsc": "hfsc", "drr": "drr",
}
#: Kinds `fl check` tries at a device's root (classful or shaping by themselves; the rest
#: under an htb class, where fl puts a scenario's qdisc). Not the scenario's rule, which
#: is qdisc.py's SELF_SHAPING_KINDS: this probe runs alone on testbed hosts.
ROOT_KINDS = ("tbf", "htb", "netem", "hfsc", "drr", "prio")
#: The kinds of tunnel fl offers (scenario key tunnel), each tried by Probe.tunnels.
TUNNELS = ("wireguard", "fou", "ipsec")
#: Where a host keeps fl's modules that fl loaded into its kernel (`fl run --load-modules`:
#: run/kit_loading.py): a loaded module's file when the kernel's modules folder
#: holds none, or another one.
KIT_DIR = "/run/fl/modules"
#: Congestion controls `fl check` tries to select.
CCS = ["reno", "cubic", "bbr", "dctcp", "prague", "bbr2", "bbr3", "vegas", "westwood", "htcp"]
TOOLS = {
    "flent": ["flent", "--version"], "netperf": ["netperf", "-V"], "netserver": ["netserver", "-V"],
    "irtt": ["irtt", "version"], "fping": ["fping", "-v"], "tcpdump": ["tcpdump", "--version"],
    "xz": ["xz", "--version"], "tc": ["tc", "-V"], "ip": ["ip", "-V"], "ethtool": ["ethtool", "--version"],
    "nft": ["nft", "--version"], "ss": ["ss", "-V"], "iperf": ["iperf", "-v"], "wg": ["wg", "--version"],
}
#: A throwaway ESP SA of the shape fl's IPsec tunnels use (the kernel needs esp4 and the
#: cbc(aes) and hmac(sha256) transforms; a window over 32 needs the ESN replay state).
ESP_TRIES, ESP_PAUSE_S = 3, 2.0  # the ESP SA's trial, again while the kernel may be loading its crypto
ESP_TRIAL = ["src", "192.0.2.1", "dst", "192.0.2.2", "proto", "esp", "spi", "0x100", "mode", "tunnel",
             "if_id", "7", "auth-trunc", "hmac(sha256)", "0x" + "11" * 32, "128",
             "enc", "cbc(aes)", "0x" + "22" * 16, "replay-window", "256"]


class Layout(TypedDict):
    """Where fl puts a qdisc (layout.py): batch lines for {dev} and {qdisc}."""
    shaper: list[str]
    root: str
    child: str
    root_handle: str


class RewriteTrials(TypedDict):
    """The ways fl clears a SYN's ECN flags: tc batch lines for {dev}, an nftables statement."""
    tc: list[str]
    nft: str
    nft_always: bool  # try nftables' too where tc's works (fl check)


class Request(TypedDict):
    """What the controller asks (capabilities.probe_request)."""
    layout: Layout
    qdiscs: list[list[Any]]  # [tokens, self_shaping]
    ccs: list[str]
    tunnels: list[str]
    catalogue: bool
    sysctls: list[str]
    sysctl_sets: list[list[list[str]]]
    tcp_rewrite: RewriteTrials
    timeouts: bool  # False in a guest on QEMU's virtual clock (COMMAND_TIMEOUT_S)
    programs: list[str]  # the schemes' programs the cells run (scenario/schemes.py's needs)


class QdiscVerdict(TypedDict, total=False):
    verdict: str  # ok, unsupported, invalid
    message: str  # tc's complaint, with unsupported and invalid


class Reply(TypedDict):
    """What the probe answers: every key, always (capabilities.ProbeReply checks it)."""
    kernel: str
    root: bool
    tools: dict[str, str | None]
    error: str | None
    features: dict[str, bool]
    kinds: dict[str, str]
    qdiscs: dict[str, QdiscVerdict]
    ccs: dict[str, bool]
    cc_modules: dict[str, dict[str, Any]]
    sysctls: dict[str, bool]
    sysctl_defaults: dict[str, str]
    sysctl_sets: dict[str, str]
    tcp_rewrite: dict[str, bool]
    feature_errors: dict[str, str]  # a feature the kernel was found to lack → what failed
    cc_errors: dict[str, str]  # a congestion control whose module is there but did not load → why
    programs: dict[str, bool]  # each asked for: on PATH


UNKNOWN_KIND = re.compile(r"kind is unknown|Unknown qdisc|qdisc not found|Unknown filter|"
                          r"not supported|Operation not supported", re.I)


#: Seconds a probe command may take, unless the request says the clock cannot time it: a
#: guest on QEMU's virtual clock (icount, sleep=off) that idles while its QEMU waits for the
#: host (9p reads on a busy machine) has its clock leap to its next timer, so a guest-side
#: timeout fires early (CI: `ip netns add` "timed out after 300 seconds" 60 s into a boot).
#: There the probe playbook's task timeout, on the controller's clock, bounds the probe.
COMMAND_TIMEOUT_S = 300.0
TIMEOUTS = {"on": True}  # probe() sets it from the request


def sh(*argv: str, ns: str | None = None, timeout: float = COMMAND_TIMEOUT_S,
       stdin: str | None = None) -> tuple[int, str]:
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(argv)
    limit = timeout if TIMEOUTS["on"] else None
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, input=stdin)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 127, str(e)
    return p.returncode, (p.stdout + p.stderr).strip()


def failure(done: tuple[int, str], what: str) -> str | None:
    """None if a command DONE (sh's exit code and output) succeeded, else WHAT and its last word."""
    code, out = done
    return None if code == 0 else f"{what}: {(out.splitlines() or [f'exit {code}'])[-1]}"


def batch_errors(output: str) -> dict[int, str]:
    """A `tc -force -batch -` run's failures: line number → first line of its complaint."""
    errors: dict[int, str] = {}
    said: list[str] = []
    for line in output.splitlines():
        m = re.match(r"Command failed -:(\d+)$", line)
        if m:
            errors[int(m.group(1))] = next((s for s in said if s.strip()), "tc failed")
            said = []
        else:
            said.append(line)
    return errors


def tool_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name, argv in TOOLS.items():
        if shutil.which(argv[0]) is None:
            out[name] = None
            continue
        known = flent_version() if name == "flent" else None
        text = known or sh(*argv)[1]
        m = re.search(r"\d+\.\d+(\.\d+)*", text)
        out[name] = m.group(0) if m else "present"
    return out


def flent_version() -> str | None:
    """Flent's version from its package (`flent --version` imports matplotlib: seconds
    in an emulated VM guest), or None to ask it."""
    script = Path(shutil.which("flent") or "/nonexistent")
    try:
        m = re.search(r"flent==([\d.]+)", script.read_text(errors="replace")[:2000])
    except OSError:
        m = None
    if m:
        return m.group(1)
    for base in [*sys.path, "/usr/share/flent"]:
        info = Path(base, "flent", "build_info.py")
        if info.is_file():
            m = re.search(r"VERSION\s*=\s*['\"]([^'\"]+)", info.read_text(errors="replace"))
            if m:
                return m.group(1)
    return None


#: Modules that give every network namespace a fallback device once loaded (ipip: tunl0,
#: sit: sit0, ip_gre: gre0 …), which the tunnel trials load: those the probe loaded are
#: unloaded after it (in this order: users first), so a host reads back as it was.
DEVICE_MODULES = ("fou6", "fou", "ipip", "sit", "ip6_tunnel", "ip_gre", "ip6_gre", "ip_vti", "ip6_vti")


def loaded_modules() -> set[str]:
    try:
        return {line.split()[0] for line in Path("/proc/modules").read_text().splitlines() if line.strip()}
    except OSError:
        return set()


class Probe:
    def __init__(self, layout: Layout) -> None:
        """LAYOUT: where fl puts a qdisc (layout.py, in the request): the htb shaper's
        lines, and the root's and the htb child's line, for a device {dev} and a qdisc {qdisc}."""
        self.ns = f"fl-probe-{uuid.uuid4().hex[:6]}"
        self.dev = "fl0"
        self.layout = layout
        self.errors: dict[str, str] = {}  # a feature found missing → what failed
        self.modules_before: set[str] = set()

    def _placed(self, tokens: list[str], self_shaping: bool) -> list[str]:
        """The batch lines that put TOKENS where fl would: at the root, or under the shaper."""
        fill = {"{dev}": self.dev, "{qdisc}": " ".join(tokens)}
        lines = [*([] if self_shaping else self.layout["shaper"]), self.layout["root" if self_shaping else "child"]]
        for k, v in fill.items():
            lines = [line.replace(k, v) for line in lines]
        return lines

    def __enter__(self) -> Probe:
        self.modules_before = loaded_modules()
        rc, msg = sh("ip", "netns", "add", self.ns)
        if rc != 0:
            raise RuntimeError(f"cannot create a network namespace: {msg}")
        rc, msg = sh("ip", "-n", self.ns, "link", "add", "name", self.dev, "type", "veth", "peer", "name", "fl1")
        if rc != 0:  # every probe and testbed needs veth (a module the kernel could not load?)
            self.__exit__()
            raise RuntimeError(f"cannot create a veth pair: {msg}")
        sh("ip", "-n", self.ns, "link", "set", self.dev, "up")
        return self

    def __exit__(self, *exc: object) -> None:
        for pid in sh("ip", "netns", "pids", self.ns)[1].split():
            if pid.isdigit():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), 9)
        sh("ip", "netns", "del", self.ns)
        loaded = loaded_modules() - self.modules_before
        for module in (m for m in DEVICE_MODULES if m in loaded):
            sh("modprobe", "-r", "-q", module)  # with what it pulled in, where nothing else uses them

    def tc(self, *args: str) -> tuple[int, str]:
        return sh("tc", "-n", self.ns, *args)

    def qdisc(self, tokens: list[str], self_shaping: bool) -> QdiscVerdict:
        return self.qdiscs([(tokens, self_shaping)])[0]

    def qdiscs(self, specs: list[tuple[list[str], bool]]) -> list[QdiscVerdict]:
        """Try each qdisc where fl would put it, all in one `tc -batch` (every program
        started costs, most in an emulated VM guest); verdict ok / unsupported / invalid."""
        lines: list[str] = []
        tried: list[int] = []  # the batch line that tries each spec
        for tokens, self_shaping in specs:
            lines.append(f"qdisc del dev {self.dev} root")
            lines += self._placed(tokens, self_shaping)
            tried.append(len(lines))
        errors = batch_errors(sh("tc", "-n", self.ns, "-force", "-batch", "-", stdin="\n".join(lines) + "\n")[1])
        out: list[QdiscVerdict] = []
        for line in tried:
            msg = errors.get(line)
            if msg is None:
                out.append({"verdict": "ok"})
            else:
                out.append({"verdict": "unsupported" if UNKNOWN_KIND.search(msg) else "invalid", "message": msg})
        return out

    def features(self, tunnels: list[str]) -> dict[str, bool]:
        """What every testbed uses, and the TUNNELS kinds (with cls_flow, which tunnels need)."""
        f: dict[str, bool] = {}
        ip, tc = ("ip", "-n", self.ns), ("tc", "-n", self.ns)
        f["ifb"] = self._tried("ifb", "ip link add type ifb", ("ifb",), *ip, "link", "add", "name", "flifb", "type", "ifb")
        f["ingress"] = self._tried("ingress", "tc qdisc add ingress", ("sch_ingress",),
                                   *tc, "qdisc", "add", "dev", self.dev, "handle", "ffff:", "ingress")
        f["u32_mirred"] = f["ifb"] and f["ingress"] and self._tried(
            "u32_mirred", "tc filter add u32 action mirred", ("cls_u32", "act_mirred"),
            *tc, "filter", "add", "dev", self.dev, "parent", "ffff:", "protocol", "all", "prio", "10",
            "u32", "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", "flifb")
        f["netem"] = self.qdisc(["netem", "delay", "1ms"], True)["verdict"] == "ok"
        f["nftables"] = shutil.which("nft") is not None and \
            sh("nft", "add", "table", "inet", "flprobe", ns=self.ns)[0] == 0
        f["veth"] = sh("ip", "-n", self.ns, "link", "show", self.dev)[0] == 0
        # AccECN (RFC 9768; mainline since Linux 6.18): the kernel takes tcp_ecn=3
        f["accecn"] = sh("sysctl", "-qw", "net.ipv4.tcp_ecn=3", ns=self.ns)[0] == 0
        if tunnels:
            self.qdisc(["pfifo"], False)  # a classful root to hang a filter on
            f["cls_flow"] = self.tc("filter", "add", "dev", self.dev, "parent", self.layout["root_handle"], "handle",
                                    "1", "protocol", "all", "prio", "1",
                                    "flow", "hash", "keys", "src,dst,proto,proto-src,proto-dst", "divisor", "1024")[0] == 0
        f.update(self.tunnels(tunnels))
        return f

    def _tried(self, feature: str, what: str, modules: tuple[str, ...], *argv: str) -> bool:
        """Whether ARGV (WHAT, in words) succeeds; if not, once more after loading MODULES (the kernel loads
        them on demand, but a CI's freshly booted guest once refused an ingress qdisc its
        next boot took). What failed the second time: self.errors[FEATURE]."""
        done = sh(*argv)
        if done[0] != 0:
            for module in modules:
                sh("modprobe", "-q", module)
            done = sh(*argv)
        said = failure(done, what)
        if said is not None:
            self.errors[feature] = said
        return said is None

    def tcp_rewrite(self, trials: RewriteTrials) -> dict[str, bool]:
        """Which ways of clearing a SYN's flags work here, tried for real. tc: the filter
        (u32, pedit, csum) is accepted on the ingress. nftables: a SYN sent over lo
        leaves the rule's counter at 1 only if the write happened (Linux 7.x loads such a
        rule, then refuses the write to the TCP header's data-offset byte packet by packet)."""
        tc = [line.replace("{dev}", self.dev) for line in trials["tc"]]
        out = {"tc": bool(tc) and not batch_errors(sh("tc", "-n", self.ns, "-force", "-batch", "-",
                                                       stdin="\n".join(tc) + "\n")[1])}
        statement = trials["nft"]
        if out["tc"] and not trials["nft_always"]:
            return out  # fl uses tc then; the nftables trial starts a Python, seconds in an emulated guest
        out["nft"] = bool(statement) and shutil.which("nft") is not None and self._nft_write(statement)
        return out

    def _nft_write(self, statement: str) -> bool:
        sh("ip", "-n", self.ns, "link", "set", "lo", "up")
        rules = ("table inet flprobe_tcp {\n chain out {\n  type filter hook output priority mangle; policy accept;\n"
                 f"  oif lo tcp dport 9 {statement} counter\n }}\n}}\n")
        if sh("nft", "-f", "-", ns=self.ns, stdin=rules)[0] != 0:
            return False
        connect = ("import socket\ns = socket.socket()\ns.settimeout(2)\n"
                   "try:\n    s.connect(('127.0.0.1', 9))\nexcept OSError:\n    pass\n")
        sh(sys.executable, "-c", connect, ns=self.ns, timeout=30)
        listed = sh("nft", "list", "chain", "inet", "flprobe_tcp", "out", ns=self.ns)[1]
        return re.search(r"counter packets [1-9]", listed) is not None

    def tunnels(self, kinds: list[str]) -> dict[str, bool]:
        """Can this kernel build each of KINDS of tunnel fl offers (scenario key tunnel)?
        What failed, for those it cannot: self.errors."""
        trials = {"wireguard": self._wireguard, "fou": self._fou, "ipsec": self._ipsec}
        out = {}
        for kind in (k for k in kinds if k in trials):
            failed = trials[kind]()
            out[kind] = failed is None
            if failed is not None:
                self.errors[kind] = failed
        return out

    def _wireguard(self) -> str | None:
        return failure(sh("ip", "-n", self.ns, "link", "add", "flwg", "type", "wireguard"), "ip link add type wireguard")

    def _fou(self) -> str | None:
        ip = ("ip", "-n", self.ns)
        sh("modprobe", "-q", "fou")  # its netlink family does not load the module on demand
        port = "7000"  # any: the trial's namespace is its own (a cell's port: testbed/tunnel.py)
        return failure(sh(*ip, "fou", "add", "port", port, "ipproto", "4"), "ip fou add") or failure(sh(
            *ip, "link", "add", "flfou", "type", "ipip", "remote", "192.0.2.2", "local", "192.0.2.1",
            "encap", "fou", "encap-sport", "auto", "encap-dport", port), "ip link add type ipip encap fou")

    def _ipsec(self) -> str | None:
        """An xfrm interface and an ESP SA with fl's algorithms. The SA's first use loads
        and self-tests the crypto (aes, cbc, sha256, authenc, echainiv), which an emulated
        guest just booted may not have finished (issue 37: a boot whose probe said no ran
        IPsec cells in others): the SA is tried again before the kernel is said to lack it."""
        ip = ("ip", "-n", self.ns)
        sh("modprobe", "-qa", "xfrm_interface", "esp4")
        if failed := failure(sh(*ip, "link", "add", "flxfrm", "type", "xfrm", "dev", self.dev, "if_id", "7"),
                             "ip link add type xfrm"):
            return failed
        for attempt in range(1, ESP_TRIES + 1):
            failed = failure(sh(*ip, "xfrm", "state", "add", *ESP_TRIAL),
                             f"ip xfrm state add (esp, cbc(aes), hmac(sha256)), try {attempt} of {ESP_TRIES}")
            if failed is None:
                return None
            if attempt < ESP_TRIES:
                time.sleep(ESP_PAUSE_S)
        return failed


    def sysctl_exists(self, key: str) -> bool:
        return sh("sysctl", "-n", key, ns=self.ns)[0] == 0

    def sysctl_defaults(self, keys: list[str]) -> dict[str, str]:
        return {k: sh("sysctl", "-n", k, ns=self.ns)[1] for k in keys if self.sysctl_exists(k)}

    def sysctl_set(self, pairs: list[list[str]], defaults: dict[str, str]) -> str:
        """Apply one host's settings of one cell, in order, from the defaults (as the
        endpoint role does): '' if the kernel takes them, else its complaint."""
        for key in sorted(defaults):
            sh("sysctl", "-qw", f"{key}={defaults[key]}", ns=self.ns)
        for key, value in pairs:
            if key not in defaults:
                return ""  # no such sysctl here: the cell is skipped for that reason
            rc, msg = sh("sysctl", "-w", f"{key}={value}", ns=self.ns)
            if rc != 0:
                return (msg.splitlines() or [f"sysctl exit {rc}"])[-1]
        return ""


def sysctl_set_key(pairs: Iterable[Sequence[str]]) -> str:
    """How a set of sysctl settings is named in the probe's answer."""
    return " ".join(f"{k}={v}" for k, v in pairs)


def available_ccs() -> set[str]:
    """The congestion controls the kernel has loaded or built in (an image's extra module
    among them, loaded at boot)."""
    try:
        return set(Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split())
    except OSError:
        return set()


def cc_usable(name: str) -> bool:
    """Can a socket use this congestion control? (What netperf -K does; loads the module.)"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, name.encode())
        except OSError:
            return False
    return True


def cc_module(name: str) -> dict[str, Any] | None:
    """A congestion control that is a loaded module (tcp_NAME): its file's sha256 and its
    parameters' values as the kernel has them now (which implementation ran, and how)."""
    module = f"tcp_{name}"
    folder = Path("/sys/module") / module
    if not (folder / "parameters").is_dir() and not (folder / "srcversion").is_file():
        return None  # built in, or not a module
    params, writable = {}, []
    for f in sorted((folder / "parameters").glob("*")):
        with contextlib.suppress(OSError):
            params[f.name] = f.read_text().strip()
            if f.stat().st_mode & 0o222:
                writable.append(f.name)
    srcversion = _read(folder / "srcversion")
    found = {"module": module, "parameters": params, "writable": writable, "file": None, "sha256": None,
             "version": _read(folder / "version"), "srcversion": srcversion}
    if path := loaded_file(module, srcversion):
        found["file"] = str(path)
        found["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def cc_refused(name: str) -> str | None:
    """Why the kernel would not load congestion control NAME's module where it has one
    (tcp_NAME.ko is there, modprobe fails: a parameter out of its range, from
    --vm-append or modprobe.d): modprobe's complaint and the kernel's own lines about it."""
    module = f"tcp_{name}"
    code, filename = sh("modinfo", "-F", "filename", module)
    if code != 0 or not Path(filename.strip()).is_file():
        return None  # no such module, or modules.dep names a file no longer there: the kernel lacks it
    code, out = sh("modprobe", module)
    if code == 0:
        return None
    _, log = sh("dmesg")
    said = list(dict.fromkeys(line.split("] ", 1)[-1].strip() for line in log.splitlines() if f"{module}:" in line))
    complaint = out.strip().splitlines()[-1] if out.strip() else f"modprobe {module} failed"
    return "; ".join([complaint, *(f"kernel: {line}" for line in said[-3:])])


def loaded_file(module: str, srcversion: str | None) -> Path | None:
    """The file MODULE was loaded from, as far as it can be told: fl's own (KIT_DIR), else
    the one modprobe would load, if its srcversion is the loaded module's (modules built
    without one: the one modprobe would load)."""
    code, out = sh("modinfo", "-F", "filename", module)
    candidates = [Path(KIT_DIR) / f"{module}.ko"]
    if code == 0 and out.strip():
        candidates.append(Path(out.splitlines()[0].strip()))
    for path in (c for c in candidates if c.is_file()):
        code, out = sh("modinfo", "-F", "srcversion", str(path))
        if srcversion is None or (code == 0 and out.strip() == srcversion):
            return path
    return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def probe(request: Request) -> Reply:
    TIMEOUTS["on"] = bool(request.get("timeouts", True))
    result: Reply = {"kernel": platform.release(), "root": os.geteuid() == 0, "tools": tool_versions(), "error": None,
                     "features": {}, "kinds": {}, "qdiscs": {}, "ccs": {}, "cc_modules": {}, "sysctls": {},
                     "sysctl_defaults": {}, "sysctl_sets": {}, "tcp_rewrite": {}, "feature_errors": {},
                     "cc_errors": {}, "programs": {p: shutil.which(p) is not None for p in request.get("programs", [])}}
    if not result["root"]:
        result["error"] = "not root: fl needs root (CAP_NET_ADMIN) to build namespaces and qdiscs"
        return result
    try:
        with Probe(request["layout"]) as p:
            catalogue = bool(request["catalogue"])
            result["features"] = p.features([str(t) for t in (TUNNELS if catalogue else request["tunnels"])])
            tried = KINDS if catalogue else {"htb": KINDS["htb"]}  # a run needs only its shaper's kind
            kinds = p.qdiscs([(spec.split(), k in ROOT_KINDS) for k, spec in tried.items()])
            result["kinds"] = {k: v["verdict"] for k, v in zip(tried, kinds)}
            # tokens as text: Ansible's to_json may turn a numeric string ("200") into a number
            specs = [([str(x) for x in t], bool(s)) for t, s in request["qdiscs"]]
            result["qdiscs"] = {" ".join(t): v for (t, _), v in zip(specs, p.qdiscs(specs))}
            ccs = sorted(set(CCS if catalogue else ()) | {str(c) for c in request["ccs"]} | available_ccs())
            result["ccs"] = {c: cc_usable(c) for c in ccs}
            result["cc_modules"] = {c: m for c, ok in result["ccs"].items() if ok and (m := cc_module(c))}
            result["cc_errors"] = {c: why for c, ok in result["ccs"].items() if not ok and (why := cc_refused(c))}
            keys = [str(k) for k in request["sysctls"]]
            result["sysctls"] = {k: p.sysctl_exists(k) for k in keys}
            result["sysctl_defaults"] = defaults = p.sysctl_defaults(keys)
            sets = [[[str(k), str(v)] for k, v in pairs] for pairs in request["sysctl_sets"]]
            result["sysctl_sets"] = {sysctl_set_key(pairs): p.sysctl_set(pairs, defaults) for pairs in sets}
            result["tcp_rewrite"] = p.tcp_rewrite(request["tcp_rewrite"])
            result["feature_errors"] = p.errors
    except RuntimeError as e:
        result["error"] = str(e)
    return result


def main() -> None:
    raw = sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read()
    print(json.dumps(probe(json.loads(raw)), indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
