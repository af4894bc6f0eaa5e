"""The contract between fl and the roles (flharness/testbed/playbook_vars.py): every
`fl_run.X` and `fl_cell.X.Y` that roles/ and playbooks/ read
(through a host's entry too: `fl_cell.hosts[inventory_hostname].X`) is a field of the
models, and the cells of shipped scenarios hand over data that has each of them."""
from __future__ import annotations

import re
import types
import typing
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml
from pydantic import BaseModel

from flharness.cells import expand
from flharness.scenario import load_scenario
from flharness.testbed.inventory import load_inventory
from flharness.testbed.plan import DRY_RUN_ID, DRY_RUN_ROOT, cell_vars, host_dirs, playbook_extra_vars, run_vars
from flharness.testbed.playbook_vars import CellVars, HostScripts, KitVars, ModulesVars, ProbeVars, RunVars, TestbedVars

REPO = Path(__file__).resolve().parents[2]
SCRATCH = host_dirs(DRY_RUN_ID, DRY_RUN_ROOT)  # the hosts' scratch folders as rendered scripts show them
#: The variables fl hands over typed, and their types.
ROOTS: dict[str, Any] = {"fl_run": RunVars, "fl_cell": CellVars, "fl_testbed": dict[str, HostScripts]}
ANY = "*"  # the key of a step indexed by a variable (fl_cell.hosts[inventory_hostname]): any key
#: Names read as keys that are none of fl_cell's, on purpose.
NOT_KEYS = {"fl_cell.stop": "the hand-over's last word ({'stop': true}, session.py), no cell",
            "fl_cell.py": "plugins/lookup/fl_cell.py, named in a comment"}
#: One step of a chain: .get('k', …) (may be absent), ['k'], .k, or [variable] (any key).
STEP = r"""\.get\(\s*['"](\w+)['"]|\[\s*['"](\w+)['"]\s*\]|\.(\w+)|\[\s*(\w+)\s*\]"""
ROOT = "|".join(ROOTS)
CHAIN = re.compile(rf"\b({ROOT})\b((?:{STEP})+)")
ALIAS = re.compile(rf"{{%-?\s*set\s+(\w+)\s*=\s*({ROOT})((?:{STEP})*)\s*-?%}}")
SCENARIOS = ["tests/scenarios/every-feature.yml", "scenarios/s5-tunnel.yml", "scenarios/s9-tunnel-reordering.yml",
             "scenarios/s10-ect1-gaming.yml", "scenarios/demo.yml"]


class Ref(NamedTuple):
    """A chain of keys read, root first; SOFT: the indices read with .get (may be absent)."""

    where: str
    chain: tuple[str, ...]
    soft: frozenset[int]

    @property
    def name(self) -> str:
        return ".".join(self.chain)


def _steps(text: str) -> list[tuple[str, bool]]:
    return [(got or item or attr or ANY, bool(got)) for got, item, attr, _ in re.findall(STEP, text)]


def references(text: str, where: str = "<string>") -> list[Ref]:
    """Every fl_run / fl_cell key chain in TEXT, through `{% set x = fl_cell.… %}` aliases too."""
    found = [(m.group(1), _steps(m.group(2)), m.start()) for m in CHAIN.finditer(text)]
    for alias in ALIAS.finditer(text):  # t.kind after {% set t = fl_cell.tunnel %}: fl_cell.tunnel.kind
        name, root, prefix = alias.group(1), alias.group(2), _steps(alias.group(3))
        found.extend((root, prefix + _steps(m.group(1)), m.start())
                     for m in re.compile(rf"(?<![\w.]){name}((?:{STEP})+)").finditer(text, alias.end()))
    return [Ref(f"{where}:{text.count(chr(10), 0, at) + 1}", (root, *(k for k, _ in steps)),
                frozenset(i + 1 for i, (_, soft) in enumerate(steps) if soft)) for root, steps, at in found]


def template_references() -> list[Ref]:
    files = sorted(p for d in ("roles", "playbooks") for p in (REPO / d).rglob("*")
                   if p.suffix in (".j2", ".yml", ".yaml") and p.is_file())
    return [r for p in files for r in references(p.read_text(), str(p.relative_to(REPO)))]


def _choices(annotation: Any) -> list[Any]:
    """A field's types: a union's members (None too), else the one."""
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    return list(typing.get_args(annotation)) if union else [annotation]


