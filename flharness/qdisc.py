"""tc qdisc specs: grammar check, per-cell rendering of {{ }} expressions, labels, shaping.

A spec is the text after ``tc qdisc add dev D parent P`` (``fq_codel flows 1``).
Expressions are rendered in a Jinja2 sandbox with the cell's values, e.g.
``pfifo limit {{ packets('250ms') }}`` gives a FIFO holding 250 ms at the cell's rate.
Every rendered token is checked again, so nothing but tc words ever reaches a command.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from jinja2 import StrictUndefined, TemplateError
from jinja2.sandbox import SandboxedEnvironment

from .frames import FRAME_BYTES
from .units import Duration, Rate

KIND_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}\Z")
TOKEN_RE = re.compile(r"^[A-Za-z0-9_.:/%+-]{1,64}\Z")
_EXPR_RE = re.compile(r"\{\{(.*?)\}\}", re.S)
_EXPR_CHARS_RE = re.compile(r"^[A-Za-z0-9_.'\"(), *+/<>=!-]*\Z")

#: Qdiscs that shape by themselves (given a rate/bandwidth) and so sit at the root.
SELF_SHAPING_KINDS = {"tbf", "htb", "hfsc", "cbs", "taprio"}
#: Qdiscs that shape when given `bandwidth` (RED's, choke's and gred's `bandwidth` only
#: sizes their idle-time estimate: they still need a shaper above them).
BANDWIDTH_SHAPERS = {"cake"}

_env = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False)


def check_template(text: str) -> None:
    """Reject anything but tc words outside {{ }} and plain expressions inside."""
    check_tokens(check_expressions(text, "qdisc").split(), text)


def check_expressions(text: str, what: str) -> str:
    """Check the {{ }} expressions of TEXT (plain expressions only, compilable); return
    the text with each replaced by 0, for checking what is around them."""
    if "{%" in text or "{#" in text:
        raise ValueError(f"{what} {text!r}: only {{{{ expression }}}} templates are allowed")
    for expr in _EXPR_RE.findall(text):
        if not _EXPR_CHARS_RE.match(expr):
            raise ValueError(f"{what} {text!r}: expression {{{{{expr}}}}} has characters "
                             "outside names, numbers, quotes and + - * / ( ) ,")
    literal = _EXPR_RE.sub(" 0 ", text)
    if "{" in literal or "}" in literal:
        raise ValueError(f"{what} {text!r}: unbalanced {{{{ }}}}")
    try:
        _env.from_string(text)
    except TemplateError as e:
        raise ValueError(f"{what} {text!r}: {e}") from None
    return literal


def render_text(template: str, names: dict[str, Any], what: str) -> str:
    """Render a checked template in the sandbox; errors become one-line ValueErrors."""
    try:
        return _env.from_string(template).render(names)
    except (TemplateError, ValueError, TypeError, ZeroDivisionError) as e:
        raise ValueError(f"{what} {template!r}: {e}") from None


def check_tokens(tokens: list[str], text: str) -> None:
    for tok in tokens:
        if not TOKEN_RE.match(tok):
            raise ValueError(f"qdisc {text!r}: {tok!r} is not a tc argument "
                             "(letters, digits and _ . : / % + - only)")
    if not tokens or not KIND_RE.match(tokens[0]):
        raise ValueError(f"qdisc {text!r} must start with a qdisc kind such as fq_codel or pfifo")


@dataclass(frozen=True)
class QdiscContext:
    """What a qdisc expression may use: the direction's rate and name ('up' or 'down'),
    the cell's RTT and its variables."""

    rate: Rate
    rtt: Duration
    vars: dict[str, Any]
    direction: str = "up"

    def names(self) -> dict[str, Any]:
        def seconds(d: object) -> float:
            return Duration.parse(d).seconds

        def packets(d: object) -> int:
            return max(1, round(self.rate.bps * seconds(d) / 8 / FRAME_BYTES))

        def bytes_(d: object) -> int:
            return max(FRAME_BYTES, round(self.rate.bps * seconds(d) / 8))

        def bdp_packets(factor: float = 1) -> int:
            return max(1, round(self.rate.bps * self.rtt.seconds * factor / 8 / FRAME_BYTES))

        return {**self.vars, "direction": self.direction, "rate": self.rate.text, "rate_bps": int(self.rate.bps),
                "rtt_ms": self.rtt.ms, "packets": packets, "bytes": bytes_,
                "bdp_packets": bdp_packets}


def render(template: str, ctx: QdiscContext) -> list[str]:
    """The qdisc spec for one cell and direction, as checked tc tokens."""
    text = render_text(template, ctx.names(), "qdisc")
    tokens = text.split()
    check_tokens(tokens, text)
    return tokens


def placeholder_text(template: str) -> str:
    """The template with each expression replaced by a word: a label before rendering."""
    return _EXPR_RE.sub(lambda m: " " + re.sub(r"\W+", "_", m.group(1)).strip("_") + " ", template)


def default_label(text: str) -> str:
    """Short readable label: the kind plus argument values ('pfifo limit 1000' → 'pfifo_1000')."""
    tokens = text.split()
    out = [tokens[0]]
    for i, tok in enumerate(tokens[1:], start=1):
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        is_keyword_with_value = tok.isalpha() and nxt[:1].isdigit()
        if not is_keyword_with_value:
            out.append(tok)
    return "_".join(out)


def is_self_shaping(tokens: list[str], shaper: str | None) -> bool:
    """True if the qdisc goes at the root and shapes itself instead of under an htb class."""
    if shaper is not None:
        return shaper == "self"
    return tokens[0] in SELF_SHAPING_KINDS or (tokens[0] in BANDWIDTH_SHAPERS and "bandwidth" in tokens[1:])


def kernel_module(kind: str) -> str:
    """Kernel module name for messages ('fq_codel' → 'sch_fq_codel')."""
    return "sch_fifo" if kind in ("pfifo", "bfifo", "pfifo_head_drop") else f"sch_{kind}"
