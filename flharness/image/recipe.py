"""Image recipes: images/NAME.yml, validated before anything is built.

A recipe names the Debian suites, the kernel (a package of its suite, an exact version or
the newest, or local .deb files), the userland packages, extra kernel modules to build out of tree (from the
kernel's own source package, another Debian package, a local file or folder, or a URL
with its checksum) and what the guest loads and sets at boot. Every value that reaches a
command line is checked here; a problem is one line naming the file and the key.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError, model_validator

from .. import REPO
from ..errors import FlError, ScenarioError
from ..scenario.load import SUFFIXES, _key_path, _message
from ..scenario.values import check_name
from ..scenario.yaml_file import read_yaml

RECIPE_DIR = REPO / "images"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


PACKAGE_RE = re.compile(r"^[a-z0-9][a-z0-9.+-]+\Z")
VERSION_RE = re.compile(r"^[0-9A-Za-z.+~:-]+\Z")
SUITE_RE = re.compile(r"^[a-z][a-z0-9-]{1,40}\Z")
MODULE_RE = re.compile(r"^[a-z0-9_]{1,60}\Z")
CONSTRAINT_RE = re.compile(r"^(?P<name>[a-z0-9][a-z0-9.+-]+)(?:/(?P<suite>[a-z][a-z0-9-]{1,40}))?"
                           r"\s*(?:(?P<op>>=|<=|=)\s*(?P<version>[0-9A-Za-z.+~:-]+))?\Z")
SHA256_RE = re.compile(r"^[0-9a-f]{64}\Z")
BOOT_SYSCTL_RE = re.compile(r"^(net|kernel|vm)(\.[A-Za-z0-9_-]+)+\Z")
BOOT_VALUE_RE = re.compile(r"^[A-Za-z0-9_.:, -]{1,200}\Z")


def _match(pattern: re.Pattern[str], what: str) -> AfterValidator:
    def check(value: str) -> str:
        if not pattern.match(value):
            raise ValueError(f"{value!r} is not a {what}")
        return value
    return AfterValidator(check)


Package = Annotated[str, _match(PACKAGE_RE, "Debian package name")]
Suite = Annotated[str, _match(SUITE_RE, "Debian suite (e.g. trixie-backports, sid)")]
ModuleName = Annotated[str, _match(MODULE_RE, "kernel module name (e.g. sch_dualpi2)")]


def _relative_path(value: str) -> str:
    p = PurePosixPath(value)
    if not value or p.is_absolute() or ".." in p.parts or not re.match(r"^[A-Za-z0-9_./+-]+$", value):
        raise ValueError(f"{value!r} is not a relative path inside the package (letters, digits, _ . / + -; no ..)")
    return value


RelPath = Annotated[str, AfterValidator(_relative_path)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _deb_path(value: str) -> str:
    if not re.match(r"^[A-Za-z0-9_./+~:-]+\.deb$", value):
        raise ValueError(f"{value!r} is not the path of a .deb file (letters, digits, _ . / + ~ : -)")
    return value


DebPath = Annotated[str, AfterValidator(_deb_path)]


class Kernel(Strict):
    """The kernel under test, from one of: a Debian package of SUITE (`package`, `version`;
    a meta package such as linux-image-amd64 stands for the kernel it depends on), or
    Debian package files on this machine (`debs`, relative to the recipe or absolute:
    the kernel's image and modules, and its linux-headers when modules are to be built;
    a kernel fork's packages, say), whose dependencies and compiler come from SUITE."""
    suite: Suite
    package: Package | None = None
    version: Annotated[str, _match(VERSION_RE, "Debian version or 'newest'")] = "newest"
    debs: list[DebPath] = []

    @model_validator(mode="after")
    def _one_source(self) -> Kernel:
        if (self.package is None) == (not self.debs):
            raise ValueError("give either package (a kernel package of the suite) or debs (.deb files)")
        if self.debs and self.version != "newest":
            raise ValueError("version belongs to package: .deb files carry their own")
        return self

    def describe(self) -> str:
        return f"{len(self.debs)} .deb file(s)" if self.debs else f"{self.package} ({self.version} in {self.suite})"


class Source(Strict):
    """Where an extra module's source comes from: exactly one of these."""
    kernel_source: RelPath | None = None  # inside the kernel's own linux-source-X.Y tarball
    package: Package | None = None  # a Debian package of the kernel's suite …
    path: str | None = None  # … and the file or folder it installs (absolute path)
    local: str | None = None  # a file or folder on this machine (relative to the recipe)
    url: str | None = None  # a .c file or a tarball, checked against sha256
    sha256: str | None = None
    subdir: RelPath | None = None  # the folder inside a tarball (url) holding the module

    @model_validator(mode="after")
    def _one_kind(self) -> Source:
        kinds = [k for k in ("kernel_source", "package", "local", "url") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError("one of kernel_source, package (with path), local or url (with sha256)")
        if self.package is not None and not (self.path and PurePosixPath(self.path).is_absolute()
                                             and ".." not in PurePosixPath(self.path).parts):
            raise ValueError("package needs path: the absolute path of the file or folder it installs")
        if self.path is not None and self.package is None:
            raise ValueError("path belongs to package")
        if self.url is not None:
            if not re.match(r"^https?://[^\s'\"]+$", self.url):
                raise ValueError(f"{self.url!r} is not an http(s) URL")
            if self.sha256 is None or not SHA256_RE.match(self.sha256):
                raise ValueError("a url needs sha256: the 64 hex digits of the file's SHA-256")
        elif self.sha256 is not None or self.subdir is not None:
            raise ValueError("sha256 and subdir belong to url")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in ("kernel_source", "package", "local", "url") if getattr(self, k) is not None)

    def describe(self) -> str:
        return {"kernel_source": f"{self.kernel_source} in the kernel's linux-source",
                "package": f"{self.path} of {self.package}", "local": f"{self.local}",
                "url": f"{self.url} (sha256 {str(self.sha256)[:12]}…)"}[self.kind]


class Module(Strict):
    name: ModuleName
    source: Source


class Userland(Strict):
    suite: Suite
    also: list[Suite] = []  # further suites, for packages taken from them by name: "flent/trixie"
    components: list[Annotated[str, _match(re.compile(r"^[a-z-]+\Z"), "archive component")]] = ["main"]
    #: Debian packages: a name, optionally "/SUITE" (one of `also`) and a version
    #: constraint: "iproute2>=7.0", "flent/trixie".
    packages: list[str] = []

    @model_validator(mode="after")
    def _constraints(self) -> Userland:
        for i, spec in enumerate(self.packages):
            m = CONSTRAINT_RE.match(spec)
            if not m:
                raise ValueError(f"packages[{i}]: {spec!r} is not a package name, optionally with /SUITE and "
                                 ">=, <= or = VERSION")
            if m["suite"] and m["suite"] not in self.also:
                raise ValueError(f"packages[{i}]: {spec!r} names suite {m['suite']}, which is not in also")
        return self

    def constraints(self) -> list[tuple[str, str | None, str | None]]:
        return [(m["name"], m["op"], m["version"]) for m in (CONSTRAINT_RE.match(s) for s in self.packages) if m]

    def includes(self) -> dict[str, str]:
        """Package name → what mmdebstrap installs ("flent/trixie" takes it from trixie)."""
        return {m["name"]: f"{m['name']}/{m['suite']}" if m["suite"] else m["name"]
                for m in (CONSTRAINT_RE.match(s) for s in self.packages) if m}


class Boot(Strict):
    modules: list[ModuleName] = []
    sysctls: dict[str, str | int] = {}

    @model_validator(mode="after")
    def _sysctls(self) -> Boot:
        for key, value in self.sysctls.items():
            if not BOOT_SYSCTL_RE.match(key):
                raise ValueError(f"sysctls: {key!r} is not a net.*, kernel.* or vm.* key")
            if isinstance(value, bool) or not BOOT_VALUE_RE.match(str(value)):
                raise ValueError(f"sysctls: {key}: {value!r} has characters other than letters, digits, spaces and _ . : , -")
        return self


class Recipe(Strict):
    description: str = ""
    mirror: Annotated[str, _match(re.compile(r"^https?://[A-Za-z0-9.:/_~+-]+\Z"), "mirror URL")] = "http://deb.debian.org/debian"
    kernel: Kernel
    userland: Userland
    modules: list[Module] = []
    boot: Boot = Boot()

    @model_validator(mode="after")
    def _unique(self) -> Recipe:
        names = [m.name for m in self.modules]
        if dup := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"modules: {', '.join(dup)} built twice")
        if self.kernel.debs and any(m.source.kernel_source for m in self.modules):
            raise ValueError("modules: kernel_source needs the suite's linux-source of a kernel package; "
                             "with kernel debs give the module's source as local or url")
        return self