def missing_key(ref: Ref) -> str | None:
    """The first key along REF that no model there has (as root.a.b), or None. A mapping's
    key (a host's: fl_cell.hosts[inventory_hostname]) leads to its values' type; the walk
    stops where the value is no model or mapping (a list or string: its own methods)."""
    if ref.name in NOT_KEYS:
        return None
    kinds: list[Any] = [ROOTS[ref.chain[0]]]
    for i, key in enumerate(ref.chain[1:], 1):
        values = [typing.get_args(k)[1] for k in kinds if typing.get_origin(k) is dict]
        if values:
            kinds = [k for v in values for k in _choices(v)]
            continue
        models = [k for k in kinds if isinstance(k, type) and issubclass(k, BaseModel)]
        if not models or key == ANY:
            return None
        fields = [m.model_fields[key].annotation for m in models if key in m.model_fields]
        if not fields:
            return ".".join(ref.chain[:i + 1])
        kinds = [k for f in fields for k in _choices(f)]
    return None


def absent_in(ref: Ref, data: dict[str, Any], i: int = 1) -> str | None:
    """The first key along REF (from its Ith) that DATA, as dumped, lacks where its parent
    is there; a None parent (no tunnel), a non-mapping or a .get ends the walk; a variable's
    key is looked for in every value (each host's)."""
    if ref.name in NOT_KEYS or i == len(ref.chain) or not isinstance(data, dict):
        return None
    key = ref.chain[i]
    if key == ANY:
        return next((a for v in data.values() if (a := absent_in(ref, v, i + 1))), None)
    if key not in data:
        return None if i in ref.soft else ".".join(ref.chain[:i + 1])
    return absent_in(ref, data[key], i + 1)


def reaches(ref: Ref, data: Any, i: int = 1) -> bool:
    """DATA has REF's keys all the way (or up to a list or string, whose methods it reads);
    a variable's key through some value."""
    if i == len(ref.chain):
        return True
    if data is None:
        return False
    if not isinstance(data, dict):
        return True
    key = ref.chain[i]
    if key == ANY:
        return any(reaches(ref, v, i + 1) for v in data.values())
    return key in data and reaches(ref, data[key], i + 1)


def test_the_templates_read_only_keys_the_models_have():
    refs = template_references()
    names = {r.name for r in refs}  # the cell's scripts are fl's (cell_scripts.py): the roles read few keys
    assert len(names) > 5 and {"fl_cell.hosts.*.setup", "fl_cell.hosts.*.collect", "fl_run.shared_fs",
                                "fl_testbed.*.up"} <= names
    wrong = [f"{r.where}: {key} (read as {r.name})" for r in refs if (key := missing_key(r))]
    assert not wrong, "keys the roles read that playbook_vars.py's models lack:\n" + "\n".join(wrong)


@pytest.mark.parametrize(("text", "missing"), [
    ("{{ fl_cell.nonexistent }}", "fl_cell.nonexistent"),
    ("{% if fl_cell.tunnel and fl_cell.tunel %}", "fl_cell.tunel"),
    ("x: \"{{ fl_run['nope'] | int }}\"", "fl_run.nope"),
    ("{% set h = fl_cell.hosts['cli'] %}\n{{ h.setup }} {{ h.get('colect', '') }}", "fl_cell.hosts.cli.colect"),
    ("{{ fl_run.sysctl_keys.cli.anything }} {{ fl_cell.tunnel.upper() }}", None),  # a dict's keys, a string's methods
    ("{{ fl_cell_dir }} {{ fl_run.module_params[inventory_hostname] }}", None),
    ("{{ fl_cell.hosts[inventory_hostname].capture_devv }}", "fl_cell.hosts.*.capture_devv"),
    ("{% set h = fl_cell.hosts[inventory_hostname] %}\n{{ h.cell_dir }} {{ h.state_dev }}", "fl_cell.hosts.*.state_dev"),
    ("{{ fl_cell.hosts.mid.collect }} {{ fl_cell.hosts['cli'].cell_dir }}", None),
    ("{{ fl_run.tunnels[0] }} {{ fl_run.tunnelz }}", "fl_run.tunnelz"),
    ("{{ fl_run_x }} {{ fl_cell.files[inventory_hostname].anything }}", None),
    ("{{ fl_testbed[inventory_hostname].down }} {{ fl_testbed_up.stdout }}", None),
    ("{{ fl_testbed[inventory_hostname].upp }}", "fl_testbed.*.upp"),
])
def test_the_scanner_names_the_key_a_model_lacks(text, missing):
    assert [k for r in references(text) if (k := missing_key(r))] == ([missing] if missing else [])


