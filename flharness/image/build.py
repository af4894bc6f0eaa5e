"""`fl image build NAME`: a recipe → a guest root in the cache, in six stages.

1. build root: the kernel's suite (and its base, for backports), with apt lists;
2. kernel: the recipe's package resolved there, its headers and (for kernel_source
   modules) its linux-source installed, its image and modules downloaded;
3. sources of the extra modules, gathered in the build root;
4. modules, built with the kernel's own headers and compiler, their vermagic checked;
5. guest root: the userland suite with fl's guest tools and the recipe's packages, the
   kernel unpacked into it, the extra modules beside its own (depmod), the boot settings;
6. manifest: every package version, each module's vermagic and sha256, the recipe's hash.

The image is built beside the cached one and replaces it whole; the build root is removed.
The same recipe (and local sources) finds the image cached; --force rebuilds it.
"""
from __future__ import annotations

import fcntl
import hashlib
import logging
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..provenance import fl_source
from ..units import human_size
from .debian import (
    RETRIES,
    BuildError,
    KernelPackages,
    in_root,
    kernel_from_debs,
    mmdebstrap,
    resolve_kernel,
    source_lines,
    unpack,
)
from .recipe import GUEST_PACKAGES, ImageRecipe, deb_paths, file_sha256, load_recipe
from .sources import gather
from .store import (
    MANIFEST,
    Image,
    KernelRecord,
    Manifest,
    ModuleRecord,
    age,
    cache_root,
    image_folder,
    load_image,
    refuse_if_in_use,
)

LOG = logging.getLogger(__name__)
BUILD_PACKAGES = ("make", "xz-utils", "kmod")
EXTRA_DIR = "updates/fl"  # extra modules, inside /usr/lib/modules/RELEASE
BOOT_DIR = "etc/fl"  # boot-modules and boot-sysctls, read by the guest script
STAGES = 6
#: Kernel config symbols → what fl calls them (`fl image list`).
CONFIG_NAMES = {"NET_SCH_": "qdiscs", "TCP_CONG_": "ccs"}
NOT_A_KIND = {"advanced", "default", "fifo", "ingress", "mqprio_lib"}  # config switches, not qdiscs or CCs