class ImageRecipe(BaseModel):
    """A validated recipe with where it came from, its name and its hash."""
    name: str
    path: Path
    recipe: Recipe
    digest: str  # sha256 of the recipe's content and of its local sources

    def local_source(self, module: Module) -> Path:
        assert module.source.local is not None
        return (self.path.parent / module.source.local).resolve()


def find_recipe(name: str, base: Path = RECIPE_DIR) -> Path | None:
    """NAME is a recipe in images/ (without suffix) or a path to a recipe file; None if neither."""
    if "/" in name or name.endswith(SUFFIXES):
        return Path(name).resolve() if Path(name).is_file() else None
    return next((base / f"{name}{s}" for s in SUFFIXES if (base / f"{name}{s}").is_file()), None)


def recipe_names(base: Path = RECIPE_DIR) -> list[str]:
    """The recipes in BASE (NAME.example.yml files are templates to copy, not recipes)."""
    return sorted(p.stem for p in base.iterdir() if p.suffix in SUFFIXES and not p.stem.endswith(".example")) \
        if base.is_dir() else []


def load_recipe(name: str, base: Path = RECIPE_DIR) -> ImageRecipe:
    path = find_recipe(name, base)
    if path is None:
        raise FlError(f"no image recipe {name!r} (images/NAME.yml; available: {', '.join(recipe_names(base)) or 'none'})")
    try:
        image_name = check_name(path.stem, "image name")
    except ValueError as e:
        raise FlError(f"{path}: {e}") from None
    data = read_yaml(path, "an image recipe is a mapping of keys (kernel, userland, modules, boot, …)")
    try:
        recipe = Recipe.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        raise ScenarioError(path, _key_path(tuple(err["loc"])), _recipe_message(err)) from None
    _check_local_sources(path, recipe)
    _check_debs(path, recipe)
    return ImageRecipe(name=image_name, path=path, recipe=recipe, digest=_digest(path, recipe))


