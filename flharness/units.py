"""tc-style rate and time words, parsed strictly into numbers with a canonical text form."""
from __future__ import annotations

import re
from dataclasses import dataclass

# tc(8): bit rates; "bps" suffixes are *bytes* per second in tc's vocabulary.
_RATE_UNITS = {
    "bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12,
    "bps": 8, "kbps": 8 * 10**3, "mbps": 8 * 10**6, "gbps": 8 * 10**9, "tbps": 8 * 10**12,
}
_RATE_RE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps|tbps)$", re.I)
_TIME_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
_TIME_RE = re.compile(r"^(\d+(?:\.\d+)?)(us|ms|s)\Z")


@dataclass(frozen=True, order=True)
class Rate:
    """A link rate; ``text`` is what tc gets (e.g. ``50mbit``), ``bps`` is bits per second."""

    bps: float
    text: str

    @classmethod
    def parse(cls, value: object) -> Rate:
        text = str(value).strip()
        m = _RATE_RE.match(text)
        if not m:
            raise ValueError(f"{value!r} is not a tc rate (e.g. 10mbit, 1gbit, 500kbit)")
        bps = float(m.group(1)) * _RATE_UNITS[m.group(2).lower()]
        if bps <= 0:
            raise ValueError(f"{value!r}: rate must be positive")
        return cls(bps, text.lower())

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, order=True)
class Duration:
    """A time span; ``text`` is what tc/netem get (e.g. ``20ms``), ``seconds`` the value."""

    seconds: float
    text: str

    @classmethod
    def parse(cls, value: object) -> Duration:
        text = str(value).strip()
        if text.startswith("-"):
            raise ValueError(f"{value!r}: a duration cannot be negative")
        m = _TIME_RE.match(text)
        if not m:
            raise ValueError(f"{value!r} is not a duration with unit (e.g. 20ms, 500us, 2s)")
        return cls(float(m.group(1)) * _TIME_UNITS[m.group(2)], text)

    @classmethod
    def of_seconds(cls, seconds: float) -> Duration:
        return cls(seconds, format_seconds(seconds))

    @property
    def ms(self) -> float:
        return self.seconds * 1e3

    def __str__(self) -> str:
        return self.text


def format_seconds(seconds: float) -> str:
    """Shortest exact tc time word: 0.02 → '20ms', 0.0005 → '500us', 2 → '2s'."""
    if seconds == 0:
        return "0ms"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        value = seconds / scale
        if abs(value - round(value)) < 1e-9 and round(value) != 0:
            return f"{round(value)}{unit}"
    return f"{seconds * 1e6:g}us"


def human_duration(seconds: float) -> str:
    """Wall-clock style: 42s, 3m05s, 2h07m."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def human_size(n: float) -> str:
    """Bytes as people read them: 950 B, 12 kB, 3.4 MB, 1.2 GB."""
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit in ("B", "kB") else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def significant(value: float, digits: int = 3) -> str:
    """VALUE to DIGITS significant digits as a table shows it, never in exponent form: 1.55,
    231, and 1308 (not 1.31e+03) where the whole number has more digits."""
    text = f"{value:.{digits}g}"
    return f"{value:.0f}" if "e+" in text else text
