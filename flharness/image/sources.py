"""Extra modules' sources, gathered into the build root (ROOT/fl/modules/NAME/) where the
kernel's own headers and compiler build them."""
from __future__ import annotations

import hashlib
import shutil
import tarfile
import urllib.request
from pathlib import Path, PurePosixPath

from .debian import BuildError, KernelPackages, in_root
from .recipe import ImageRecipe, Module

MODULES = PurePosixPath("/fl/modules")


def module_dir(root: Path, module: Module) -> Path:
    return root / MODULES.relative_to("/") / module.name


def gather(root: Path, image: ImageRecipe, module: Module, kernel: KernelPackages, downloads: Path, log: Path) -> Path:
    """Put MODULE's source in the build root; returns its folder there (in ROOT's terms:
    a path under ROOT)."""
    dest = module_dir(root, module)
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    src = module.source
    if src.kernel_source is not None:
        dest = _from_kernel_source(root, dest, src.kernel_source, kernel, log)
    elif src.package is not None:
        assert src.path is not None
        in_root(root, ["apt-get", "install", "-y", "-q", "--no-install-recommends", src.package], log,
                f"installing {src.package} (source of {module.name})", network=True)
        dest = _copy_in(root / src.path.lstrip("/"), dest, f"{src.path} (installed by {src.package})")
    elif src.local is not None:
        dest = _copy_in(image.local_source(module), dest, str(image.local_source(module)))
    else:
        dest = _from_url(dest, src.url or "", src.sha256 or "", src.subdir, downloads)
    _ensure_kbuild(dest, module.name)
    return dest


def _from_kernel_source(root: Path, dest: Path, path: str, kernel: KernelPackages, log: Path) -> Path:
    """PATH (a file or folder) from linux-source-X.Y's tarball, the kernel's own source."""
    top = f"linux-source-{kernel.upstream}"
    member = f"{top}/{path.rstrip('/')}"
    inside = "/" + str(dest.relative_to(root))
    try:
        in_root(root, ["tar", "-xJf", f"/usr/src/{top}.tar.xz", "-C", inside,
                       f"--strip-components={member.count('/')}", member], log, f"extracting {path}")
    except BuildError:
        raise BuildError(f"{path} is not in {top} {kernel.version} (the kernel's source)") from None
    return _single(dest)


def _copy_in(source: Path, dest: Path, what: str) -> Path:
    if source.is_file():
        shutil.copy2(source, dest / source.name)
        return dest
    if source.is_dir():
        shutil.copytree(source, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.o", "*.ko", ".*"))
        return dest
    raise BuildError(f"{what}: no such file or folder")


def _from_url(dest: Path, url: str, sha256: str, subdir: str | None, downloads: Path) -> Path:
    """A .c file or a tarball, fetched once into DOWNLOADS and checked against SHA256."""
    cached = downloads / sha256
    if not cached.is_file():
        downloads.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(".partial")
        try:
            with urllib.request.urlopen(url, timeout=60) as r, partial.open("wb") as f:
                shutil.copyfileobj(r, f)
        except OSError as e:
            raise BuildError(f"downloading {url}: {e}") from None
        got = hashlib.sha256(partial.read_bytes()).hexdigest()
        if got != sha256:
            partial.unlink()
            raise BuildError(f"{url}: sha256 is {got}, the recipe says {sha256}")
        partial.rename(cached)
    if tarfile.is_tarfile(cached):
        with tarfile.open(cached) as tar:
            tar.extractall(dest, members=_safe_members(tar, url))
        top = dest / subdir if subdir else _single(dest)
        if not top.is_dir():
            raise BuildError(f"{url}: no folder {subdir} in the archive")
        return top
    name = PurePosixPath(url.split("?")[0]).name
    if not name.endswith(".c"):
        raise BuildError(f"{url}: neither a tarball nor a .c file")
    shutil.copy(cached, dest / name)
    return dest


def _safe_members(tar: tarfile.TarFile, url: str) -> list[tarfile.TarInfo]:
    """The archive's files and folders, if none would land outside the folder it is
    unpacked in (Python 3.11.2, bookworm's, has no extraction filters)."""
    for m in tar.getmembers():
        parts = PurePosixPath(m.name).parts
        if m.name.startswith("/") or ".." in parts or not (m.isfile() or m.isdir()):
            raise BuildError(f"{url}: the archive holds {m.name!r}, which is not a plain file or folder inside it")
    return tar.getmembers()


def _single(dest: Path) -> Path:
    """The one folder an extraction left (a tarball's top folder), else DEST itself."""
    entries = list(dest.iterdir())
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else dest


def _ensure_kbuild(folder: Path, name: str) -> None:
    """A folder without its own Kbuild or Makefile builds NAME.c as module NAME."""
    if (folder / "Kbuild").is_file() or (folder / "Makefile").is_file():
        return
    if not (folder / f"{name}.c").is_file():
        raise BuildError(f"module {name}: the source has no Kbuild or Makefile and no {name}.c")
    (folder / "Kbuild").write_text(f"obj-m := {name}.o\n")
