"""Image recipes (images/NAME.yml): the schema, and bad recipes refused in one line that
names the file and the key, before anything is built."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from flharness.errors import FlError, ScenarioError
from flharness.image.build import supports
from flharness.image.debian import apt_options, source_lines
from flharness.image.recipe import RECIPE_DIR, load_recipe

GOOD = """\
kernel: {suite: trixie-backports, package: linux-image-amd64}
userland: {suite: sid, packages: [iproute2>=7.0, flent]}
modules:
  - name: sch_dualpi2
    source: {kernel_source: net/sched/sch_dualpi2.c}
boot: {modules: [sch_dualpi2], sysctls: {net.core.default_qdisc: fq}}
"""


def write(tmp_path: Path, text: str, name: str = "lab.yml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def error(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as e:
        load_recipe(str(path))
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: "), message
    return message.removeprefix(f"{path}: ")


def test_the_shipped_l4s_recipe():
    image = load_recipe("l4s")
    r = image.recipe
    assert image.name == "l4s" and image.path == RECIPE_DIR / "l4s.yml"
    assert (r.kernel.suite, r.kernel.package, r.kernel.version) == ("trixie-backports", "linux-image-amd64", "newest")
    assert r.userland.suite == "sid"
    assert ("iproute2", ">=", "7.0") in r.userland.constraints()
    assert [(m.name, m.source.kind) for m in r.modules] == [("sch_dualpi2", "kernel_source"), ("tcp_prague", "local")]
    assert r.boot.modules == ["sch_dualpi2", "tcp_dctcp", "tcp_prague"]
    for tool in ("flent", "netperf", "irtt", "fping", "tcpdump", "iperf", "nftables", "wireguard-tools", "ethtool"):
        assert tool in {name for name, _, _ in r.userland.constraints()}, tool


def test_a_good_recipe_and_its_digest(tmp_path):
    a = load_recipe(str(write(tmp_path, GOOD)))
    assert a.recipe.boot.sysctls == {"net.core.default_qdisc": "fq"}
    b = load_recipe(str(write(tmp_path, GOOD.replace("flent]", "flent, irtt]"))))
    assert a.digest != b.digest


def test_a_package_from_another_suite():
    r = load_recipe("l4s").recipe.userland
    assert "trixie" in r.also and r.includes()["flent"] == "flent/trixie" and r.includes()["iproute2"] == "iproute2"


def test_a_local_source_is_part_of_the_digest(tmp_path):
    src = tmp_path / "prague"
    src.mkdir()
    (src / "tcp_prague.c").write_text("/* v1 */\n")
    text = GOOD.replace("{kernel_source: net/sched/sch_dualpi2.c}", "{local: prague}")
    first = load_recipe(str(write(tmp_path, text))).digest
    (src / "tcp_prague.c").write_text("/* v2 */\n")
    assert load_recipe(str(write(tmp_path, text))).digest != first


@pytest.mark.parametrize(("text", "key", "says"), [
    (GOOD + "colour: blue\n", "colour", "unknown key 'colour'"),
    (GOOD.replace("package: linux-image-amd64", "version: newest"), "kernel", "give either package"),
    (GOOD.replace("package: linux-image-amd64", "package: linux-image-amd64, debs: [k.deb]"), "kernel",
     "give either package"),
    (GOOD.replace("package: linux-image-amd64", "debs: [k.deb], version: '6.1'"), "kernel", "version belongs to package"),
    (GOOD.replace("package: linux-image-amd64", "debs: ['k.deb; reboot']"), "kernel.debs[0]", "not the path of a .deb"),
    (GOOD.replace("package: linux-image-amd64", "debs: [no/such.deb]").split("modules:")[0], "kernel.debs[0]",
     "no such file"),
    (GOOD.replace("package: linux-image-amd64", "debs: [k.deb]"), "(top level)", "kernel_source needs the suite's linux-source"),
    (GOOD.replace("kernel: {suite: trixie-backports, package: linux-image-amd64}\n", ""), "kernel",
     "required key is missing"),
    (GOOD.replace("net/sched/sch_dualpi2.c", "../../etc/shadow"), "modules[0].source.kernel_source",
     "not a relative path"),
    (GOOD.replace("net/sched/sch_dualpi2.c", "/etc/shadow"), "modules[0].source.kernel_source",
     "not a relative path"),
    (GOOD.replace("{kernel_source: net/sched/sch_dualpi2.c}", "{local: no/such/folder}"),
     "modules[0].source.local", "no such file or folder"),
    (GOOD.replace("{kernel_source: net/sched/sch_dualpi2.c}", "{url: 'https://example.org/prague.tar.gz'}"),
     "modules[0].source", "a url needs sha256"),
    (GOOD.replace("{kernel_source: net/sched/sch_dualpi2.c}", "{url: 'https://example.org/p.tgz', sha256: abc}"),
     "modules[0].source", "a url needs sha256"),
    (GOOD.replace("{kernel_source: net/sched/sch_dualpi2.c}", "{url: 'file:///etc/shadow', sha256: " + "ab" * 32 + "}"),
     "modules[0].source", "is not an http(s) URL"),
    (GOOD.replace("{kernel_source: net/sched/sch_dualpi2.c}", "{package: foo-dkms}"), "modules[0].source",
     "package needs path"),
    (GOOD.replace("{kernel_source: net/sched/sch_dualpi2.c}", "{kernel_source: a.c, local: b}"), "modules[0].source",
     "one of kernel_source"),
    (GOOD.replace("package: linux-image-amd64", "package: 'linux;rm -rf /'"), "kernel.package", "not a Debian package name"),
    (GOOD.replace("suite: sid", "suite: 'sid main'"), "userland.suite", "not a Debian suite"),
    (GOOD.replace("iproute2>=7.0", "'iproute2 >> 7'"), "userland", "is not a package name"),
    (GOOD.replace("flent]", "flent/trixie]"), "userland", "names suite trixie, which is not in also"),
    (GOOD.replace("name: sch_dualpi2", "name: sch-dualpi2"), "modules[0].name", "not a kernel module name"),
    (GOOD.replace("net.core.default_qdisc: fq", "fs.suid_dumpable: 1"), "boot", "not a net.*, kernel.* or vm.* key"),
    (GOOD.replace("net.core.default_qdisc: fq", "net.core.default_qdisc: '$(reboot)'"), "boot", "characters other"),
])
def test_bad_recipes_are_refused_naming_file_and_key(tmp_path, text, key, says):
    message = error(tmp_path, text)
    assert message.startswith(f"{key}: "), message
    assert says in message, message


def test_a_kernel_from_deb_files(tmp_path):
    """debs name .deb files relative to the recipe; their content is part of the digest."""
    deb = tmp_path / "debs" / "linux-image-6.1.0-9-amd64_6.1.1-1_amd64.deb"
    deb.parent.mkdir()
    deb.write_bytes(b"v1")
    text = GOOD.replace("package: linux-image-amd64", "debs: [debs/linux-image-6.1.0-9-amd64_6.1.1-1_amd64.deb]")
    text = text.replace("{kernel_source: net/sched/sch_dualpi2.c}", "{local: m.c}")
    (tmp_path / "m.c").write_text("/* a module */\n")
    first = load_recipe(str(write(tmp_path, text)))
    assert first.recipe.kernel.describe() == "1 .deb file(s)" and first.recipe.kernel.package is None
    deb.write_bytes(b"v2")
    assert load_recipe(str(write(tmp_path, text))).digest != first.digest


def test_an_example_recipe_is_no_recipe():
    from flharness.image.recipe import recipe_names
    assert "l4s-prague.example" not in recipe_names() and {"l4s", "geni"} <= set(recipe_names())


def test_a_recipe_file_that_is_no_mapping(tmp_path):
    message = error(tmp_path, "- just\n- a list\n")
    assert "mapping" in message


def test_an_unknown_image_name_lists_the_recipes():
    with pytest.raises(FlError, match=r"no image recipe 'nope'.*l4s"):
        load_recipe("nope")


def test_backports_come_with_their_base_suite_and_sid_with_an_expired_release_allowed():
    assert source_lines("http://m/debian", "trixie-backports", ["main"]) == [
        "deb http://m/debian trixie main", "deb http://m/debian trixie-backports main"]
    assert source_lines("http://m/debian", "sid", ["main", "non-free"]) == ["deb http://m/debian sid main non-free"]
    assert any("Check-Valid-Until" in o for o in apt_options("sid"))
    assert not any("Check-Valid-Until" in o for o in apt_options("trixie", "trixie-backports"))
    snapshot = "http://snapshot.debian.org/archive/debian/20261127T000000Z"  # the archive as it was: all expired
    assert any("Check-Valid-Until" in o for o in apt_options("trixie", "trixie-backports", mirrors=(snapshot,)))


def test_what_an_image_supports_comes_from_its_kernel_config(tmp_path):
    config = tmp_path / "config"
    config.write_text("CONFIG_NET_SCH_NETEM=m\nCONFIG_NET_SCH_FQ_CODEL=y\n# CONFIG_NET_SCH_DUALPI2 is not set\n"
                      "CONFIG_TCP_CONG_DCTCP=m\nCONFIG_TCP_CONG_CUBIC=y\n")
    assert supports(config, ["sch_dualpi2"]) == {"qdiscs": ["dualpi2", "fq_codel", "netem"], "ccs": ["cubic", "dctcp"]}


def test_the_same_files_named_from_elsewhere_are_the_same_image(tmp_path):
    """A copy of a recipe naming copies of its .deb file and module source by absolute
    paths (another folder, a fresh clone) has the same digest: the content decides."""
    def lay_out(folder: Path, module: bytes) -> str:
        folder.mkdir()
        (folder / "linux-image-6.1.0-9-amd64_6.1.1-1_amd64.deb").write_bytes(b"kernel")
        (folder / "m.c").write_bytes(module)
        text = GOOD.replace("package: linux-image-amd64", f"debs: [{folder}/linux-image-6.1.0-9-amd64_6.1.1-1_amd64.deb]")
        return load_recipe(str(write(tmp_path, text.replace("{kernel_source: net/sched/sch_dualpi2.c}",
                                                             f"{{local: {folder}/m.c}}"), f"{folder.name}.yml"))).digest
    a, b = lay_out(tmp_path / "a", b"/* m */\n"), lay_out(tmp_path / "b", b"/* m */\n")
    assert a == b and lay_out(tmp_path / "c", b"/* m, changed */\n") != a
