"""The teardown log (teardown.log): per host, after a "======== HOST ========" line,
each command fl ran after the test ("$ COMMAND") and what it printed. Its markers are
teardown_format.py's, which the hosts' state scripts print (testbed/state_script.py)."""
from __future__ import annotations

import re
from collections.abc import Callable

from ..ecn import cookie_flow, rule_comment
from ..teardown_format import NEXT_COMMAND, command_header, header_host, output_after, stats_device


def _parts(text: str, key: Callable[[str], str | None]) -> dict[str, str]:
    """TEXT cut at each line KEY names: {its name: the text after it, up to the next}."""
    out: dict[str, list[str]] = {}
    part: list[str] | None = None
    for line in text.split("\n"):
        if (name := key(line)) is not None:
            part = out[name] = []
        elif part is not None:
            part.append(line)
    return {name: "\n".join(["", *lines]) for name, lines in out.items()}


def host_sections(log: str) -> dict[str, str]:
    """Each host's part of a teardown log (after its host_header line)."""
    return _parts(log, header_host)


def device_blocks(section: str) -> dict[str, str]:
    """Each device's `tc -s -d qdisc show; tc -s -d class show` output in a host's part."""
    return {dev: text.split(NEXT_COMMAND, 1)[0] for dev, text in _parts(section, stats_device).items()}


_NFT_COUNTER_RE = re.compile(r'counter packets (\d+) bytes \d+ comment "(flow \d+: [\w-]+)"')
_TC_COOKIE_RE = re.compile(r"\bcookie ([0-9a-f]+)")
_TC_SENT_RE = re.compile(r"Sent \d+ bytes (\d+) pkt")
_SYSCTL_RE = re.compile(r"^([\w.]+) = (.*)$", re.M)


def command_output(section: str, command: str) -> str | None:
    """What COMMAND (the text after "$ ", up to its end of line) printed in a host's part."""
    start = section.find(command_header(command))
    return output_after(section, start) if start >= 0 else None


def rule_counters(section: str) -> dict[str, int]:
    """The per-flow ECN rules' counters in a host's part: "flow N: ACTION" → packets
    matched; nftables rules carry the name as their comment, tc filters (strip-negotiation)
    their flow in their actions' cookie (ecn.py)."""
    out = {name: int(n) for n, name in _NFT_COUNTER_RE.findall(section)}
    for chunk in re.split(r"^filter ", section, flags=re.M):
        cookie, sent = _TC_COOKIE_RE.search(chunk), _TC_SENT_RE.search(chunk)
        if cookie and sent and (flow := cookie_flow(cookie.group(1))) is not None:
            out[rule_comment(flow, "strip-negotiation")] = int(sent.group(1))
    return out


def sysctl_values(section: str) -> dict[str, str]:
    """Sysctls the host read back after the test ("key = value" lines), whitespace folded."""
    return {k: " ".join(v.split()) for k, v in _SYSCTL_RE.findall(section)}
