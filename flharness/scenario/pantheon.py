"""Pantheon's schemes from a user's built checkout (StanfordSNR/pantheon), as fl's schemes
(scenario/schemes.py). fl speaks its wrappers' protocol itself, in Python 3 (they are Python
2, which Debian no longer has): a scheme's wrapper says which side runs first (run_first);
that side starts with the port alone (`receiver PORT`, `sender PORT`), the other with the
first one's address and the port (Pantheon's test.py: 3 s later; fl: with the flows, after
Flent's lead-in), and both process groups are stopped at the end of the test. The commands
are those the wrappers run (src/wrappers/NAME.py, Pantheon 23e738c), pointing into the
checkout's third_party/ ({T} below); fl needs none of Pantheon's tunnel: its captures
measure the flows. A scheme file names the checkout, as the hosts see it:

    pantheon: /home/me/pantheon      # built: Pantheon's own setup (src/experiments/setup.py --setup)
    version: 23e738c                 # optional: the checkout's git HEAD where fl can read it
    schemes: [copa, vivace]          # Pantheon's names, or {pantheon_ledbat: ledbat}: a name of fl's
                                     # own for one (fl ships a ledbat of its own)

Each runs in its own folder of the cell ({dir}), where Pantheon's wrappers ran in its tmp/.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

#: The Pantheon release the commands come from.
PANTHEON_AT = "23e738c"
Side = Literal["sender", "receiver"]  # as scenario/schemes.py's


@dataclass(frozen=True)
class Wrapper:
    """What one of Pantheon's wrappers runs: its title, the side that runs first, each side's
    command ({T}: the checkout's third_party/), environment, input and output."""

    title: str
    first: Side
    receiver: tuple[str, ...]
    sender: tuple[str, ...]
    env: dict[Side, dict[str, str]] = field(default_factory=dict)
    stdin: dict[Side, str] = field(default_factory=dict)
    stdout: dict[Side, str] = field(default_factory=dict)


_GENERIC_CC = ("{T}/genericCC/sender", "serverip={peer}", "serverport={port}", "offduration=1", "onduration=1000000",
               "traffic_params=deterministic,num_cycles=1")
WRAPPERS: dict[str, Wrapper] = {
    "copa": Wrapper("Copa", "receiver", ("{T}/genericCC/receiver", "{port}"),
                    (*_GENERIC_CC, "cctype=markovian", "delta_conf=do_ss:auto:0.1"),
                    env={"sender": {"MIN_RTT": "1000000"}}, stdout={"sender": "discard"}),
    "taova": Wrapper("TaoVA-100x", "receiver", ("{T}/genericCC/receiver", "{port}"),
                     (*_GENERIC_CC[:3], "if={T}/genericCC/RemyCC-2014-100x.dna", *_GENERIC_CC[3:]),
                     env={"sender": {"MIN_RTT": "1000000"}}),
    "pcc": Wrapper("PCC", "receiver", ("{T}/pcc/receiver/app/appserver", "{port}"),
                   ("{T}/pcc/sender/app/appclient", "{peer}", "{port}"),
                   env={"receiver": {"LD_LIBRARY_PATH": "{T}/pcc/receiver/src"},
                        "sender": {"LD_LIBRARY_PATH": "{T}/pcc/sender/src"}}),
    "pcc_experimental": Wrapper("PCC-Experimental", "receiver",
                                ("{T}/pcc-experimental/src/app/pccserver", "recv", "{port}"),
                                ("{T}/pcc-experimental/src/app/pccclient", "send", "{peer}", "{port}"),
                                env={s: {"LD_LIBRARY_PATH": "{T}/pcc-experimental/src/core"} for s in ("receiver", "sender")}),
    "vivace": Wrapper("PCC-Vivace", "receiver", ("{T}/vivace/receiver/vivace_receiver", "{port}"),
                      ("{T}/vivace/sender/vivace_sender", "{peer}", "{port}"),
                      env={"receiver": {"LD_LIBRARY_PATH": "{T}/vivace/receiver"},
                           "sender": {"LD_LIBRARY_PATH": "{T}/vivace/sender"}}),
    "sprout": Wrapper("Sprout", "receiver", ("{T}/sprout/src/examples/sproutbt2", "{port}"),
                      ("{T}/sprout/src/examples/sproutbt2", "{peer}", "{port}"),
                      env={s: {"SPROUT_MODEL_IN": "{T}/sprout/src/examples/sprout.model"} for s in ("receiver", "sender")}),
    "verus": Wrapper("Verus", "sender", ("{T}/verus/src/verus_client", "{peer}", "-p", "{port}"),
                     ("{T}/verus/src/verus_server", "-name", "{dir}", "-p", "{port}", "-t", "75")),
    "indigo": Wrapper("Indigo", "sender", ("{T}/indigo/env/run_receiver.py", "{peer}", "{port}"),
                      ("{T}/indigo/dagger/run_sender.py", "{port}")),
    "ledbat": Wrapper("LEDBAT", "receiver", ("{T}/libutp/ucat-static", "-l", "-p", "{port}"),
                      ("{T}/libutp/ucat-static", "{peer}", "{port}"),
                      stdin={"receiver": "hold", "sender": "{file}"}, stdout={"receiver": "discard"}),
    "fillp": Wrapper("FillP", "receiver", ("{T}/fillp/server/server", "-s", "0.0.0.0", "-p", "{port}", "-r", "testcase001"),
                     ("{T}/fillp/client/client", "-c", "{peer}", "-p", "{port}", "-r", "testcase001"),
                     env={"receiver": {"LD_LIBRARY_PATH": "{T}/fillp/server"},
                          "sender": {"LD_LIBRARY_PATH": "{T}/fillp/client"}}),
    "fillp_sheep": Wrapper("FillP-Sheep", "receiver",
                           ("{T}/fillp-sheep/server/server", "-s", "0.0.0.0", "-p", "{port}", "-r", "testcase001", "-t", "60"),
                           ("{T}/fillp-sheep/client/client", "-c", "{peer}", "-p", "{port}", "-r", "testcase001", "-t", "60"),
                           env={"receiver": {"LD_LIBRARY_PATH": "{T}/fillp-sheep/server"},
                                "sender": {"LD_LIBRARY_PATH": "{T}/fillp-sheep/client"}}),
    "scream": Wrapper("SCReAM", "receiver", ("{T}/scream-reproduce/src/ScreamServer", "{port}"),
                      ("{T}/scream-reproduce/src/ScreamClient", "{peer}", "{port}")),
}
#: Pantheon's schemes fl does not run from a checkout, and why.
NOT_RUN = {
    "quic": "Pantheon's QUIC is Chromium's proto-quic with its certificates trusted in the user's ~/.pki/nssdb; "
            "fl's own quic_cubic (ngtcp2) is a QUIC Cubic it ships",
    "webrtc": "Pantheon's WebRTC is Chromium with fake media in Xvfb displays and a node signalling server",
    "bbr": "a kernel congestion control: cc: bbr", "cubic": "a kernel congestion control: cc: cubic",
    "vegas": "a kernel congestion control: cc: vegas",
    "koho_cc": "removed from Pantheon (its commit eb552b4) before 23e738c: no wrapper to run",
    "calibrated_koho": "removed from Pantheon (its commit eb552b4) before 23e738c: no wrapper to run",
}


class PantheonFile(BaseModel):
    """A scheme file that names a Pantheon checkout and the schemes fl runs from it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    pantheon: str = Field(pattern=r"^/?[\w.+-]+(/[\w.+-]+)*$")
    """The checkout's folder, as the hosts see it: an absolute path, or one relative to the
    scheme file (a testbed on this machine)."""
    version: str | None = Field(None, pattern=r"^[\w.+~:-]{1,40}$")
    schemes: list[str] | dict[str, str] = Field(min_length=1)

    def named(self) -> dict[str, str]:
        """fl's name → Pantheon's, for each scheme the file runs."""
        return dict(self.schemes) if isinstance(self.schemes, dict) else {n: n for n in self.schemes}

    def checkout(self, file: Path) -> Path:
        """The checkout's folder, FILE's folder the base of a relative path."""
        return Path(self.pantheon) if self.pantheon.startswith("/") else (file.parent / self.pantheon).resolve()

    def version_text(self, file: Path) -> str:
        """The version tables give: the file's, else the checkout's git HEAD where this
        machine has it, else "checkout"."""
        if self.version:
            return self.version
        head = _git_head(self.checkout(file))
        return head[:7] if head else "checkout"


def _git_head(checkout: Path) -> str | None:
    """The commit a checkout's HEAD names (its .git files read, no git run)."""
    try:
        head = (checkout / ".git" / "HEAD").read_text().strip()
        if head.startswith("ref: "):
            ref = checkout / ".git" / head[5:]
            if ref.is_file():
                return ref.read_text().strip()
            packed = (checkout / ".git" / "packed-refs").read_text()
            return next((line.split()[0] for line in packed.splitlines() if line.endswith(" " + head[5:])), None)
        return head
    except OSError:
        return None


def wrapper(name: str) -> Wrapper:
    """Pantheon's scheme NAME, or ValueError saying why fl does not run it."""
    if name in WRAPPERS:
        return WRAPPERS[name]
    if name in NOT_RUN:
        raise ValueError(f"{name!r}: {NOT_RUN[name]}")
    raise ValueError(f"{name!r} is none of the Pantheon schemes fl runs ({', '.join(sorted(WRAPPERS))})")
