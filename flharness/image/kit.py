"""fl's modules for a host's kernel (`fl modules build`): an image recipe's extra modules
(l4s's: sch_dualpi2 from the kernel's own source, fl's TCP Prague) built for one kernel
release with that kernel's Debian headers and compiler, here, so that a host needs
neither; kept as a kit, <cache>/.kits/RELEASE/ (each NAME.ko and kit.json), which
`--load-modules` loads on the hosts of a run (flharness/run/kit_loading.py)."""
from __future__ import annotations

import hashlib
import logging
import re
import shutil
import time
from pathlib import Path

from pydantic import BaseModel, ValidationError

from ..errors import FlError
from ..provenance import fl_source
from .build import Build, build_lock, vermagic
from .recipe import ImageRecipe, Kernel, load_recipe
from .store import ModuleRecord, cache_root

LOG = logging.getLogger(__name__)
KIT_FILE = "kit.json"
FORMAT = 1
DEFAULT_RECIPE = "l4s"
#: The oldest kernel (major, minor) fl's tcp_prague builds for: 7.3's AccECN hooks (docs/prague.md).
KIT_KERNEL = (7, 3)
#: A kernel release as `uname -r` prints it and Debian names its packages (linux-image-RELEASE).
RELEASE_RE = re.compile(r"^[0-9]+\.[0-9]+[0-9a-z.+-]{0,80}\Z")


class Kit(BaseModel):
    """kit.json: what a kit holds and how it was made."""
    format: int = FORMAT
    release: str  # uname -r of the kernel it is for
    kernel_version: str  # Debian version of that kernel's packages (its headers)
    suite: str
    recipe: str  # the image recipe whose modules it holds
    recipe_sha256: str
    built: float
    build_seconds: float
    modules: list[ModuleRecord]  # path: the file's name in the kit's folder; in load order
    fl: dict[str, object]

    def module_files(self, folder: Path) -> list[Path]:
        return [folder / m.path for m in self.modules]


def valid_release(release: str) -> str:
    if not RELEASE_RE.match(release):
        raise FlError(f"{release!r} is not a kernel release (as `uname -r` prints it, e.g. 7.3.4+deb13-amd64)")
    return release


def kit_folder(release: str) -> Path:
    return cache_root() / ".kits" / valid_release(release)


def load_kit(release: str) -> Kit | None:
    """The kit built for RELEASE, or None (not built, half built, of another format)."""
    folder = kit_folder(release)
    try:
        kit = Kit.model_validate_json((folder / KIT_FILE).read_text())
    except (OSError, ValidationError):
        return None
    if kit.format != FORMAT or not all(p.is_file() for p in kit.module_files(folder)):
        return None
    return kit


class KitBuild(Build):
    """Stages 1-4 of an image build (build.py) for the kernel linux-image-RELEASE of the
    recipe's suite, its packages not downloaded; then the kit."""
    stages = 5
    download_kernel = False

    def __init__(self, image: ImageRecipe, release: str) -> None:
        super().__init__(image, f"kit-{release}")
        self.release = release

    def kit(self) -> Kit:
        kernel, built = self.modules()
        if kernel.release != self.release:
            raise FlError(f"linux-image-{self.release} resolved to kernel {kernel.release}")
        with self.step(f"kit for {self.release}"):
            kit = self._commit_kit(kernel.version, built)
        LOG.info("modules for %s built in %.0f s: %s", self.release, kit.build_seconds, kit_folder(self.release))
        return kit

    def _commit_kit(self, version: str, built: dict[str, Path]) -> Kit:
        folder = kit_folder(self.release)
        staged = folder.with_name(f".new-{self.release}")
        shutil.rmtree(staged, ignore_errors=True)
        staged.mkdir(parents=True)
        records = []
        for m in self.image.recipe.modules:
            ko = built[m.name]
            records.append(ModuleRecord(name=m.name, source=m.source.describe(), path=ko.name,
                                        vermagic=vermagic(self.build_root, ko, self.log),
                                        sha256=hashlib.sha256(ko.read_bytes()).hexdigest()))
            shutil.copy(ko, staged / ko.name)
        kit = Kit(release=self.release, kernel_version=version, suite=self.image.recipe.kernel.suite,
                  recipe=self.image.name, recipe_sha256=self.image.digest, built=time.time(),
                  build_seconds=round(time.time() - self.started, 1), modules=records, fl=fl_source())
        (staged / KIT_FILE).write_text(kit.model_dump_json(indent=1) + "\n")
        shutil.rmtree(folder, ignore_errors=True)
        staged.rename(folder)
        shutil.rmtree(self.work, ignore_errors=True)
        return kit


def for_release(image: ImageRecipe, release: str, suite: str | None) -> ImageRecipe:
    """IMAGE's recipe with its kernel the package of RELEASE (in SUITE, default the recipe's)."""
    kernel = Kernel(suite=suite or image.recipe.kernel.suite, package=f"linux-image-{release}")
    return image.model_copy(update={"recipe": image.recipe.model_copy(update={"kernel": kernel})})


def build_kit(release: str, recipe: str = DEFAULT_RECIPE, suite: str | None = None, force: bool = False) -> Kit:
    """The kit for RELEASE, built unless one of the same recipe is cached (or FORCE)."""
    image = load_recipe(recipe)
    valid_release(release)
    if not image.recipe.modules:
        raise FlError(f"image recipe {image.name} builds no modules")
    with build_lock(f"kit-{release}"):
        cached = load_kit(release)
        if cached is not None and cached.recipe_sha256 == image.digest and not force:
            LOG.info("modules for %s: up to date (%s, from %s; --force rebuilds)", release,
                     ", ".join(m.name for m in cached.modules), image.path.name)
            return cached
        return KitBuild(for_release(image, release, suite), release).kit()
