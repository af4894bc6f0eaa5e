"""Every input file loads or fails in one line naming the file and the key: scenario files
(every key of the schema, and an `expect:` entry's), reference files, findings files and
image recipes, each taken from a valid one and mutated by Hypothesis (wrong types, NaN and
infinities, negative and huge numbers, deep nesting, long and non-ASCII strings, shell
metacharacters, unknown keys). A traceback of any other kind is a bug the test names.
Bounded: a fixed number of examples per test, derandomized (FL_FUZZ_EXAMPLES for more)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flharness.cells import expand
from flharness.errors import FlError
from flharness.image.recipe import load_recipe
from flharness.scenario import load_scenario
from flharness.scenario.findings import load_findings
from flharness.scenario.reference import load_reference
from flharness.scenario.schema import AXES

EXAMPLES = int(os.environ.get("FL_FUZZ_EXAMPLES", "0")) or 40
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
REPO = Path(__file__).parents[2]

SCENARIO: dict[str, Any] = {
    "description": "fuzz", "test": "tcp_2up", "length": 10, "step_size": 0.2, "rate": "10mbit", "rtt": "20ms",
    "qdisc": "pfifo limit 100", "sysctls": {"cli": {"net.ipv4.tcp_ecn": 1}},
    "matrix": {"cc": ["cubic-vs-reno", "bbr"], "ecn": [["ect1", "none"]]},
    "expect": [{"metric": "jain", ">=": "0.5 * flows / flows"}],
    "analysis": {"steady_window": "5s"}, "include": [{"cc": "bbr"}, {"cc": "cubic-vs-reno"}],
}
NASTY_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["$(reboot)", "`id`", "a;b", "../../etc/passwd", "/etc/shadow", "{{ 7*7 }}", "{% for %}",
                     "x" * 5000, "é中\u202e", "\x00", "-1", "1e400", "nan", "inf", "10mbit; rm -rf /", "--help"]),
)
NASTY = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
              st.floats(allow_nan=True, allow_infinity=True), NASTY_TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(NASTY_TEXT, inner, max_size=3)),
    max_leaves=12,
)
def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


DEEP = st.integers(2, 400).map(nested)  # nesting past any parser's patience


def mutate(doc: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    """DOC with the value at PATH (keys and list indexes) replaced by VALUE (or, past the
    end of a list or at a missing key, added)."""
    out = yaml.safe_load(yaml.safe_dump(doc))
    where = out
    for step in path[:-1]:
        where = where[step]
    where[path[-1]] = value
    return out


def paths(doc: Any, prefix: list[Any] | None = None) -> list[list[Any]]:
    """Every key and list item of DOC, as paths."""
    prefix = prefix or []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    out = []
    for k, v in items:
        out.append([*prefix, k])
        out += paths(v, [*prefix, k])
    return out


def loads_or_one_line(write, load, path: Path) -> None:
    """LOAD(PATH) after WRITE: fine, or an FlError of one line naming PATH."""
    write()
    try:
        load(path)
    except FlError as e:
        text = str(e)
        assert "\n" not in text and str(path) in text, text
    except RecursionError:
        pytest.fail(f"{path}: a RecursionError, not a one-line error")


def dump(path: Path, doc: Any) -> None:
    try:
        path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    except RecursionError:  # too deep for PyYAML's own writer: write the flow form by hand
        path.write_text(str(doc))


def load_and_expand(path: Path) -> None:
    expand(load_scenario(path), path)


SCENARIO_PATHS = paths(SCENARIO) + [[a] for a in AXES if a not in SCENARIO] + [["matrix", a] for a in AXES] + [
    ["repetitions"], ["vars"], ["qdiscs"], ["extends"], ["name"], ["reference"], ["findings"], ["bogus"],
    ["expect", 0, "finding"], ["expect", 0, "flow"], ["expect", 0, "metric"], ["expect", 0, "cc"]]


@FUZZ
@given(where=st.sampled_from(SCENARIO_PATHS), value=st.one_of(NASTY, DEEP))
def test_a_mutated_scenario_loads_or_fails_in_one_line(tmp_path_factory, where, value):
    path = tmp_path_factory.mktemp("scn") / "fuzz.yml"
    loads_or_one_line(lambda: dump(path, mutate(SCENARIO, where, value)), load_and_expand, path)


REFERENCE = yaml.safe_load((REPO / "references" / "s6-rfc3168.yml").read_text())
REFERENCE["rows"] = REFERENCE["rows"][:2]


@FUZZ
@given(where=st.sampled_from(paths(REFERENCE) + [["bogus"], ["rows", 0, "bogus"]]), value=NASTY)
def test_a_mutated_reference_file_loads_or_fails_in_one_line(tmp_path_factory, monkeypatch, where, value):
    folder = tmp_path_factory.mktemp("ref")
    monkeypatch.setattr("flharness.scenario.reference.REFERENCE_DIR", folder)
    path = folder / "fuzz.yml"
    loads_or_one_line(lambda: dump(path, mutate(REFERENCE, where, value)), lambda p: load_reference("fuzz"), path)


FINDINGS = yaml.safe_load((REPO / "references" / "findings" / "l4s-key-findings.yml").read_text())


@FUZZ
@given(where=st.sampled_from(paths(FINDINGS) + [["bogus"]]), value=NASTY)
def test_a_mutated_findings_file_loads_or_fails_in_one_line(tmp_path_factory, monkeypatch, where, value):
    folder = tmp_path_factory.mktemp("findings")
    monkeypatch.setattr("flharness.scenario.findings.FINDINGS_DIR", folder)
    path = folder / "fuzz.yml"
    loads_or_one_line(lambda: dump(path, mutate(FINDINGS, where, value)), lambda p: load_findings("fuzz"), path)


RECIPE = yaml.safe_load((REPO / "images" / "l4s.yml").read_text())


@FUZZ
@given(where=st.sampled_from(paths(RECIPE) + [["bogus"], ["modules", 0, "source", "url"]]), value=NASTY)
def test_a_mutated_image_recipe_loads_or_fails_in_one_line(tmp_path_factory, where, value):
    folder = tmp_path_factory.mktemp("img")
    (folder / "modules").mkdir()
    (folder / "modules" / "tcp_prague.c").write_text("/* fuzz */\n")
    path = folder / "fuzz.yml"
    loads_or_one_line(lambda: dump(path, mutate(RECIPE, where, value)), lambda p: load_recipe(str(p)), path)


SCHEME = yaml.safe_load((REPO / "schemes" / "quic.yml").read_text())


@FUZZ
@given(where=st.sampled_from(paths(SCHEME) + [["bogus"], ["schemes", "quic_cubic", "bogus"], ["setup", "receiver"]]),
       value=st.one_of(NASTY, DEEP))
def test_a_mutated_scheme_file_loads_or_fails_in_one_line(tmp_path_factory, where, value):
    """A scheme file runs commands as root on the hosts: every mutation of the shipped one
    loads, its words still checked, or fails in one line naming the file and the key."""
    from flharness.scenario.schemes import read_scheme_file
    path = tmp_path_factory.mktemp("scheme") / "fuzz.yml"
    loads_or_one_line(lambda: dump(path, mutate(SCHEME, where, value)), read_scheme_file, path)
