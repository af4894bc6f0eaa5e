"""roles/testbed/files/fl-flent: Flent's own program, started without matplotlib (and
without setuptools' distutils shim): it answers as the installed Flent does, and as a
Flent on a machine without matplotlib."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

LAUNCHER = Path(__file__).resolve().parents[2] / "roles" / "testbed" / "files" / "fl-flent"
#: Skipped without Flent only outside CI (CI=true: it fails there, as test_shellcheck does).
pytestmark = pytest.mark.skipif(shutil.which("flent") is None and not os.environ.get("CI"),
                                reason="needs Flent (./install.sh)")


def version(*argv: str) -> str:
    p = subprocess.run([*argv, "--version"], capture_output=True, text=True, timeout=120, cwd="/")
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout + p.stderr


def test_the_launcher_runs_the_installed_flent_without_matplotlib():
    own, lean = version("flent"), version(str(LAUNCHER))
    number = re.compile(r"Flent v([\d.]+)")
    assert number.search(own) and number.search(own).group(1) == number.search(lean).group(1), (own, lean)
    assert "Using matplotlib" in own and "No matplotlib found" in lean, lean
    listed = subprocess.run([str(LAUNCHER), "--list-tests"], capture_output=True, text=True, timeout=120, cwd="/")
    assert listed.returncode == 0 and "tcp_1up" in listed.stdout + listed.stderr, listed.stdout + listed.stderr


#: A fake fping whose help is HELP and whose replies carry a timestamp of 2001: Flent's
#: own clock check refuses it; run by /usr/bin/python3 (the hosts' Python, Flent's).
FAKE_FPING = "#!/bin/sh\n[ \"$1\" = -h ] && {{ printf '%s\\n' {help}; exit 0; }}\necho '[1000000000.00000] 10.0.0.2 : [0], 64 bytes, 0.1 ms'\n"
FOUND = ("import importlib.machinery, json, sys\n"
         "m = importlib.machinery.SourceFileLoader('launcher', sys.argv[1]).load_module()\n"
         "m.find_flent(); m.fping_without_its_clock_check()\n"
         "from flent import util, runners\n"
         "print(json.dumps(dict(util.get_cache('PingRunner').items())))\n"
         "r = runners.PingRunner.__new__(runners.PingRunner); r._cache = None; r.remote_host = None; r.delay = 0\n"
         "print(r.find_binary(4, 0.2, 10, '10.0.0.2'))\n")


def found_with(tmp_path: Path, help_lines: list[str]) -> list[str]:
    """What fl-flent left in Flent's lookup cache, then the ping command Flent's runner
    builds, with a fake fping (offering HELP_LINES) first on PATH."""
    (tmp_path / "fping").write_text(FAKE_FPING.format(help=" ".join(f"'{h}'" for h in help_lines)))
    (tmp_path / "fping").chmod(0o755)
    p = subprocess.run(["/usr/bin/python3", "-c", FOUND, str(LAUNCHER)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}, cwd="/")
    return [p.returncode, *p.stdout.splitlines(), p.stderr]


def test_flents_ping_runner_takes_fping_without_comparing_its_timestamps_with_a_clock(tmp_path):
    """Flent's runner would refuse this fping (its reply's timestamp is 25 years off);
    fl-flent's check of fping's help lets it through, for IPv4 and IPv6."""
    fping = str(tmp_path / "fping")
    rc, cache, command, err = found_with(tmp_path, ["-6, --ipv6  only ping IPv6 addresses",
                                                    "-D, --timestamp  print timestamp before each output line"])
    assert rc == 0 and json.loads(cache) == {"fping,4,": fping, "fping,6,": fping}, (cache, err)
    assert command.split()[:3] == [fping, "-D", "-p"], command


def test_an_fping_without_timestamps_is_left_to_flents_own_checks(tmp_path):
    """Nothing put in Flent's cache: its runner checks fping itself, and refuses it."""
    _, cache, *rest = found_with(tmp_path, ["-6, --ipv6  only ping IPv6 addresses"])
    assert json.loads(cache) == {}, cache
    assert "Found fping, but it does not appear to support timestamps" in rest[-1], rest