class Build:
    stages = STAGES
    download_kernel = True  # the kernel's packages, for the guest root (stage 5)

    def __init__(self, image: ImageRecipe, work: str = "") -> None:
        self.image = image
        self.work = cache_root() / f".build-{work or image.name}"
        self.build_root, self.guest = self.work / "build", self.work / "guest"
        self.log = cache_root() / ".logs" / f"{image.name}.log"
        self.started = time.time()
        self.stage = 0
        self.debs: dict[str, str] = {}  # a kernel given as .deb files: file name → sha256

    @contextmanager
    def step(self, what: str) -> Iterator[None]:
        self.stage += 1
        t0 = time.time()
        LOG.info("image %s: [%d/%d] %s …", self.image.name, self.stage, self.stages, what)
        yield
        LOG.info("image %s: [%d/%d] done in %.0f s", self.image.name, self.stage, self.stages, time.time() - t0)

    def run(self) -> Image:
        kernel, built = self.modules()
        with self.step(f"guest root: {self.image.recipe.userland.suite}"):
            self._guest_root(kernel, built)
        with self.step("manifest"):
            image = self._commit(kernel, built)
        LOG.info("image %s: built in %.0f s: %s (kernel %s, %s)", self.image.name, time.time() - self.started,
                 image.folder, kernel.release, human_size(image.manifest.size_bytes))
        return image

    def modules(self) -> tuple[KernelPackages, dict[str, Path]]:
        """Stages 1-4: the kernel resolved and the recipe's extra modules built for it (each
        module's .ko, in the build root)."""
        recipe = self.image.recipe
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.log.write_text(f"# fl image build {self.image.name} ({self.image.path}), {time.ctime()}\n")
        with self.step(f"build root: {recipe.kernel.suite}"):
            mmdebstrap(self.build_root, recipe.kernel.suite.removesuffix("-backports"),
                       source_lines(recipe.mirror, recipe.kernel.suite, ["main"]), list(BUILD_PACKAGES), self.log,
                       ["--skip=cleanup/apt/lists"])
        with self.step(f"kernel: {recipe.kernel.describe()}"):
            kernel = self._kernel_from_debs() if recipe.kernel.debs else self._kernel()
        with self.step(f"sources of {len(recipe.modules)} extra module(s)"):
            folders = {m.name: gather(self.build_root, self.image, m, kernel, cache_root() / ".downloads", self.log)
                       for m in recipe.modules}
        with self.step("modules: " + (", ".join(folders) or "none")):
            built = {name: self._compile(name, folder, kernel) for name, folder in folders.items()}
        return kernel, built

    # --- stages -----------------------------------------------------------------------------

    def _kernel(self) -> KernelPackages:
        k = self.image.recipe.kernel
        assert k.package is not None  # a kernel without debs names its package (Kernel)
        kernel = resolve_kernel(self.build_root, k.package, k.version, k.suite, self.log)
        LOG.info("image %s:   %s %s (release %s)", self.image.name, kernel.packages[0], kernel.version, kernel.release)
        wanted = []
        if self.image.recipe.modules:
            wanted.append(f"linux-headers-{kernel.release}={kernel.version}")
        if any(m.source.kernel_source for m in self.image.recipe.modules):
            wanted.append(f"linux-source-{kernel.upstream}={kernel.version}")
        if wanted:
            in_root(self.build_root, ["apt-get", "install", "-y", "-q", "-o", f"Acquire::Retries={RETRIES}",
                                      "--no-install-recommends", *wanted], self.log,
                    f"installing {' '.join(wanted)}", network=True)
        if not self.download_kernel:
            return kernel
        (self.build_root / "fl" / "kernel").mkdir(parents=True, exist_ok=True)
        in_root(self.build_root, ["env", "-C", "/fl/kernel", "apt-get", "download", "-q", "-o", f"Acquire::Retries={RETRIES}",
                                  *(f"{p}={kernel.version}" for p in kernel.packages)], self.log, "downloading the kernel",
                network=True)
        return kernel

    def _kernel_from_debs(self) -> KernelPackages:
        """The recipe's .deb files: the image's and modules' go to the guest root (stage 5),
        the headers are installed here with their dependencies from the suite."""
        debs = deb_paths(self.image.path, self.image.recipe)
        kernel, guest, headers = kernel_from_debs(debs, self.log)
        LOG.info("image %s:   %s %s (release %s) from %d .deb file(s)", self.image.name, kernel.packages[0],
                 kernel.version, kernel.release, len(debs))
        (self.build_root / "fl" / "kernel").mkdir(parents=True, exist_ok=True)
        for deb in guest:
            shutil.copy(deb, self.build_root / "fl" / "kernel" / deb.name)
        if self.image.recipe.modules:
            if not headers:
                raise BuildError(f"kernel debs: building modules needs the kernel's linux-headers package (release {kernel.release})")
            (self.build_root / "fl" / "headers").mkdir(parents=True, exist_ok=True)
            for deb in headers:
                shutil.copy(deb, self.build_root / "fl" / "headers" / deb.name)
            in_root(self.build_root, ["apt-get", "install", "-y", "-q", "-o", f"Acquire::Retries={RETRIES}",
                                      "--no-install-recommends", *(f"/fl/headers/{d.name}" for d in headers)],
                    self.log, "installing the kernel's headers", network=True)
        self.debs = {deb.name: file_sha256(deb) for deb in debs}
        return kernel

    def _compile(self, name: str, folder: Path, kernel: KernelPackages) -> Path:
        inside = "/" + str(folder.relative_to(self.build_root))
        in_root(self.build_root, ["make", "-C", f"/usr/src/linux-headers-{kernel.release}", f"M={inside}", "modules"],
                self.log, f"building module {name}")
        found = sorted(folder.rglob(f"{name}.ko"))
        if not found:
            raise BuildError(f"module {name}: the build made no {name}.ko (see {self.log})")
        magic = vermagic(self.build_root, found[0], self.log)
        if magic.split()[0] != kernel.release:
            raise BuildError(f"module {name}: vermagic {magic!r} does not match kernel {kernel.release}")
        return found[0]

    def _guest_root(self, kernel: KernelPackages, built: dict[str, Path]) -> None:
        u = self.image.recipe.userland
        wanted = sorted(({p: p for p in GUEST_PACKAGES} | u.includes()).values())
        sources = [line for suite in (u.suite, *u.also) for line in source_lines(self.image.recipe.mirror, suite, u.components)]
        mmdebstrap(self.guest, u.suite, sources, wanted, self.log)
        for deb in sorted((self.build_root / "fl" / "kernel").glob("*.deb")):
            unpack(deb, self.guest, self.log)
        extra = self.guest / "usr/lib/modules" / kernel.release / EXTRA_DIR
        extra.mkdir(parents=True, exist_ok=True)
        for ko in built.values():
            shutil.copy(ko, extra / ko.name)
        in_root(self.guest, ["depmod", kernel.release], self.log, "depmod")
        boot = self.guest / BOOT_DIR
        boot.mkdir(parents=True, exist_ok=True)
        b = self.image.recipe.boot
        (boot / "boot-modules").write_text("".join(f"{m}\n" for m in b.modules))
        (boot / "boot-sysctls").write_text("".join(f"{k} = {v}\n" for k, v in b.sysctls.items()))
        self._check_constraints()

    def _check_constraints(self) -> None:
        self._check_flent()
        versions = packages_of(self.guest)
        for name, op, version in self.image.recipe.userland.constraints():
            have = versions.get(name)
            if have is None:
                raise BuildError(f"package {name} is not in the guest root")
            if op and not version_holds(have, op, version or ""):
                raise BuildError(f"{self.image.recipe.userland.suite} has {name} {have}, the recipe wants {op} {version}")

    def _check_flent(self) -> None:
        """Flent without its test definitions runs nothing (sid's flent 2.3.0-1 ships none)."""
        try:
            tests = in_root(self.guest, ["flent", "--list-tests"], self.log, "flent --list-tests")
        except BuildError:
            tests = ""
        if "tcp_1up" not in tests:
            version = packages_of(self.guest).get("flent", "?")
            raise BuildError(f"flent {version} of {self.image.recipe.userland.suite} has no test definitions "
                             "(flent --list-tests lists none): take flent from another suite, e.g. "
                             "userland: {also: [trixie], packages: [flent/trixie]}")

    def _commit(self, kernel: KernelPackages, built: dict[str, Path]) -> Image:
        folder = image_folder(self.image.name)
        staged = folder.with_name(f".new-{self.image.name}")
        shutil.rmtree(staged, ignore_errors=True)
        staged.mkdir(parents=True)
        self.guest.rename(staged / "root")
        root = staged / "root"
        manifest = self._manifest(root, kernel, built)
        (staged / MANIFEST).write_text(manifest.model_dump_json(indent=1) + "\n")
        refuse_if_in_use(folder, "replace")
        if folder.exists():
            old = folder.with_name(f".old-{self.image.name}-{time.time_ns()}")
            folder.rename(old)
            shutil.rmtree(old)
        staged.rename(folder)
        shutil.rmtree(self.work, ignore_errors=True)
        image = load_image(self.image.name)
        assert image is not None
        return image

    def _manifest(self, root: Path, kernel: KernelPackages, built: dict[str, Path]) -> Manifest:
        rel = Path("usr/lib/modules") / kernel.release
        vmlinuz = next((p for p in (rel / "vmlinuz", Path("boot") / f"vmlinuz-{kernel.release}") if (root / p).is_file()), None)
        if vmlinuz is None:
            raise BuildError(f"kernel {kernel.release}: no vmlinuz in {', '.join(kernel.packages)}")
        modules = []
        for m in self.image.recipe.modules:
            path = rel / EXTRA_DIR / built[m.name].name
            modules.append(ModuleRecord(name=m.name, source=m.source.describe(), path=str(path),
                                        vermagic=vermagic(root, root / path, self.log),
                                        sha256=hashlib.sha256((root / path).read_bytes()).hexdigest()))
        k = self.image.recipe.kernel
        return Manifest(
            name=self.image.name, recipe=str(self.image.path), recipe_sha256=self.image.digest, built=time.time(),
            build_seconds=round(time.time() - self.started, 1),
            kernel=KernelRecord(package=k.package or kernel.packages[0], suite=k.suite, version=kernel.version,
                                release=kernel.release, packages=list(kernel.packages), vmlinuz=str(vmlinuz),
                                debs=self.debs),
            userland_suite=self.image.recipe.userland.suite, mirror=self.image.recipe.mirror,
            packages=packages_of(root), modules=modules,
            boot_modules=list(self.image.recipe.boot.modules),
            boot_sysctls={k: str(v) for k, v in self.image.recipe.boot.sysctls.items()},
            size_bytes=tree_size(root), supports=supports(root / rel / "config", [m.name for m in modules]),
            fl=fl_source())


