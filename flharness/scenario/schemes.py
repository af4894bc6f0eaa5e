"""Congestion controllers in user space: a scheme is a pair of programs, a sender that runs
on the client and a receiver that runs on the server, declared in a scheme file
(`schemes/*.yml` shipped with fl, or a file a scenario names under `schemes:`). A scheme's
name stands wherever a kernel congestion control can (`cc: quic_cubic`, `cc:
ledbat-vs-cubic`); its flows are measured from the captures, as every flow is.

    implementation: ngtcp2          # what runs, and its version: the tables' rows say both
    version: 0.12.1
    source: Debian's ngtcp2-server and ngtcp2-client (bookworm)
    transport: udp                  # how the captures find its packets (UDP: TCP is not measured yet)
    listens: sender                 # which side listens first; the other connects to it
    needs: [gtlsserver, gtlsclient] # programs on the hosts' PATH (fl check, each run's probe)
    setup: {sender: [[openssl, req, …]]}   # run on that side before it starts, in order
    sender: [gtlsserver, -q, "--cc={cc}", "*", "{port}", "{dir}/key.pem", "{dir}/cert.pem"]
    receiver: [gtlsclient, -q, "{peer}", "{port}", "https://{peer}:{port}/{file_name}"]
    stdin: {sender: "{file}"}       # a side's standard input: a file, or `hold` (open, empty:
                                    # a program that quits at the end of its input waits)
    stdout: {receiver: discard}     # a side's standard output: its log (default) or `discard`
    env: {sender: {MIN_RTT: "1000000"}}   # a side's environment variables
    stop: TERM                      # the signal that ends either side
    schemes:                        # the names it gives, each with its title and words
      quic_cubic: {title: QUIC Cubic, vars: {cc: cubic}}

A command is a list of words; `{name}` in a word is one of PLACEHOLDERS or the scheme's
`vars`, filled in per cell and side, and every word is quoted for the host's shell: no
value fl fills in can run as a command. fl runs only the scheme files of `schemes/` and
those a scenario names (a path relative to it), never one from a results folder.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import ScenarioError
from .pantheon import PantheonFile, wrapper
from .yaml_file import read_yaml

#: The shipped scheme files.
SCHEME_DIR = Path(__file__).resolve().parents[2] / "schemes"
#: What fl fills in per cell and side.
PLACEHOLDERS = {
    "peer": "the other side's address (the sender's: the server's; the receiver's: the client's)",
    "port": "the UDP or TCP port fl gives the flow (the listening side listens on it)",
    "length": "the test's length, whole seconds",
    "dir": "the side's own folder for the scheme in the cell (its files, keys and logs)",
    "file": "a file of {bytes} bytes on the sender, {dir}/{file_name}, for the scheme to send",
    "file_name": "that file's name in {dir}",
    "bytes": "its size: twice what the link carries in the test, at least 1 MB",
}
SIDES: tuple[Literal["sender", "receiver"], ...] = ("sender", "receiver")
#: A side's standard input that stays open and empty (a program that quits at the end of
#: its input, as ucat does, waits).
HOLD = "hold"
Side = Literal["sender", "receiver"]
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}\Z")  # as a congestion control's (values.CC_RE)
_PROGRAM_RE = re.compile(r"^(/[\w.+-]+)+\Z|^[\w.+-]+\Z")
_WORD_RE = re.compile(r"^[^\x00-\x1f\x7f]{1,512}\Z")
_FIELD_RE = re.compile(r"\{([^{}]*)\}")
_VAR_RE = re.compile(r"^[a-z_][a-z0-9_]*\Z")
_VALUE_RE = re.compile(r"^[\w.,:=+/-]{1,100}\Z")
_ENV_RE = re.compile(r"^[A-Z_][A-Z0-9_]{0,63}\Z")


def _program(word: str) -> str:
    if not _PROGRAM_RE.match(word):
        raise ValueError(f"{word!r}: a program is a name on PATH or an absolute path")
    return word


def _command(argv: list[str], known: set[str]) -> list[str]:
    """A command: a program and its words, each free of control characters, whose
    placeholders are KNOWN."""
    if not argv:
        raise ValueError("a command is a list of words, the program first")
    _program(argv[0])
    for word in argv:
        _word(word, known)
    return argv


def _word(word: str, known: set[str]) -> str:
    if not _WORD_RE.match(word):
        raise ValueError(f"{word[:40]!r}: a word of 1 to 512 characters, no control characters")
    for name in _FIELD_RE.findall(word):
        if name not in known:
            raise ValueError(f"{{{name}}} in {word!r} is none of {', '.join(sorted(known))}")
    return word


class Named(BaseModel):
    """One scheme of a file: its title and the words it fills into the file's commands."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    title: str = Field(min_length=1, max_length=60, pattern=r"^[\w .,:()/+-]+$")
    vars: dict[str, str] = {}

    @field_validator("vars")
    @classmethod
    def _values(cls, v: dict[str, str]) -> dict[str, str]:
        for name, value in v.items():
            if not _VAR_RE.match(name) or name in PLACEHOLDERS:
                raise ValueError(f"{name!r}: a lower-case name, none of fl's placeholders")
            if not _VALUE_RE.match(str(value)):
                raise ValueError(f"{name}: {value!r} is one word of letters, digits and _ . , : = + / -")
        return v


class SchemeFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    implementation: str = Field(min_length=1, max_length=40, pattern=r"^[\w .+/-]+$")
    version: str = Field(pattern=r"^[\w.+~:-]{1,40}$")
    source: str = Field(min_length=1, max_length=300)
    transport: Literal["udp"]  # the captures measure a scheme's datagrams (a TCP scheme's flows: not yet)
    listens: Side
    needs: list[str] = []
    setup: dict[Side, list[list[str]]] = {}
    sender: list[str]
    receiver: list[str]
    stdin: dict[Side, str] = {}
    stdout: dict[Side, Literal["log", "discard"]] = {}
    env: dict[Side, dict[str, str]] = {}
    stop: Literal["TERM", "INT", "KILL"] = "TERM"
    schemes: dict[str, Named] = Field(min_length=1)

    @field_validator("needs")
    @classmethod
    def _needs(cls, v: list[str]) -> list[str]:
        return [_program(p) for p in v]

    @field_validator("schemes")
    @classmethod
    def _names(cls, v: dict[str, Named]) -> dict[str, Named]:
        for name in v:
            if not _NAME_RE.match(name):
                raise ValueError(f"{name!r}: a scheme's name is a congestion control's: lower-case letters, "
                                 "digits and _, a letter first, at most 32")
        return v

    @model_validator(mode="after")
    def _commands(self) -> SchemeFile:
        for name, scheme in self.schemes.items():
            known = set(PLACEHOLDERS) | set(scheme.vars)
            for side in SIDES:
                try:
                    _command(getattr(self, side), known)
                    for argv in self.setup.get(side, []):
                        _command(argv, known)
                    if self.stdin.get(side, HOLD) != HOLD:
                        _word(self.stdin[side], known)
                    for var, value in self.env.get(side, {}).items():
                        if not _ENV_RE.match(var):
                            raise ValueError(f"env {var!r}: an environment variable's name (A-Z, 0-9, _)")
                        _word(value, known)
                except ValueError as e:
                    raise ValueError(f"{side} (scheme {name}): {e}") from None
        return self


@dataclass(frozen=True)
class Scheme:
    """One scheme as a cell runs it: its words filled into its file's commands."""

    name: str
    title: str
    implementation: str
    version: str
    transport: Literal["udp"]
    listens: Side
    needs: tuple[str, ...]
    setup: dict[Side, tuple[tuple[str, ...], ...]]
    commands: dict[Side, tuple[str, ...]]
    stdin: dict[Side, str]
    stdout: dict[Side, str]
    env: dict[Side, dict[str, str]]
    stop: str
    file: str  # the scheme file, as fl found it

    @property
    def label(self) -> str:
        """What tables call it: "QUIC Cubic (ngtcp2 0.12.1)"."""
        return f"{self.title} ({self.implementation} {self.version})"


def _fill_vars(argv: list[str], words: dict[str, str]) -> tuple[str, ...]:
    """ARGV with the scheme's own words in place; fl's placeholders stay for the cell."""
    return tuple(_FIELD_RE.sub(lambda m: words.get(m.group(1), m.group(0)), w) for w in argv)


def read_scheme_file(path: Path) -> dict[str, Scheme]:
    """The schemes of one file, validated; a problem names the file and key. A file that
    names a Pantheon checkout (`pantheon:`) gives its schemes (scenario/pantheon.py)."""
    data = read_yaml(path, "a scheme file is a mapping (implementation, version, transport, listens, sender, "
                           "receiver, schemes …; or pantheon, schemes)")
    try:
        if "pantheon" in data:
            return _pantheon_schemes(PantheonFile.model_validate(data), path)
        f = SchemeFile.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        raise ScenarioError(path, ".".join(map(str, err["loc"])), err["msg"].removeprefix("Value error, ")) from None
    return {name: Scheme(name, n.title, f.implementation, f.version, f.transport, f.listens, tuple(f.needs),
                         {side: tuple(_fill_vars(a, n.vars) for a in f.setup.get(side, [])) for side in SIDES},
                         {side: _fill_vars(getattr(f, side), n.vars) for side in SIDES},
                         {side: _fill_vars([v], n.vars)[0] for side, v in f.stdin.items()}, dict(f.stdout),
                         {side: dict(zip(env, _fill_vars(list(env.values()), n.vars))) for side, env in f.env.items()},
                         f.stop, str(path))
            for name, n in f.schemes.items()}


def _pantheon_schemes(f: PantheonFile, path: Path) -> dict[str, Scheme]:
    """Each scheme a Pantheon file names, as its wrapper runs it from the checkout."""
    third_party = f"{f.checkout(path)}/third_party"
    version = f.version_text(path)

    def words(argv: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(w.replace("{T}", third_party) for w in argv)

    out = {}
    for i, (name, theirs) in enumerate(f.named().items()):
        try:
            w = wrapper(theirs)
            if not _NAME_RE.match(name):
                raise ValueError(f"{name!r}: not a congestion control's name")
            commands = {side: words(getattr(w, side)) for side in SIDES}
            for side in SIDES:
                _command(list(commands[side]), set(PLACEHOLDERS))
        except ValueError as e:
            raise ScenarioError(path, f"schemes[{i}]", str(e)) from None
        env = {side: {k: v.replace("{T}", third_party) for k, v in e.items()} for side, e in w.env.items()}
        out[name] = Scheme(name, w.title, "Pantheon", version, "udp", w.first,
                           tuple(dict.fromkeys(c[0] for c in commands.values())), {"sender": (), "receiver": ()},
                           commands, dict(w.stdin), dict(w.stdout), env, "TERM", str(path))
    return out


def load_schemes(named: Sequence[Path] = (), base: Path = SCHEME_DIR) -> dict[str, Scheme]:
    """Every shipped scheme, and those of the files NAMED (a scenario's `schemes:`); a name
    two files give is an error naming the second."""
    out: dict[str, Scheme] = {}
    for path in [*sorted(base.glob("*.yml")), *named]:
        for name, scheme in read_scheme_file(path).items():
            if name in out and out[name].file != scheme.file:
                raise ScenarioError(path, f"schemes.{name}", f"{out[name].file} gives this name already")
            out[name] = scheme
    return out
