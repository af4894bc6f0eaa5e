"""An image from a kernel's .deb files, with a congestion control module of the
project's own, end to end (the GENI lab's experiment 9). apt downloads Debian 12's kernel
(its image and headers .deb files, from bookworm's main suite: another kernel than the
l4s image's and than /boot's); a recipe like images/geni.yml but naming those files
builds images/modules/tcp_exp.c for it; `fl image list` shows the kernel's release and
the module; tests/scenarios/vm-geni-exp.yml runs one exp flow and one Reno flow through
the same 30-packet FIFO in that image (the virtual clock). Beside that run, in a VM of its
own, the same kernel laid out as a kernel build tree (`--vm TREE`) runs
tests/scenarios/vm-tree.yml. Checks read the image's files and the runs': the manifest's
.deb files and their sha256, the module's vermagic and sha256, the kernel each guest ran,
the client's socket samples (which name the flow's congestion control, and its ssthresh
after each loss).
Selected with `pytest -m vm`.
"""
from __future__ import annotations

import hashlib
import re
import statistics
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from flrun import REPO, needs_vm, run_fl, run_fl_together
from resultlib import find

from flharness.image.store import load_image

pytestmark = [pytest.mark.vm, needs_vm()]
IMAGE = "geni-debs"
SCENARIO = Path(__file__).parents[1] / "scenarios" / "vm-geni-exp.yml"
TREE_SCENARIO = Path(__file__).parents[1] / "scenarios" / "vm-tree.yml"


def bookworm_kernel_debs(folder: Path) -> list[Path]:
    """The .deb files of bookworm main's kernel (image and headers), downloaded by this
    machine's apt into FOLDER (apt's lists only read)."""
    madison = subprocess.run(["apt-cache", "madison", "linux-image-amd64"], capture_output=True, text=True).stdout
    version = next(line.split("|")[1].strip() for line in madison.splitlines() if " bookworm/main " in line)
    depends = subprocess.run(["apt-cache", "depends", f"linux-image-amd64={version}"], capture_output=True, text=True).stdout
    image = re.search(r"Depends: (linux-image-[\d.]+-\d+-amd64)", depends).group(1)
    headers = image.replace("linux-image-", "linux-headers-")
    subprocess.run(["apt-get", "download", f"{image}={version}", f"{headers}={version}"], cwd=folder, check=True,
                   capture_output=True)
    return sorted(folder.glob("*.deb"))


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The image built (the build tree laid out meanwhile), then its run and the tree's
    run at once, one VM each."""
    folder = tmp_path_factory.mktemp("geni-debs")
    debs = bookworm_kernel_debs(folder)
    recipe = yaml.safe_load((REPO / "images" / "geni.yml").read_text())
    recipe["kernel"] = {"suite": "bookworm", "debs": [str(d) for d in debs]}
    recipe["modules"][0]["source"]["local"] = str(REPO / "images" / "modules" / "tcp_exp.c")
    (folder / f"{IMAGE}.yml").write_text(yaml.safe_dump(recipe))
    tree = tmp_path_factory.mktemp("geni-tree") / "linux"
    with ThreadPoolExecutor(max_workers=1) as pool:
        laid_out = pool.submit(lay_out_as_a_build_tree, image_deb(debs), tree)
        build = run_fl("image", "build", str(folder / f"{IMAGE}.yml"), timeout=1200)
        release = laid_out.result()
    assert build.returncode == 0, build.stdout + build.stderr
    results, tree_results = tmp_path_factory.mktemp("geni-results"), tmp_path_factory.mktemp("tree-results")
    virtual = ["--vm-accel", "tcg", "--vm-clock", "virtual"]
    run, tree_run = run_fl_together(
        (["run", str(SCENARIO), "--vm", IMAGE, *virtual, "--results", str(results)], 1800),
        (["run", str(TREE_SCENARIO), "--vm", str(tree), *virtual, "--results", str(tree_results)], 1800))
    return {"debs": debs, "image": load_image(IMAGE), "list": run_fl("image", "list", timeout=120),
            "run": run, "root": results / "default",
            "tree": {"release": release, "run": tree_run, "root": tree_results / "default"}}


def image_deb(debs: list[Path]) -> Path:
    return next(d for d in debs if d.name.startswith("linux-image-"))


def ss_samples(cell_dir: Path, cc: str) -> list[dict[str, int]]:
    """cwnd and ssthresh of the flow's connection (CC named) in each of the client's
    socket samples (ss -tin, once a second), netperf's control connection aside."""
    out = []
    for block in (cell_dir / "cli.ss.log").read_text().split("\nESTAB")[1:]:
        head, _, rest = block.partition("\n")
        if ":12865" in head or not re.search(rf"^\s*(\w+ )*{cc} ", rest, re.M):
            continue
        found = dict(re.findall(r"\b(cwnd|ssthresh):(\d+)", rest))
        out.append({k: int(v) for k, v in found.items()})
    return out