@pytest.fixture(scope="module")
def handed_over() -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """fl_run (as a run's testbeds get it, with its batches), each cell's fl_cell and the
    testbed's extra vars, dumped."""
    inv = load_inventory(REPO / "inventory.ini")
    cells = [c for s in SCENARIOS for c in expand(load_scenario(REPO / s), REPO / s)]
    rv = run_vars(cells, ifb=True, nft=True)
    made = [cell_vars(c, inv, Path("/results") / c.name, tcp_rewrite="tc", run_vars=rv, scratch=SCRATCH) for c in cells]
    testbed = playbook_extra_vars(DRY_RUN_ID, DRY_RUN_ROOT, inv, rv.batched(3, 16)).to_ansible()
    return rv.batched(3, 16).to_ansible(), [cv.to_ansible() for cv in made], testbed


def test_the_cells_hand_over_every_key_the_templates_read(handed_over):
    fl_run, fl_cells, testbed = handed_over
    data = [("fl_run", "fl_run", fl_run), ("fl_testbed", "fl_testbed", testbed["fl_testbed"]),
            *(("fl_cell", f"cell {i}", c) for i, c in enumerate(fl_cells, 1))]
    refs = template_references()
    lacking = {f"{r.where}: {who} lacks {key}" for r in refs for root, who, d in data
               if r.chain[0] == root and (key := absent_in(r, d))}
    assert not lacking, "\n".join(sorted(lacking))
    whole = sorted({r.name for r in refs if r.name not in NOT_KEYS
                    and not any(reaches(r, d) for root, _, d in data if root == r.chain[0])})
    assert not whole, f"no cell of {SCENARIOS} has these whole (cover them with another scenario): {whole}"


def test_a_handed_over_cell_lacking_a_key_is_named():
    ref, = references("{{ fl_cell.ecn.dev }}")
    assert absent_in(ref, {"ecn": {"at": "mid", "tc": False}}) == "fl_cell.ecn.dev"
    assert absent_in(ref, {"ecn": None}) is None  # no ECN rewrites: the templates test fl_cell.ecn first
    host, = references("{{ fl_cell.hosts[inventory_hostname].capture_dev }}")
    assert absent_in(host, {"hosts": {"cli": {"capture_dev": "cli.r"}, "mid": {}}}) == "fl_cell.hosts.*.capture_dev"
    assert absent_in(host, {"hosts": {"cli": {"capture_dev": "cli.r"}}}) is None


RULE = re.compile(r"\bif\b|\bhostvars\b|\bmap\(|\bselect|inventory_hostname ==|\bsplit\(|[!=]=")


@pytest.mark.parametrize("path", ["playbooks/group_vars/all.yml"])
def test_the_defaults_and_group_vars_decide_nothing(path):
    """Rules (which devices, which folder, which peer, which arguments) are decided in
    Python once (plan.py, cell_scripts.py: the cell role has no defaults left), the
    playbooks' group_vars only look up what fl handed over (issue 40)."""
    defaults = yaml.safe_load((REPO / path).read_text()) or {}
    ruled = {k: v for k, v in defaults.items() if RULE.search(str(v))}
    assert not ruled, f"rules in {path} (decide them in plan.py): {ruled}"


def test_every_key_of_a_cell_that_reaches_the_hosts_is_read(handed_over):
    """fl_cell, as the hosts get it, holds only what roles/ or playbooks/ read (the cell's
    scripts carry the rest): a field whose reader goes is dropped with it (issue 40)."""
    _, fl_cells, _ = handed_over
    read = {r.name for r in template_references()}
    sent = {f"fl_cell.{k}" for c in fl_cells for k in c if k != "hosts"} | \
           {f"fl_cell.hosts.*.{k}" for c in fl_cells for v in c["hosts"].values() for k in v}
    unread = sorted(sent - read)
    assert not unread, f"fl_cell keys the hosts get and no role reads: {unread}"


def test_every_extra_var_fl_hands_over_is_read():
    """Each of the extra vars every playbook gets (plan.playbook_extra_vars) is read by
    roles/, playbooks/ or an inventory (fl_testbed_id names namespaces): none is left
    behind when its reader goes, as fl_srv_bind and the ports fl_servers_argv replaced."""
    inv = load_inventory(REPO / "inventory.ini")
    handed = playbook_extra_vars(DRY_RUN_ID, DRY_RUN_ROOT, inv, run_vars([], ifb=True, nft=True)).to_ansible()
    assert "fl_servers_argv" in handed
    files = [p for d in ("roles", "playbooks") for p in (REPO / d).rglob("*")
             if p.suffix in (".j2", ".yml", ".yaml") and p.is_file()] + sorted(REPO.glob("*.ini"))
    code = "\n".join(line for p in files for line in p.read_text().splitlines() if not line.lstrip().startswith("#"))
    unread = [k for k in handed if not re.search(rf"\b{k}\b", code)]
    assert not unread, f"extra vars no role, playbook or inventory reads: {unread}"


