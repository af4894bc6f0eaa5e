"""fl's modules for a host's kernel (image/kit.py, run/kit_loading.py): which kernel a
kit is built for, how its modules are handed to fl-load-modules, and that script's
decisions, run against stand-ins for modinfo, modprobe and insmod."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from flharness.errors import FlError
from flharness.image.kit import Kit, for_release, valid_release
from flharness.image.recipe import load_recipe
from flharness.image.store import ModuleRecord
from flharness.run.kit_loading import LOADER, _said, specs


def test_a_release_is_checked_before_it_names_a_package_or_folder():
    assert valid_release("7.3.4+deb13-amd64") == "7.3.4+deb13-amd64"
    for bad in ("../7.3", "7.3 ; rm -rf /", "", "linux-7.3", "7.3.4+deb13-amd64/x"):
        with pytest.raises(FlError, match="not a kernel release"):
            valid_release(bad)


def test_the_kit_recipe_is_the_image_recipes_modules_for_the_releases_kernel():
    image = load_recipe("l4s")
    kit = for_release(image, "7.3.4+deb13-amd64", None)
    assert kit.recipe.kernel.package == "linux-image-7.3.4+deb13-amd64"
    assert kit.recipe.kernel.suite == image.recipe.kernel.suite == "trixie-backports"
    assert kit.recipe.modules == image.recipe.modules and kit.digest == image.digest
    assert for_release(image, "6.12.9-amd64", "trixie").recipe.kernel.suite == "trixie"


def test_modules_of_the_kernels_own_source_are_the_kernels_first():
    kit = Kit(release="7.3.4+deb13-amd64", kernel_version="7.3.4-1~bpo13+1", suite="trixie-backports", recipe="l4s",
              recipe_sha256="x", built=0, build_seconds=0, fl={},
              modules=[ModuleRecord(name=n, source="", path=f"{n}.ko", vermagic="", sha256="") for n in
                       ("sch_dualpi2", "tcp_prague")])
    assert specs(kit) == ["sch_dualpi2:kernel-first", "tcp_prague"]


def test_the_loaders_lines_are_read_and_anything_else_is_an_error():
    said = _said('{"module": "tcp_prague", "status": "loaded", "detail": "/run/fl/modules/tcp_prague.ko"}\n', "cli")
    assert said == [{"module": "tcp_prague", "status": "loaded", "detail": "/run/fl/modules/tcp_prague.ko", "host": "cli"}]
    with pytest.raises(FlError, match="printed 'insmod: ERROR'"):
        _said("insmod: ERROR\n", "cli")


def stand_ins(tmp: Path, srcversion: str, insmod_rc: int, modprobe_rc: int) -> dict[str, str]:
    """modinfo (every file's srcversion is SRCVERSION, no dependencies), modprobe and insmod
    that log their arguments and exit as told."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(parents=True)
    scripts = {"modinfo": f'case "$2" in srcversion) echo {srcversion} ;; depends) echo ;; *) echo /x.ko ;; esac',
               "modprobe": f'echo "modprobe $*" >> {tmp}/calls; exit {modprobe_rc}',
               "insmod": f'echo "insmod $*" >> {tmp}/calls; echo "insmod: ERROR: could not insert" >&2; exit {insmod_rc}'}
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def load(tmp: Path, *specs_: str, srcversion: str = "ABC", insmod_rc: int = 0, modprobe_rc: int = 1,
         loaded: dict[str, str | None] | None = None):
    """fl-load-modules on SPECS_ with the stand-ins, and a /sys/module holding LOADED (name →
    its srcversion, None: a module without one)."""
    env = stand_ins(tmp, srcversion, insmod_rc, modprobe_rc)
    sys_module = tmp / "sys-module"
    for name, version in (loaded or {}).items():
        (sys_module / name).mkdir(parents=True)
        if version is not None:
            (sys_module / name / "srcversion").write_text(version + "\n")
    env["FL_SYS_MODULE"] = str(sys_module)
    p = subprocess.run([str(LOADER), str(tmp / "kit"), *specs_], capture_output=True, text=True, env=env)
    calls = (tmp / "calls").read_text().splitlines() if (tmp / "calls").exists() else []
    return p.returncode, [json.loads(line) for line in p.stdout.splitlines()], calls


def test_a_module_the_kernel_lacks_is_inserted_from_the_kit(tmp_path):
    rc, said, calls = load(tmp_path, "tcp_prague")
    assert rc == 0 and said[0]["status"] == "loaded" and said[0]["detail"] == f"{tmp_path}/kit/tcp_prague.ko"
    assert calls == [f"insmod {tmp_path}/kit/tcp_prague.ko"]  # fl's own: no modprobe of the kernel's


def test_the_kernels_own_build_comes_first_where_it_has_one(tmp_path):
    rc, said, calls = load(tmp_path, "sch_dualpi2:kernel-first", modprobe_rc=0)
    assert rc == 0 and said[0]["status"] == "kernel" and calls == ["modprobe -q sch_dualpi2"]


def test_a_failed_insert_is_said_with_the_kernels_words(tmp_path):
    rc, said, _ = load(tmp_path, "sch_dualpi2:kernel-first", "tcp_prague", insmod_rc=1)
    assert rc == 1 and [s["status"] for s in said] == ["failed", "failed"], said
    assert "could not insert" in said[0]["detail"], said


def test_a_loaded_module_is_kept_or_refused_by_its_srcversion(tmp_path):
    """The kit's own build (the same srcversion), or one without a srcversion (built in, or
    built without one), is taken as is; another build of it is refused, naming rmmod."""
    rc, said, calls = load(tmp_path, "tcp_prague", "sch_dualpi2", loaded={"tcp_prague": "ABC", "sch_dualpi2": None})
    assert rc == 0 and [s["status"] for s in said] == ["already", "already"] and calls == [], said
    rc, said, calls = load(tmp_path / "other", "tcp_prague", loaded={"tcp_prague": "FROM-A-FORK"})
    assert rc == 1 and said[0]["status"] == "refused" and "rmmod tcp_prague" in said[0]["detail"] and calls == [], said


def test_fl_check_points_a_73_kernel_to_the_kit_and_older_ones_not():
    from flharness.check import kit_hint
    assert "./fl modules build --release 7.3.4+deb13-amd64" in kit_hint("7.3.4+deb13-amd64")
    assert "--load-modules" in kit_hint("7.10.1-amd64")
    assert kit_hint("6.18.44-fc-v669") == kit_hint(None) == ""


def test_a_module_another_host_of_the_same_kernel_loaded_meanwhile_is_no_failure(tmp_path):
    """Hosts sharing one kernel (namespaces of one machine as an ssh testbed) load at once:
    an insert that fails because the other host's just loaded the same build (File exists)
    is `already`; a different build loaded meanwhile is refused."""
    for version, status, rc_wanted in (("ABC", "already", 0), ("OTHER", "refused", 1)):
        tmp = tmp_path / version
        env = stand_ins(tmp, "ABC", 1, 1)
        sys_module = tmp / "sys-module"
        (tmp / "bin" / "insmod").write_text(  # the other host's insert lands first
            f"#!/bin/sh\nmkdir -p {sys_module}/tcp_prague; echo {version} > {sys_module}/tcp_prague/srcversion\n"
            "echo 'insmod: ERROR: could not insert module: File exists' >&2; exit 1\n")
        env["FL_SYS_MODULE"] = str(sys_module)
        p = subprocess.run([str(LOADER), str(tmp / "kit"), "tcp_prague"], capture_output=True, text=True, env=env)
        (said,) = [json.loads(line) for line in p.stdout.splitlines()]
        assert p.returncode == rc_wanted and said["status"] == status, said
        assert status != "already" or "loaded meanwhile" in said["detail"], said
