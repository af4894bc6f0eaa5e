"""The image cache, outside the repository: <cache>/NAME/root (the guest's root, kernel
and modules inside) and <cache>/NAME/manifest.json (what is in it and how it was made).

The cache is /var/cache/fl/images, or FL_IMAGE_CACHE. An image is replaced only whole
(built beside it, then renamed), never while a VM runs from it."""
from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

from pydantic import BaseModel, ValidationError

from ..errors import FlError
from ..scenario.values import valid_name

CACHE_ENV = "FL_IMAGE_CACHE"
DEFAULT_CACHE = Path("/var/cache/fl/images")
MANIFEST = "manifest.json"
FORMAT = 1  # of the image layout and manifest: another format is rebuilt


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


class KernelRecord(BaseModel):
    package: str  # as the recipe names it
    suite: str
    version: str  # Debian version
    release: str  # uname -r
    packages: list[str]  # the packages holding its image and modules (unpacked into the root)
    vmlinuz: str  # path inside the root
    debs: dict[str, str] = {}  # a kernel given as .deb files: file name → sha256


class ModuleRecord(BaseModel):
    name: str
    source: str
    path: str  # inside the root
    vermagic: str
    sha256: str


class Manifest(BaseModel):
    format: int = FORMAT
    name: str
    recipe: str  # its path when built
    recipe_sha256: str
    built: float  # epoch seconds
    build_seconds: float
    kernel: KernelRecord
    userland_suite: str
    mirror: str = ""  # where its packages came from (a snapshot's address pins them); '' in older manifests
    packages: dict[str, str]  # every Debian package in the root: version
    modules: list[ModuleRecord]
    boot_modules: list[str]
    boot_sysctls: dict[str, str]
    size_bytes: int
    supports: dict[str, list[str]]  # from the kernel's config and the built modules
    fl: dict[str, object]


class Image:
    """A built image in the cache."""

    def __init__(self, folder: Path, manifest: Manifest) -> None:
        self.folder, self.manifest = folder, manifest

    @property
    def name(self) -> str:
        return self.folder.name

    @property
    def root(self) -> Path:
        return self.folder / "root"

    @property
    def kernel(self) -> Path:
        return self.root / self.manifest.kernel.vmlinuz


def image_folder(name: str) -> Path:
    """NAME's folder in the cache; a name that is not one ('..', a path) is refused, so that
    `fl image rm` can never reach outside the cache."""
    return cache_root() / valid_name(name, "image name")


def load_image(name: str) -> Image | None:
    """The built image NAME, or None (not a name, not built, half built, or of another format)."""
    try:
        folder = image_folder(name)
        manifest = Manifest.model_validate_json((folder / MANIFEST).read_text())
    except (OSError, ValidationError, ValueError, FlError):
        return None
    if manifest.format != FORMAT or not (folder / "root").is_dir():
        return None
    return Image(folder, manifest)


def images() -> list[Image]:
    root = cache_root()
    found = (load_image(p.name) for p in sorted(root.iterdir()) if p.is_dir() and not p.name.startswith(".")) \
        if root.is_dir() else ()
    return [i for i in found if i is not None]


def users(root: Path) -> list[int]:
    """PIDs of QEMU processes whose guest runs from ROOT (their command line names it)."""
    wanted = f"path={root}"
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "qemu-system" in cmd and re.search(re.escape(wanted) + r"[,\s]", cmd + " "):
            pids.append(int(d.name))
    return pids


def refuse_if_in_use(folder: Path, action: str) -> None:
    if pids := users(folder / "root"):
        raise FlError(f"cannot {action} image {folder.name}: a VM runs from it (QEMU PID {', '.join(map(str, pids))})")


def remove(name: str) -> None:
    folder = image_folder(name)
    if not folder.is_dir():
        raise FlError(f"no image {name!r} in {cache_root()} (./fl image list shows them)")
    refuse_if_in_use(folder, "remove")
    trash = folder.with_name(f".removing-{name}-{time.time_ns()}")
    folder.rename(trash)
    shutil.rmtree(trash)


def age(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 86400 * 2:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.0f} days"
