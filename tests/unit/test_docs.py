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
