"""Path-emulation and endpoint axes: netem impairments, rate schedules, per-flow ECN
rewrites and start times, a client qdisc, a competing UDP flow, tunnels.

Each parser turns a raw YAML value into (typed value, default label), raising
ValueError with a one-line message, like the core axes in values.py.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..ecn import DESCRIPTIONS as ECN_ACTIONS
from ..qdisc import check_template, default_label
from ..results.cell_record import CODEPOINT_WORDS, THEN, ProbeConfig, VideoConfig
from ..units import Duration, Rate

#: netem words fl passes through (fl itself writes `delay`, from the RTT).
NETEM_WORDS = {"loss", "random", "state", "gemodel", "ecn", "corrupt", "duplicate", "reorder",
               "gap", "slot", "packets", "bytes", "distribution", "uniform", "normal", "pareto",
               "paretonormal", "jitter"}
#: After THEN, a second netem stage, chained after the path delay's (the L4S Tests' bursty
#: links: `then delay 200us slot 800us 5ms packets 16 limit 10000`); there `delay` and
#: `limit` are the stage's own.
CHAINED_WORDS = NETEM_WORDS | {"delay", "limit"}
NETEM_NUMBER_RE = re.compile(r"^\d+(\.\d+)?(%|us|ms|s)?\Z")
TUNNELS = ("none", "wireguard", "ipsec", "fou")
#: Where the path delay goes: share of the RTT added on the way up (cli → srv) and down.
RTT_SPLITS = {"even": (0.5, 0.5), "up": (1.0, 0.0), "down": (0.0, 1.0)}


@dataclass(frozen=True)
class Netem:
    """Extra netem words per direction, as the cell's configuration carries them
    (results/cell_record.py's NetemConfig, which reads the stages)."""

    up: tuple[str, ...]
    down: tuple[str, ...]


@dataclass(frozen=True)
class Step:
    at: Duration  # seconds after Flent starts (its time axis; flows start 5 s later)
    up: Rate
    down: Rate


def parse_netem(raw: Any) -> tuple[Netem | None, str]:
    if raw in (None, "none", ""):
        return None, "nonetem"
    if isinstance(raw, dict):
        if not set(raw) <= {"up", "down"} or not raw:
            raise ValueError("netem per direction takes the keys 'up' and/or 'down'")
        up, down = (_netem_words(raw.get(d, "")) for d in ("up", "down"))
    else:
        up = down = _netem_words(raw)
    label = "_".join(up) if up == down else f"up_{'_'.join(up) or 'none'}_down_{'_'.join(down) or 'none'}"
    return Netem(up, down), label or "nonetem"


def _netem_words(raw: Any) -> tuple[str, ...]:
    words = str(raw).split()
    then = words.index(THEN) if THEN in words else len(words)
    if words.count(THEN) > 1 or then == len(words) - 1:
        raise ValueError("netem: one 'then' at most, followed by the chained netem's words")
    for i, w in enumerate(words):
        chained = i > then
        if w == "delay" and not chained:
            raise ValueError("netem: give the delay as rtt (fl adds half of it each way); "
                             "use 'jitter 75ms' for delay variation, or 'then delay …' for a netem chained after it")
        if w not in (CHAINED_WORDS if chained else NETEM_WORDS | {THEN}) and not NETEM_NUMBER_RE.match(w):
            raise ValueError(f"netem: {w!r} is not a netem word or number "
                             f"(words: {', '.join(sorted(NETEM_WORDS))}; after 'then' also delay, limit)")
        if w == "jitter" and (i + 1 >= len(words) or not re.match(r"^\d+(\.\d+)?(us|ms|s)$", words[i + 1])):
            raise ValueError("netem: jitter needs a time, e.g. 'jitter 75ms'")
    return tuple(words)


def parse_schedule(raw: Any) -> tuple[tuple[Step, ...], str]:
    if not isinstance(raw, list) or not raw:
        raise ValueError("a rate schedule is a list of steps like {at: 30s, rate: 10mbit}")
    steps = []
    for item in raw:
        if not isinstance(item, dict) or set(item) != {"at", "rate"}:
            raise ValueError("each rate-schedule step is {at: TIME, rate: RATE or {up: R, down: R}}")
        at = Duration.parse(item["at"] if isinstance(item["at"], str) else f"{item['at']}s")
        rate = item["rate"]
        up, down = (Rate.parse(rate["up"]), Rate.parse(rate["down"])) if isinstance(rate, dict) \
            else (Rate.parse(rate),) * 2
        steps.append(Step(at, up, down))
    if [s.at for s in steps] != sorted({s.at for s in steps}):
        raise ValueError("rate-schedule steps must be in increasing time order")
    label = "-".join(f"{s.up.text if s.up == s.down else f'{s.up.text}_{s.down.text}'}@{s.at.text}"
                     for s in steps)
    return tuple(steps), label


def parse_ecn(raw: Any) -> tuple[tuple[str, ...], str]:
    items = raw if isinstance(raw, list) else [raw]
    out = []
    for item in items:
        actions = str(item).split("+")
        for a in actions:
            if a not in ECN_ACTIONS:
                raise ValueError(f"ECN action {a!r} is none of: "
                                 + "; ".join(f"{k} ({v})" for k, v in ECN_ACTIONS.items()))
        out.append("+".join(actions))
    return tuple(out), "-".join(out)


def parse_start(raw: Any) -> tuple[tuple[Duration, ...], str]:
    items = raw if isinstance(raw, list) else [raw]
    starts = tuple(Duration.parse(x if isinstance(x, str) else f"{x}s") for x in items)
    return starts, "start" + "-".join(s.text for s in starts)


def parse_client_qdisc(raw: Any) -> tuple[str | None, str]:
    if raw in (None, "none", ""):
        return None, "noclientq"
    text = " ".join(str(raw).split())
    check_template(text)
    if "{{" in text:
        raise ValueError("client_qdisc: expressions are not supported here")
    return text, "cli_" + default_label(text)


def parse_udp(raw: Any) -> tuple[Rate | None, str]:
    if raw in (None, "none", 0):
        return None, "noudp"
    rate = Rate.parse(raw)
    return rate, f"udp{rate.text}"


MARKING_KEYS = {"codepoint": "ECN codepoint of every datagram: " + ", ".join(CODEPOINT_WORDS),
                "dscp": "DSCP, 0-63 (optional, default 0)"}
VIDEO_KEYS = {"rate": "mean bit rate of UDP payload, e.g. 2.5mbit", "fps": "frames per second, 1-240",
              "sd": "standard deviation of frame sizes as a bit rate (optional; none: fixed size)", **MARKING_KEYS}
PROBE_KEYS = {**MARKING_KEYS, "interval": "time between probe packets, 1ms-1s (optional, default 10ms)"}


def _mapping(key: str, raw: Any, keys: dict[str, str], required: tuple[str, ...]) -> dict[str, Any]:
    """RAW as a mapping of KEYS with the REQUIRED ones, its DSCP and codepoint checked."""
    if not isinstance(raw, dict):
        raise ValueError(f"{key} must be none or a mapping with " + "; ".join(f"{k} ({v})" for k, v in keys.items()))
    if unknown := sorted(set(raw) - set(keys)):
        raise ValueError(f"{key}: unknown key {unknown[0]!r} (allowed: {', '.join(keys)})")
    if missing := [k for k in required if k not in raw]:
        raise ValueError(f"{key}: {missing[0]} missing ({keys[missing[0]]})")
    dscp = raw.get("dscp", 0)
    if isinstance(dscp, bool) or not isinstance(dscp, int) or not 0 <= dscp <= 63:
        raise ValueError(f"{key}: dscp {dscp!r} must be a whole number, 0-63")
    if raw["codepoint"] not in CODEPOINT_WORDS:
        raise ValueError(f"{key}: codepoint {raw['codepoint']!r} is none of: {', '.join(CODEPOINT_WORDS)}")
    return raw


def parse_video(raw: Any) -> tuple[VideoConfig | None, str]:
    """`none`, or a mapping of VIDEO_KEYS (rate, fps and codepoint required)."""
    if raw in (None, "none"):
        return None, "novideo"
    raw = _mapping("video", raw, VIDEO_KEYS, ("rate", "fps", "codepoint"))
    fps = raw["fps"]
    if isinstance(fps, bool) or not isinstance(fps, int) or not 1 <= fps <= 240:
        raise ValueError(f"video: fps {fps!r} must be a whole number of frames per second, 1-240")
    sd = Rate.parse(raw["sd"]).text if raw.get("sd") not in (None, 0, "0", "none") else None
    video = VideoConfig(rate=Rate.parse(raw["rate"]).text, fps=fps, sd=sd, codepoint=raw["codepoint"],
                        dscp=raw.get("dscp", 0))
    return video, video.label


def parse_probe(raw: Any) -> tuple[ProbeConfig | None, str]:
    """`none`, or a mapping of PROBE_KEYS (codepoint required)."""
    if raw in (None, "none"):
        return None, "noprobe"
    raw = _mapping("probe", raw, PROBE_KEYS, ("codepoint",))
    interval = Duration.parse(raw.get("interval", "10ms"))
    if not 0.001 <= interval.seconds <= 1:
        raise ValueError(f"probe: interval {interval.text!r} must be 1ms-1s")
    probe = ProbeConfig(codepoint=raw["codepoint"], dscp=raw.get("dscp", 0), interval=interval.text)
    return probe, probe.label


def parse_rtt_split(raw: Any) -> tuple[str, str]:
    if raw not in RTT_SPLITS:
        raise ValueError(f"rtt_split {raw!r} is none of: even (half the RTT each way), "
                         "up (all of it on the way cli → srv), down (all on the way back)")
    return raw, "rtt_even" if raw == "even" else f"delay_{raw}"


def parse_tunnel(raw: Any) -> tuple[str, str]:
    if raw not in TUNNELS:
        raise ValueError(f"tunnel {raw!r} is none of: {', '.join(TUNNELS)}")
    return raw, raw


def parse_replay_window(raw: Any) -> tuple[int, str]:
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= 4096:
        raise ValueError(f"{raw!r}: replay_window is an integer from 0 to 4096 (IPsec ESP)")
    return raw, f"replay{raw}"
