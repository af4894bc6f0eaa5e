"""Debian roots for images: mmdebstrap builds them (never touching this machine's apt
configuration), commands run chrooted in a private mount namespace (so /proc, which the
kernel's build tools need, is unmounted whatever happens), apt answers what a suite holds."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import FlError

#: Suites whose Release file a mirror or snapshot may serve past its Valid-Until (sid's
#: is re-signed daily, so a frozen copy of the archive expires within a week).
UNSTABLE = ("sid", "unstable", "experimental")


class BuildError(FlError):
    pass


def source_lines(mirror: str, suite: str, components: list[str]) -> list[str]:
    """apt source lines for SUITE; a backports suite needs its base suite too."""
    suites = [suite.removesuffix("-backports"), suite] if suite.endswith("-backports") else [suite]
    return [f"deb {mirror} {s} {' '.join(components)}" for s in suites]


#: apt retries a download that failed (a mirror's hiccup must not fail a whole build).
RETRIES = 3


#: A mirror that serves the archive as it was (snapshot.debian.org): every suite's
#: Release file there is past its Valid-Until.
SNAPSHOT = "/archive/debian/"


def apt_options(*suites: str, mirrors: tuple[str, ...] = ()) -> list[str]:
    retry = [f'--aptopt=Acquire::Retries "{RETRIES}"']
    if any(s in UNSTABLE for s in suites) or any(SNAPSHOT in m for m in mirrors):
        return [*retry, '--aptopt=Acquire::Check-Valid-Until "false"']
    return retry


def mmdebstrap(target: Path, suite: str, sources: list[str], include: list[str], log: Path,
               extra: list[str] | None = None) -> None:
    """A directory root of SUITE with apt and INCLUDE (variant apt: essential packages,
    apt, and what INCLUDE depends on; no recommends)."""
    argv = ["mmdebstrap", "--variant=apt", "--mode=root", f"--include={','.join(include)}",
            *apt_options(suite, *(line.split()[2] for line in sources), mirrors=tuple(line.split()[1] for line in sources)),
            *(extra or []),
            suite, str(target), *sources]
    run_logged(argv, log, f"mmdebstrap {suite}")


def run_logged(argv: list[str], log: Path, what: str, timeout: float = 1800) -> str:
    """Run ARGV, appending its output to LOG; a failure names WHAT and its last lines."""
    with log.open("a") as f:
        f.write(f"\n$ {' '.join(argv)}\n")
        f.flush()
        try:
            p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise BuildError(f"{what}: {e}") from None
        f.write(p.stdout)
    if p.returncode != 0:
        tail = " | ".join(line for line in p.stdout.splitlines()[-4:] if line.strip())
        raise BuildError(f"{what} failed (exit {p.returncode}): {tail} (whole output in {log})")
    return p.stdout


#: Commands in a root find their programs here, whatever this process's PATH (a suite whose
#: root keeps /sbin apart from /usr/sbin has depmod only in /sbin).
ROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def in_root(root: Path, argv: list[str], log: Path, what: str, network: bool = False) -> str:
    """ARGV chrooted into ROOT, with its own /proc in a private mount and PID namespace
    (NETWORK: apt inside fetches, so it gets this machine's resolver)."""
    if network:
        shutil.copy("/etc/resolv.conf", root / "etc" / "resolv.conf")
    return run_logged(["unshare", "--mount", "--pid", "--fork", f"--mount-proc={root / 'proc'}",
                       "chroot", str(root), "/usr/bin/env", f"PATH={ROOT_PATH}", *argv], log, what)


@dataclass(frozen=True)
class KernelPackages:
    """A kernel resolved in its suite: its release (ABI), version and the packages that
    carry its image and modules."""
    release: str
    version: str
    packages: tuple[str, ...]

    @property
    def upstream(self) -> str:
        """'7.3' of 7.3.4-1~bpo13+1: the linux-source-X.Y holding its source."""
        m = re.match(r"^(?:\d+:)?(\d+)\.(\d+)", self.version)
        if not m:
            raise BuildError(f"cannot tell the upstream version of kernel {self.version}")
        return f"{m.group(1)}.{m.group(2)}"


def versions_in(root: Path, package: str, suite: str, log: Path) -> list[str]:
    """PACKAGE's versions in SUITE, newest first (apt-cache madison)."""
    out = in_root(root, ["apt-cache", "madison", package], log, f"apt-cache madison {package}", network=True)
    found = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and parts[0] == package and f" {suite}/" in f" {parts[2].split(' ', 1)[-1]}":
            found.append(parts[1])
    return found


def depends(root: Path, package: str, version: str, log: Path) -> dict[str, str | None]:
    """PACKAGE=VERSION's direct dependencies (the first of each alternative): name → the
    exact version it requires, if any."""
    out = in_root(root, ["apt-cache", "show", f"{package}={version}"], log, f"apt-cache show {package}={version}")
    line = next((ln for ln in out.splitlines() if ln.startswith("Depends:")), "Depends:")
    found: dict[str, str | None] = {}
    for alt in line.removeprefix("Depends:").split(","):
        m = re.match(r"^\s*([^\s(|]+)\s*(?:\(\s*=\s*([^)\s]+)\s*\))?", alt)
        if m:
            found[m.group(1)] = m.group(2)
    return found


def resolve_kernel(root: Path, package: str, version: str, suite: str, log: Path) -> KernelPackages:
    """PACKAGE (a linux-image-ABI package or a meta package depending on one) at VERSION
    ('newest': the newest in SUITE)."""
    for _ in range(3):  # a meta package, then the image package
        known = versions_in(root, package, suite, log)
        if not known:
            raise BuildError(f"kernel package {package} is not in {suite}")
        chosen = known[0] if version == "newest" else version
        if chosen not in known:
            raise BuildError(f"kernel package {package} {chosen} is not in {suite} (there: {', '.join(known)})")
        deps = depends(root, package, chosen, log)
        image = next((d for d in deps if d.startswith("linux-image-") and d != package), None)
        if image is None:
            release = package.removeprefix("linux-image-")
            parts = [d for d in deps if re.match(rf"^linux-(binary|modules|base)-{re.escape(release)}$", d)]
            return KernelPackages(release, chosen, (package, *parts))
        package, version = image, deps[image] or "newest"
    raise BuildError(f"{package}: no kernel image package found through its dependencies")


#: Package name prefixes of a kernel's build files: installed in the build root (modules
#: are compiled against them), never unpacked into the guest.
HEADER_PACKAGES = ("linux-headers-", "linux-kbuild-")
_VMLINUZ = re.compile(r"^\./boot/vmlinuz-(\S+)$|^\./(?:usr/)?lib/modules/([^/]+)/vmlinuz$")


def deb_fields(deb: Path, log: Path) -> dict[str, str]:
    """The control fields of a .deb file that fl reads (dpkg-deb -f)."""
    out = run_logged(["dpkg-deb", "-f", str(deb), "Package", "Version", "Architecture"], log, f"reading {deb.name}")
    return dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)