def test_the_image_holds_the_kernel_of_the_deb_files(lab):
    """The manifest names each .deb file with its sha256; the kernel's release is the one
    the image package installs, and the one the guest ran (uname, in each cell's record)."""
    m = lab["image"].manifest
    assert m.kernel.debs == {d.name: hashlib.sha256(d.read_bytes()).hexdigest() for d in lab["debs"]}
    assert image_deb(lab["debs"]).name.startswith(f"linux-image-{m.kernel.release}_")
    assert (lab["image"].root / m.kernel.vmlinuz).is_file()
    for cc in ("exp", "reno"):
        rec, _, _ = find(lab["root"], "vm-geni-exp", cc=cc)
        assert rec["kernel"] == m.kernel.release, (rec["kernel"], m.kernel.release)


def test_the_module_is_built_for_the_images_kernel(lab):
    m = lab["image"].manifest
    (module,) = m.modules
    ko = lab["image"].root / module.path
    assert module.name == "tcp_exp" and module.vermagic.split()[0] == m.kernel.release
    assert hashlib.sha256(ko.read_bytes()).hexdigest() == module.sha256
    assert re.search(rf"^{IMAGE} .*built: tcp_exp", lab["list"].stdout, re.M), lab["list"].stdout


def test_the_flow_runs_the_module_and_decreases_as_its_parameter_says(lab):
    """Both cells ran, each flow with the declared congestion control (fl's check of the
    socket samples, and this test's own reading of them). After each loss Reno halves its
    window and exp keeps 3/4 of it (beta = 768/1024): through the same FIFO, exp's
    ssthresh settles at about 1.5 times Reno's."""
    p = lab["run"]
    assert p.returncode == 0, p.stdout + p.stderr
    ssthresh = {}
    for cc in ("exp", "reno"):
        rec, _, d = find(lab["root"], "vm-geni-exp", cc=cc)
        assert rec["status"] == "ok" and rec["checks"]["cc"]["observed"] == [cc], rec["checks"]["cc"]
        samples = [s for s in ss_samples(d, cc) if "ssthresh" in s]
        assert len(samples) >= 5, samples
        ssthresh[cc] = statistics.median(s["ssthresh"] for s in samples)
    assert 1.3 <= ssthresh["exp"] / ssthresh["reno"] <= 1.7, ssthresh


def lay_out_as_a_build_tree(image_deb: Path, tree: Path) -> str:
    """The kernel of IMAGE_DEB where `make` leaves one in a kernel tree: bzImage, .config,
    the release, and each module at its place with modules.order listing them (no kernel
    is compiled in CI: a build takes hours on its 2 cores). Returns the release."""
    unpacked = tree.parent / "unpacked"
    subprocess.run(["dpkg-deb", "-x", str(image_deb), str(unpacked)], check=True)
    (config,) = (unpacked / "boot").glob("config-*")
    release = config.name.removeprefix("config-")
    mods = next(p for p in (unpacked / "lib/modules" / release, unpacked / "usr/lib/modules" / release) if p.is_dir())
    for src, dst in ((config, ".config"), (unpacked / "boot" / f"vmlinuz-{release}", "arch/x86/boot/bzImage"),
                     (unpacked / "boot" / f"System.map-{release}", "System.map"),
                     (mods / "modules.builtin", "modules.builtin"),
                     (mods / "modules.builtin.modinfo", "modules.builtin.modinfo")):
        (tree / dst).parent.mkdir(parents=True, exist_ok=True)
        (tree / dst).symlink_to(src)
    (tree / "include/config").mkdir(parents=True)
    (tree / "include/config/kernel.release").write_text(release + "\n")
    order = []
    for ko in sorted((mods / "kernel").rglob("*.ko*")):
        rel = ko.relative_to(mods / "kernel")
        if ko.suffix == ".xz":  # a tree holds them uncompressed
            rel = rel.with_suffix("")
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["xz", "-dc", str(ko)], stdout=(tree / rel).open("wb"), check=True)
        else:
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            (tree / rel).symlink_to(ko)
        order.append(str(rel))
    (tree / "modules.order").write_text("\n".join(order) + "\n")
    return release


def test_a_kernel_build_tree_boots_with_its_own_modules(lab):
    """`--vm TREE`: the guest runs the tree's kernel (the .deb files' release, which
    neither /boot nor /lib/modules of this machine has) on this machine's userland, and
    loads the tree's modules: netem and fq_codel, modules of that kernel, shape the cell."""
    release, p = lab["tree"]["release"], lab["tree"]["run"]
    assert not Path("/lib/modules", release).exists() and not Path("/boot", f"vmlinuz-{release}").exists()
    assert p.returncode == 0, p.stdout + p.stderr
    rec, _, d = find(lab["tree"]["root"], "vm-tree", cc="cubic")
    assert rec["status"] == "ok" and rec["kernel"] == release, rec
    log = (d / "teardown.log").read_text()
    assert re.search(r"^qdisc fq_codel ", log, re.M) and re.search(r"^qdisc netem ", log, re.M), log
