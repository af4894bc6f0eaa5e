"""The documentation that is generated stays current, and its links resolve."""
from __future__ import annotations

import re
from pathlib import Path

from flharness.results import doc
from flharness.scenario import doc as scenario_doc

REPO = Path(__file__).parents[2]


def test_the_results_reference_is_generated_from_the_models():
    assert (REPO / "docs" / "results.md").read_text() == doc.render(), \
        "docs/results.md is stale: .venv/bin/python -m flharness.results.doc > docs/results.md"


def test_the_scenario_key_reference_is_generated_from_the_schema():
    """Every key of the schema is described once, nothing else is, and the page's tables
    are what the schema and those descriptions render."""
    listed = [k for _, _, names in scenario_doc.SECTIONS for k in names]
    assert sorted(listed) == sorted(scenario_doc.keys()) == sorted(scenario_doc.DESCRIPTIONS), \
        "a scenario key without a description in flharness/scenario/doc.py, or one described twice or gone"
    page = (REPO / "docs" / "scenarios.md").read_text()
    assert scenario_doc.update(page) == page, \
        "docs/scenarios.md's key tables are stale: .venv/bin/python -m flharness.scenario.doc"


def test_every_relative_link_of_the_readme_and_docs_resolves():
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.relative_to(REPO)}: broken link {target}"


def _slugs(page: Path) -> set[str]:
    """The anchors GitHub gives PAGE's headings: lower case, punctuation but '-' and '_'
    dropped, spaces as '-', a repeated heading numbered from -1."""
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} (.+)$", re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        out.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return out


def test_every_anchor_the_readme_and_docs_link_to_is_a_heading():
    broken, checked = [], 0
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target, anchor in re.findall(r"\]\(([^)#:\s]*)#([^)\s]+)\)", page.read_text()):
            where = page.parent / target if target else page
            if where.suffix == ".md":
                checked += 1
                if anchor not in _slugs(where):
                    broken.append(f"{page.relative_to(REPO)}: {target}#{anchor}")
    assert broken == [] and checked > 100, (broken, checked)
