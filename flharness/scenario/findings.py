"""Findings files: a study's claims, stated on the scenarios that test them (`findings:
NAME` names references/findings/NAME.yml; an `expect:` entry with `finding: N` is part of claim N).
Validated with the scenario; `fl plot` judges each claim from its expectations' verdicts
(report/findings.py).

    source: {document: …, section: …}
    findings:
      - {id: 1, title: …, section: …, scenarios: [s6-rfc3168, …]}
      - {id: 5, title: …, section: …, scenarios: [], note: why no shipped scenario studies it}
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import ScenarioError
from .reference import REFERENCE_DIR
from .yaml_file import read_yaml


class Finding(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: int = Field(ge=1)
    title: str
    section: str = ""
    scenarios: list[str] = []
    """The shipped scenarios whose `expect:` states it."""
    note: str | None = None


class Findings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    source: dict[str, Any]
    findings: list[Finding]

    @field_validator("findings")
    @classmethod
    def _unique(cls, v: list[Finding]) -> list[Finding]:
        ids = [f.id for f in v]
        if len(set(ids)) != len(ids):
            raise ValueError(f"finding ids repeat: {ids}")
        return v

    @property
    def document(self) -> str:
        return str(self.source.get("document", "?"))

    @property
    def address(self) -> str | None:
        """Where the document is (its URL), for pages that cite it."""
        return str(self.source["address"]) if self.source.get("address") else None

    def get(self, finding: int) -> Finding | None:
        return next((f for f in self.findings if f.id == finding), None)


#: Where the files a scenario's `findings:` names live.
FINDINGS_DIR = REFERENCE_DIR / "findings"


def findings_path(name: str) -> Path:
    return FINDINGS_DIR / f"{name}.yml"


def load_findings(name: str, scenario_path: Path | str = "") -> Findings:
    """references/findings/NAME.yml, validated; a problem names the file and key (or the
    scenario's `findings` key when there is no such file)."""
    path = findings_path(name)
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in FINDINGS_DIR.glob("*.yml"))) or "none"
        raise ScenarioError(scenario_path, "findings", f"no file {name}.yml in {FINDINGS_DIR} (available: {known})")
    try:
        return Findings.model_validate(read_yaml(path, "a findings file is a mapping (source, findings)"))
    except ValidationError as e:
        err = e.errors()[0]
        raise ScenarioError(path, ".".join(map(str, err["loc"])), err["msg"].removeprefix("Value error, ")) from None
