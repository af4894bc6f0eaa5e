"""Typed axis values of a scenario and their parsers.

Every axis value can be written plainly (``50mbit``) or as a mapping
``{value: 50mbit, label: fast, vars: {pfifo_limit: 1000}}``; qdisc values also take
``shaper: htb|self`` and ``variant_of: NAME``: one of several settings of the qdisc that
claims and references call NAME (dualpi2's step rules: the 2020 one and mainline's),
which their selectors of NAME take, each judged as a condition of its own. Parsers raise ValueError with a message fit for one error line.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import FlError
from ..flent_tests import FLENT_TESTS, FlentTest
from ..hosts import HOSTS
from ..qdisc import check_expressions, check_template, default_label, placeholder_text
from ..units import Duration, Rate

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*\Z")
CC_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}\Z")
VAR_RE = re.compile(r"^[a-z_][a-z0-9_]*\Z")
SYSCTL_KEY_RE = re.compile(r"^net(\.[A-Za-z0-9_-]+)+\Z")
SYSCTL_VALUE_RE = re.compile(r"^[A-Za-z0-9_.:, -]{1,200}\Z")
SCALAR_TOKEN_RE = re.compile(r"^[A-Za-z0-9_.:/%+-]+\Z")
#: module_params: a congestion control's module (tcp_*), one of its parameters, a value.
MODULE_RE = re.compile(r"^tcp_[a-z0-9_]{1,40}\Z")
MODULE_PARAM_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}\Z")
MODULE_VALUE_RE = re.compile(r"^[A-Za-z0-9_.,:-]{1,64}\Z")


def check_name(text: object, what: str = "name") -> str:
    """A name used in file names: letters, digits, _ . + -; no '..', no '/'."""
    s = str(text)
    if not NAME_RE.match(s) or ".." in s or len(s) > 100:
        raise ValueError(f"{what} {s!r} must be letters, digits, '_', '.', '+', '-' "
                         "(no '/', no '..', at most 100 characters)")
    return s


def valid_name(text: object, what: str, prefix: str = "") -> str:
    """check_name for a value given on the command line: a refusal is an FlError (one line,
    PREFIX first: the option)."""
    try:
        return check_name(text, what)
    except ValueError as e:
        raise FlError(f"{prefix}{e}") from None


def slug(label: str) -> str:
    """File-name form of a display label: 'fq_codel(1q,1ms/20ms)' → 'fq_codel_1q_1ms_20ms'."""
    s = re.sub(r"[^A-Za-z0-9_.+-]+", "_", label).strip("_.")
    s = re.sub(r"\.\.+", ".", s)
    return s or "x"


@dataclass(frozen=True)
class LinkRate:
    up: Rate
    down: Rate

    @property
    def label(self) -> str:
        return self.up.text if self.up == self.down else f"{self.up.text}-{self.down.text}"


@dataclass(frozen=True)
class QdiscSpec:
    """A tc qdisc with arguments; may contain {{ }} expressions resolved per cell."""

    template: str
    shaper: str | None = None  # 'htb', 'self', or None = decide from the kind


@dataclass(frozen=True)
class Point:
    """One value of one axis, with where it was written (for error messages)."""

    value: Any
    label: str
    raw: Any
    key: str = ""
    vars: dict[str, Any] = field(default_factory=dict)
    explicit_label: bool = False
    variant_of: str | None = None  # a qdisc setting that selectors of this name take too

    @property
    def slug(self) -> str:
        return slug(self.label)

    def matches(self, wanted: object) -> bool:
        w = str(wanted)
        return w in (self.label, self.slug, str(self.raw)) or w == self.variant_of


# ---- inner value parsers: raw YAML value -> (typed value, default label) ----

def parse_rate(raw: Any) -> tuple[LinkRate, str]:
    if isinstance(raw, dict):
        unknown = set(raw) - {"up", "down"}
        if unknown or set(raw) != {"up", "down"}:
            raise ValueError("an asymmetric rate needs exactly the keys 'up' and 'down'")
        r = LinkRate(Rate.parse(raw["up"]), Rate.parse(raw["down"]))
    else:
        rate = Rate.parse(raw)
        r = LinkRate(rate, rate)
    return r, r.label


def parse_rtt(raw: Any) -> tuple[tuple[Duration, ...], str]:
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        raise ValueError("an RTT list needs one value per flow")
    rtts = tuple(Duration.parse(x) for x in items)
    return rtts, "-".join(r.text for r in rtts)


def parse_cc(raw: Any) -> tuple[tuple[str, ...], str]:
    if isinstance(raw, str):
        items = raw.split("-vs-")
    elif isinstance(raw, list) and raw:
        items = raw
    else:
        raise ValueError("a congestion control is a name (cubic), a list per flow "
                         "([cubic, reno]) or 'cubic-vs-reno'")
    for cc in items:
        if not isinstance(cc, str) or not CC_RE.match(cc):
            raise ValueError(f"{cc!r} is not a congestion control name (e.g. cubic, bbr, reno)")
    return tuple(items), "-vs-".join(items)


def parse_receiver_cc(raw: Any) -> tuple[str | None, str]:
    """The receiving socket's congestion control: 'same' (the sender's, as netperf sets
    both ends) or a name. It decides what the receiver negotiates: a receiver running
    prague accepts AccECN whatever its tcp_ecn sysctl."""
    if raw in (None, "same"):
        return None, "rcv_same"
    if not isinstance(raw, str) or not CC_RE.match(raw):
        raise ValueError(f"{raw!r} is not a congestion control name (e.g. cubic) or 'same'")
    return raw, f"rcv_{raw}"


def parse_qdisc(raw: Any) -> tuple[QdiscSpec, str]:
    if not isinstance(raw, str) or not raw.strip():
        raise ValueError("a qdisc is a tc qdisc spec string, e.g. 'fq_codel' or 'pfifo limit 1000'")
    text = " ".join(raw.split())
    check_template(text)
    return QdiscSpec(text), default_label(placeholder_text(text))


def parse_test(raw: Any) -> tuple[FlentTest, str]:
    test = FLENT_TESTS.get(str(raw))
    if test is None:
        raise ValueError(f"unknown Flent test {raw!r} (fl drives: {', '.join(sorted(FLENT_TESTS))})")
    return test, test.name


def parse_length(raw: Any) -> tuple[int, str]:
    seconds = parse_seconds(raw)
    if seconds != int(seconds) or not 1 <= seconds <= 86400:
        raise ValueError(f"{raw!r}: length is whole seconds from 1 to 86400 (Flent's -l)")
    return int(seconds), f"{int(seconds)}s"


def parse_seconds(raw: Any) -> float:
    if isinstance(raw, bool):
        raise ValueError(f"{raw!r} is not a number of seconds")
    if isinstance(raw, (int, float)):
        if raw < 0:
            raise ValueError(f"{raw!r}: cannot be negative")
        return float(raw)
    return Duration.parse(raw).seconds


def parse_flows(raw: Any) -> tuple[int, str]:
    if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= 256:
        raise ValueError(f"{raw!r}: flows must be an integer from 1 to 256")
    return raw, f"{raw}flows"


def parse_sysctls(raw: Any) -> tuple[dict[str, dict[str, str]], str]:
    if not isinstance(raw, dict):
        raise ValueError("sysctls map a host (cli, mid, srv) to {key: value}")
    out: dict[str, dict[str, str]] = {}
    for host, settings in raw.items():
        if host not in HOSTS:
            raise ValueError(f"unknown host {host!r} (hosts: {', '.join(HOSTS)})")
        if not isinstance(settings, dict):
            raise ValueError(f"{host}: expected a mapping of sysctl keys to values")
        out[host] = {check_sysctl_key(k): check_sysctl_value(k, v) for k, v in settings.items()}
    pairs = dict.fromkeys(f"{k.rsplit('.', 1)[-1]}{v}" for h in sorted(out) for k, v in sorted(out[h].items()))
    label = "_".join(pairs)  # a setting on several hosts is named once
    return out, slug(label) if label else "default-sysctls"


def parse_module_params(raw: Any) -> tuple[dict[str, dict[str, str]] | None, str]:
    """{tcp_prague: {pacing_ca_pct: 120}}: parameters of congestion-control modules, set
    on the endpoints for the cell (/sys/module/MODULE/parameters/), the others as they were."""
    if raw in (None, "none", {}):
        return None, "default-params"
    if not isinstance(raw, dict):
        raise ValueError("module_params map a congestion control's module (e.g. tcp_prague) to {parameter: value}")
    out: dict[str, dict[str, str]] = {}
    for module, params in raw.items():
        if not isinstance(module, str) or not MODULE_RE.match(module):
            raise ValueError(f"module {module!r} must be a congestion control's module, tcp_NAME (e.g. tcp_prague)")
        if not isinstance(params, dict) or not params:
            raise ValueError(f"{module}: expected a mapping of its parameters to values, e.g. {{pacing_ca_pct: 120}}")
        out[module] = {}
        for name, value in params.items():
            if not isinstance(name, str) or not MODULE_PARAM_RE.match(name):
                raise ValueError(f"{module}: parameter {name!r} must be lower-case letters, digits and _")
            text = str(int(value)) if isinstance(value, bool) else str(value)
            if not MODULE_VALUE_RE.match(text):
                raise ValueError(f"{module}.{name}: value {value!r} must be a number or a word (letters, digits, _ . , : -)")
            out[module][name] = text
    label = "_".join(f"{n}{v}" for m in sorted(out) for n, v in sorted(out[m].items()))
    return out, slug(label)


def check_sysctl_key(key: Any) -> str:
    if not isinstance(key, str) or not SYSCTL_KEY_RE.match(key):
        raise ValueError(f"sysctl key {key!r} must be a net.* key (e.g. net.ipv4.tcp_ecn): "
                         "only per-namespace network sysctls are set")
    return key


def check_sysctl_value(key: str, value: Any) -> str:
    """A sysctl value, possibly with {{ }} expressions of the cell (e.g. of its `cc`
    list: "{{ 3 if 'prague' in cc else 1 }}"), rendered and checked again per cell."""
    text = str(value)
    literal = check_expressions(text, f"sysctl {key}") if "{{" in text else text
    if isinstance(value, bool) or not SYSCTL_VALUE_RE.match(literal.strip() or "x"):
        raise ValueError(f"sysctl {key}: value {value!r} has characters other than "
                         "letters, digits, spaces and _ . : , -")
    return text


def check_vars(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ValueError("vars must be a mapping of names to numbers or words")
    for k, v in raw.items():
        if not isinstance(k, str) or not VAR_RE.match(k):
            raise ValueError(f"variable name {k!r} must be lower-case letters, digits and _")
        if isinstance(v, bool) or not (isinstance(v, (int, float)) or
                                       (isinstance(v, str) and SCALAR_TOKEN_RE.match(v))):
            raise ValueError(f"variable {k}: {v!r} must be a number or a word without spaces or shell characters")
    return dict(raw)


Parser = Callable[[Any], tuple[Any, str]]

def _axis_parsers() -> dict[str, Parser]:
    from . import features as f
    return {
        "test": parse_test, "rate": parse_rate, "rtt": parse_rtt, "qdisc": parse_qdisc,
        "cc": parse_cc, "receiver_cc": parse_receiver_cc, "length": parse_length, "flows": parse_flows, "sysctls": parse_sysctls,
        "module_params": parse_module_params,
        "start": f.parse_start, "ecn": f.parse_ecn, "rtt_split": f.parse_rtt_split, "netem": f.parse_netem,
        "rate_schedule": f.parse_schedule, "client_qdisc": f.parse_client_qdisc, "udp": f.parse_udp,
        "video": f.parse_video, "probe": f.parse_probe,
        "tunnel": f.parse_tunnel, "replay_window": f.parse_replay_window,
    }


#: Every axis a scenario can set or sweep, with its parser: the one list of axes.
AXIS_PARSERS: dict[str, Parser] = _axis_parsers()


def parse_point(axis: str, raw: Any, key: str) -> Point:
    """Parse one axis value, plain or in the ``{value, label, vars[, shaper]}`` form. A
    value of a shape no parser expects (a list where a word goes, a mapping, a nesting
    deeper than any) is a one-line error too, never the parser's own exception."""
    try:
        return _parse_point(axis, raw, key)
    except (TypeError, AttributeError, KeyError, IndexError, OverflowError, RecursionError):
        shown = repr(raw)
        raise ValueError(f"{shown[:60]}{'…' if len(shown) > 60 else ''} is not a {axis} value") from None


