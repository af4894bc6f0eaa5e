"""A kernel given as .deb files (flharness/image/debian.py kernel_from_debs), on small
packages made here with dpkg-deb: which files go to the guest and which are headers, the
release the vmlinuz names, and the errors for no image or two kernels."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from flharness.image.debian import BuildError, kernel_from_debs


def deb(folder: Path, package: str, version: str, files: list[str]) -> Path:
    """A .deb of PACKAGE at VERSION installing empty FILES."""
    tree = folder / package
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN" / "control").write_text(f"Package: {package}\nVersion: {version}\nArchitecture: amd64\n"
                                             "Maintainer: fl tests <fl@example.org>\nDescription: test package\n")
    for f in files:
        (tree / f).parent.mkdir(parents=True, exist_ok=True)
        (tree / f).write_text("")
    out = folder / f"{package}_{version}_amd64.deb"
    subprocess.run(["dpkg-deb", "--build", "--root-owner-group", str(tree), str(out)], check=True, capture_output=True)
    return out


def test_image_modules_and_headers(tmp_path):
    """Debian 7.x's split packages (vmlinuz in the modules folder) and a headers file."""
    release = "7.3.4+deb13-amd64"
    debs = [deb(tmp_path, f"linux-image-{release}", "7.3.4-1", [f"usr/share/doc/linux-image-{release}/README"]),
            deb(tmp_path, f"linux-binary-{release}", "7.3.4-1", [f"usr/lib/modules/{release}/vmlinuz"]),
            deb(tmp_path, f"linux-modules-{release}", "7.3.4-1", [f"usr/lib/modules/{release}/kernel/net/x.ko"]),
            deb(tmp_path, f"linux-headers-{release}", "7.3.4-1", [f"usr/src/linux-headers-{release}/Makefile"])]
    kernel, guest, headers = kernel_from_debs(debs, tmp_path / "log")
    assert (kernel.release, kernel.version) == (release, "7.3.4-1")
    assert kernel.packages == (f"linux-image-{release}", f"linux-binary-{release}", f"linux-modules-{release}")
    assert guest == debs[:3] and headers == debs[3:]


def test_a_kernel_built_with_bindeb_pkg(tmp_path):
    """A kernel tree's `make bindeb-pkg` (the L4STeam releases): vmlinuz in /boot."""
    debs = [deb(tmp_path, "linux-image-6.6.0-prague-40", "6.6.0-prague-40-1",
                ["boot/vmlinuz-6.6.0-prague-40", "lib/modules/6.6.0-prague-40/kernel/net/ipv4/tcp_prague.ko"])]
    kernel, _, headers = kernel_from_debs(debs, tmp_path / "log")
    assert kernel.release == "6.6.0-prague-40" and headers == []


def test_no_image_or_two_kernels_are_errors(tmp_path):
    headers = deb(tmp_path, "linux-headers-6.1.0-9-amd64", "6.1.1-1", ["usr/src/x/Makefile"])
    with pytest.raises(BuildError, match="exactly one linux-image package is needed, found none"):
        kernel_from_debs([headers], tmp_path / "log")
    a = deb(tmp_path, "linux-image-6.1.0-9-amd64", "6.1.1-1", ["boot/vmlinuz-6.1.0-9-amd64"])
    b = deb(tmp_path, "linux-modules-6.2.0-1-amd64", "6.2.0-1", ["lib/modules/6.2.0-1-amd64/vmlinuz"])
    with pytest.raises(BuildError, match=re.escape("several kernels: 6.1.0-9-amd64, 6.2.0-1-amd64")):
        kernel_from_debs([a, b], tmp_path / "log")


def test_unpacking_keeps_a_merged_usr_root(tmp_path):
    """Debian 12's kernel installs ./lib/modules: in a root whose /lib links to usr/lib
    it lands in usr/lib, and the link stays (the root's libraries stay reachable)."""
    from flharness.image.debian import unpack
    root = tmp_path / "root"
    (root / "usr" / "lib" / "x86_64-linux-gnu").mkdir(parents=True)
    (root / "lib").symlink_to("usr/lib")
    package = deb(tmp_path, "linux-image-6.1.0-9-amd64", "6.1.1-1",
                  ["boot/vmlinuz-6.1.0-9-amd64", "lib/modules/6.1.0-9-amd64/kernel/x.ko"])
    unpack(package, root, tmp_path / "log")
    assert (root / "lib").is_symlink() and (root / "usr/lib/modules/6.1.0-9-amd64/kernel/x.ko").is_file()
    assert (root / "usr/lib/x86_64-linux-gnu").is_dir() and (root / "boot/vmlinuz-6.1.0-9-amd64").is_file()