def _recipe_message(err: Mapping[str, Any]) -> str:
    if err["type"] == "extra_forbidden":
        return f"unknown key {err['loc'][-1]!r}"
    return _message(err)


def _check_local_sources(path: Path, recipe: Recipe) -> None:
    for i, module in enumerate(recipe.modules):
        local = module.source.local
        if local is None:
            continue
        where = (path.parent / local).resolve()
        key = f"modules[{i}].source.local"
        if where.is_file() and where.suffix != ".c":
            raise ScenarioError(path, key, f"{local!r} is neither a folder nor a .c file")
        if not where.exists():
            raise ScenarioError(path, key, f"no such file or folder {where}")


def deb_paths(path: Path, recipe: Recipe) -> list[Path]:
    """The kernel's .deb files, as the recipe at PATH names them."""
    return [(path.parent / d).resolve() for d in recipe.kernel.debs]


def _check_debs(path: Path, recipe: Recipe) -> None:
    for i, deb in enumerate(deb_paths(path, recipe)):
        if not deb.is_file():
            raise ScenarioError(path, f"kernel.debs[{i}]", f"no such file: {deb}")


#: What every guest root has besides a recipe's packages: the sshd fl drives it through,
#: python3 for the one-off kernel probe, modprobe/sysctl/mount for virtme-ng's init, and
#: the packages of fl's required tools (capabilities.REQUIRED_TOOLS). No udev: virtme-ng's init runs
#: it where the root has it, and its coldplug of QEMU's emulated hardware (SATA, CD-ROM,
#: watchdogs…) took 18 of a boot's 51 s under TCG; the guest script loads the one driver
#: fl needs (virtio_net, the NIC that carries ssh).
GUEST_PACKAGES = ("openssh-server", "python3", "kmod", "procps", "mount", "util-linux",
                  "iproute2", "ethtool", "tcpdump", "xz-utils", "flent", "netperf", "fping")


def _digest(path: Path, recipe: Recipe) -> str:
    """What decides whether a built image is current: the validated recipe, the packages
    fl adds to every guest root and the content of the recipe's local sources and kernel
    packages (a URL's content is fixed by its checksum). Where those files are is not:
    the same files named from another folder (a copy of the recipe, a fresh clone) are
    the same image."""
    dumped = recipe.model_dump()
    dumped["kernel"]["debs"] = [Path(d).name for d in recipe.kernel.debs]
    for module in dumped["modules"]:
        if module["source"]["local"] is not None:
            module["source"]["local"] = Path(module["source"]["local"]).name
    h = hashlib.sha256(json.dumps([dumped, GUEST_PACKAGES], sort_keys=True).encode())
    for deb in deb_paths(path, recipe):
        h.update(file_sha256(deb).encode())
    for module in recipe.modules:
        if module.source.local is not None:
            where = (path.parent / module.source.local).resolve()
            for f in sorted([where] if where.is_file() else (p for p in where.rglob("*") if p.is_file())):
                h.update(str(f.relative_to(where.parent)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def changed_since_built(name: str, built_digest: str) -> bool:
    """Has the recipe images/NAME.yml, or a local source it names, changed since the image
    was built from BUILT_DIGEST? (False when there is no such recipe any more.)"""
    if find_recipe(name) is None:
        return False
    try:
        return load_recipe(name).digest != built_digest
    except FlError:
        return True