def _parse_point(axis: str, raw: Any, key: str) -> Point:
    parser = AXIS_PARSERS[axis]
    if isinstance(raw, dict) and "value" in raw:
        allowed = {"value", "label", "vars"} | ({"shaper", "variant_of"} if axis == "qdisc" else set())
        unknown = sorted(set(raw) - allowed)
        if unknown:
            raise ValueError(f"unknown key {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})")
        value, label = parser(raw["value"])
        if "shaper" in raw:
            if raw["shaper"] not in ("htb", "self"):
                raise ValueError(f"shaper {raw['shaper']!r} must be 'htb' (an htb class shapes, "
                                 "the qdisc is its child) or 'self' (the qdisc shapes itself)")
            value = QdiscSpec(value.template, raw["shaper"])
        explicit = "label" in raw
        if explicit:
            label = check_label(raw["label"])
        variant_of = check_name(raw["variant_of"], "variant_of") if "variant_of" in raw else None
        if variant_of is not None and not explicit:
            raise ValueError("variant_of: give the variant a label of its own too (label:), its cells' names carry it")
        return Point(value, label, raw["value"], key, check_vars(raw.get("vars", {})), explicit, variant_of)
    return Point(*parser(raw), raw, key)


def check_label(raw: Any) -> str:
    s = str(raw)
    if not re.match(r"^[\w.,:()/+= -]{1,64}$", s) or ".." in s:
        raise ValueError(f"label {s!r} must be 1–64 letters, digits, spaces or _ . , : ( ) / + = -")
    return s