def kernel_from_debs(debs: list[Path], log: Path) -> tuple[KernelPackages, list[Path], list[Path]]:
    """A kernel given as .deb files: (its release and version and the packages holding its
    image and modules, those files, its header files). The release is the one the
    files' vmlinuz (or module folder) names; exactly one linux-image package is needed."""
    fields = {deb: deb_fields(deb, log) for deb in debs}
    headers = [d for d in debs if fields[d].get("Package", "").startswith(HEADER_PACKAGES)]
    guest = [d for d in debs if d not in headers]
    images = [d for d in guest if fields[d].get("Package", "").startswith("linux-image-")
              and not fields[d]["Package"].endswith("-dbg")]
    if len(images) != 1:
        raise BuildError(f"kernel debs: exactly one linux-image package is needed, found "
                         f"{', '.join(fields[d].get('Package', d.name) for d in images) or 'none'}")
    releases = {m.group(1) or m.group(2) for deb in guest for path in _listing(deb, log) if (m := _VMLINUZ.match(path))}
    if len(releases) != 1:
        raise BuildError(f"kernel debs: {'no vmlinuz' if not releases else 'several kernels: ' + ', '.join(sorted(releases))} "
                         f"in {', '.join(d.name for d in guest)}")
    image = fields[images[0]]
    packages = tuple(fields[d]["Package"] for d in guest)
    return KernelPackages(releases.pop(), image.get("Version", "?"), packages), guest, headers


def _listing(deb: Path, log: Path) -> list[str]:
    """The paths a .deb file installs (dpkg-deb -c), as ./path."""
    out = run_logged(["dpkg-deb", "-c", str(deb)], log, f"listing {deb.name}")
    return [line.split(" -> ")[0].split()[-1] for line in out.splitlines() if line.strip()]


def unpack(deb: Path, root: Path, log: Path) -> None:
    """DEB's files into ROOT through ROOT's merged-/usr links: a package that installs
    ./lib/modules (Debian 12's kernels, `make bindeb-pkg`'s) must land in usr/lib when
    ROOT's /lib links there, not replace the link (dpkg-deb -x would)."""
    with tempfile.TemporaryDirectory(dir=root.parent) as tmp:
        run_logged(["dpkg-deb", "-x", str(deb), tmp], log, f"unpacking {deb.name}")
        for entry in sorted(Path(tmp).iterdir()):
            target = root / entry.name
            if target.is_symlink():
                link = os.readlink(target)
                target = root / link.lstrip("/") if os.path.isabs(link) else root / link
            if entry.is_dir() and not entry.is_symlink():
                shutil.copytree(entry, target, symlinks=True, dirs_exist_ok=True)
            else:
                shutil.copy2(entry, target, follow_symlinks=False)