# --- reading a root ---------------------------------------------------------------------------

def vermagic(root: Path, ko: Path, log: Path) -> str:
    inside = "/" + str(ko.relative_to(root))
    return in_root(root, ["modinfo", "-F", "vermagic", inside], log, f"modinfo {ko.name}").strip()


def packages_of(root: Path) -> dict[str, str]:
    out = subprocess.run(["dpkg-query", f"--admindir={root / 'var/lib/dpkg'}", "-W", "-f", "${Package} ${Version}\n"],
                         capture_output=True, text=True, check=True).stdout
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def version_holds(have: str, op: str, want: str) -> bool:
    dpkg_op = {">=": "ge", "<=": "le", "=": "eq"}[op]
    return subprocess.run(["dpkg", "--compare-versions", have, dpkg_op, want]).returncode == 0


def tree_size(root: Path) -> int:
    out = subprocess.run(["du", "-sb", str(root)], capture_output=True, text=True).stdout
    return int(out.split()[0]) if out else 0


def supports(config: Path, extra: list[str]) -> dict[str, list[str]]:
    """Qdiscs and congestion controls the kernel's config builds (=y or =m), and the extra
    modules: what `fl image list` shows (`fl check --vm NAME` probes for real)."""
    found: dict[str, set[str]] = {what: set() for what in CONFIG_NAMES.values()}
    text = config.read_text(errors="replace") if config.is_file() else ""
    for prefix, what in CONFIG_NAMES.items():
        for m in re.finditer(rf"^CONFIG_{prefix}(\w+)=[ym]$", text, re.M):
            if (name := m.group(1).lower()) not in NOT_A_KIND:
                found[what].add(name)
    for name in extra:
        for prefix, what in (("sch_", "qdiscs"), ("tcp_", "ccs")):
            if name.startswith(prefix):
                found[what].add(name.removeprefix(prefix))
    return {what: sorted(names) for what, names in found.items()}


# --- the command ------------------------------------------------------------------------------

@contextmanager
def build_lock(name: str) -> Iterator[None]:
    lock = cache_root() / f".{name}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def build(name: str, force: bool = False) -> Image:
    image = load_recipe(name)
    with build_lock(image.name):
        cached = load_image(image.name)
        if cached is not None and cached.manifest.recipe_sha256 == image.digest and not force:
            LOG.info("image %s: up to date (built %s ago from %s, kernel %s; --force rebuilds)", image.name,
                     age(time.time() - cached.manifest.built), image.path.name, cached.manifest.kernel.release)
            return cached
        if cached is not None:
            refuse_if_in_use(cached.folder, "rebuild")
        return Build(image).run()