#: Playbooks whose extra vars are names of their own: the model, the names' prefix, the files that read them.
OWN_NAMES: dict[type[BaseModel], tuple[str, list[str]]] = {
    ProbeVars: ("fl_probe_", ["playbooks/probe.yml"]),
    ModulesVars: ("fl_kit", ["playbooks/modules.yml", "roles/modules"]),
}


def _set_here(node: Any) -> set[str]:
    """The names a playbook or role makes itself: what its tasks register, and their vars."""
    if isinstance(node, list):
        return set().union(*map(_set_here, node)) if node else set()
    if not isinstance(node, dict):
        return set()
    own = {node["register"]} if "register" in node else set()
    own |= set(node["vars"]) if isinstance(node.get("vars"), dict) else set()
    return own.union(*map(_set_here, node.values()))


@pytest.mark.parametrize("model", OWN_NAMES, ids=lambda m: m.__name__)
def test_the_probe_and_the_module_load_read_exactly_what_their_models_hand_over(model):
    """Every fl_probe_* (fl_kit*) name probe.yml (modules.yml and its role) reads and does
    not make itself is a field of its model, and every field is read: a var added on one
    side only fails here. fl_kits' entries are read through KitVars' fields only."""
    prefix, paths = OWN_NAMES[model]
    files = [f for p in paths for f in (sorted((REPO / p).rglob("*.yml")) if (REPO / p).is_dir() else [REPO / p])]
    code = "\n".join(line for f in files for line in f.read_text().splitlines() if not line.lstrip().startswith("#"))
    made = set().union(*(_set_here(yaml.safe_load(f.read_text())) for f in files))
    read = set(re.findall(rf"\b{prefix}\w*", code)) - made
    assert read == set(model.model_fields), (sorted(read), sorted(model.model_fields))
    entry_keys = set(re.findall(r"\bfl_kits\[[^\]]*\]\.(\w+)", code))
    assert entry_keys <= set(KitVars.model_fields) and (model is not ModulesVars or entry_keys), entry_keys


def _made_here(node: Any) -> set[str]:
    """_set_here, and the facts tasks set and the loop variables they name."""
    if isinstance(node, list):
        return set().union(*map(_made_here, node)) if node else set()
    if not isinstance(node, dict):
        return set()
    own = _set_here(node) if "register" in node or "vars" in node else set()
    own |= set(node["ansible.builtin.set_fact"]) if isinstance(node.get("ansible.builtin.set_fact"), dict) else set()
    own |= {node["loop_var"]} if "loop_var" in node else set()
    return own.union(*map(_made_here, node.values()))


def unknown_names(code: str, made: set[str]) -> list[str]:
    """The fl_* names CODE reads that are neither an inventory key (HostVars), an extra var
    fl hands over (each playbook's models, playbook_extra_vars), a plugin of fl's, nor a
    name the playbooks make themselves (MADE)."""
    from flharness.testbed.host_vars import HostVars
    known = set(HostVars.model_fields) | set(TestbedVars.model_fields) | set(ROOTS) | set(ProbeVars.model_fields) | \
        set(ModulesVars.model_fields) | {p.stem for p in (REPO / "plugins").rglob("fl_*.py")}
    return sorted(set(re.findall(r"\bfl_\w+", code)) - known - made)


def test_every_fl_variable_the_playbooks_read_is_an_inventory_key_or_handed_over():
    """An `fl_*` name roles/ or playbooks/ read is a field of the inventory's model
    (testbed/host_vars.py: typed, checked when the inventory is read), an extra var of a
    model or of playbook_extra_vars, or one they make themselves: a key read from the
    inventory that the model lacks fails here (and would be refused in an inventory)."""
    files = [p for d in ("roles", "playbooks") for p in (REPO / d).rglob("*")
             if p.suffix in (".j2", ".yml", ".yaml") and p.is_file()]
    code = "\n".join(line for p in files for line in p.read_text().splitlines() if not line.lstrip().startswith("#"))
    made = set().union(*(_made_here(yaml.safe_load(p.read_text())) for p in files if p.suffix != ".j2"))
    made |= {k for p in files if p.parent.name in ("vars", "defaults", "group_vars") for k in yaml.safe_load(p.read_text()) or {}}
    assert not unknown_names(code, made), unknown_names(code, made)
    assert unknown_names(code + "\n{{ hostvars['mid'].fl_mtu }}", made) == ["fl_mtu"]
