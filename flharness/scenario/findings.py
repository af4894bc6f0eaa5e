"""Findings files: a study's claims, stated on the scenarios that test them (`findings:
NAME` names references/findings/NAME.yml; an `expect:` entry with `finding: N` is part of claim N).
Validated with the scenario; `fl plot` judges each claim from its expectations' verdicts
(report/findings.py).

    source: {document: …, section: …}
    findings:
      - {id: 1, title: …, section: …, scenarios: [s6-rfc3168, …],
         key: {scenario: s6-rfc3168, cell: {cc: prague-vs-cubic, …}, metric: dss_mbit,
               published: [45.70, 1.94], what: "D_SS, Prague / Cubic (Mbit/s)"}}
      - {id: 5, title: …, section: …, scenarios: [], note: why no shipped scenario studies it}

A finding's `key` is the number a reader checks it by: one published value (per flow, or
per cell) of the cells its `cell:` rule selects (axes and values as in include rules), set
beside the run's mean of the same metric on the study page (the index's Key findings);
where the source prints no number, `said:` quotes its words and the run's mean stands
beside them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import ScenarioError
from .reference import REFERENCE_DIR
from .yaml_file import read_yaml


class KeyNumber(BaseModel):
    """The published number a finding is read by, and where the run has it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    scenario: str
    cell: dict[str, str]
    """The cells it is read from: axis → value, as an include rule."""
    metric: str
    published: float | list[float] | None = None
    """Per flow (a list in flow order) or per cell, as the metric is; None where the source
    gives the finding in words or plots only (`said`)."""
    said: str | None = None
    """What the source says instead of a number ("about a 50 % reduction")."""
    what: str
    """What the number is, for people: "D_SS, Prague / Cubic (Mbit/s)"."""

    @field_validator("metric")
    @classmethod
    def _known(cls, v: str) -> str:
        from .expectations import METRICS
        if v not in METRICS:
            raise ValueError(f"metric {v!r} is none of {', '.join(METRICS)}")
        return v

    @model_validator(mode="after")
    def _published_or_said(self) -> KeyNumber:
        if self.published is None and not self.said:
            raise ValueError("a key number needs `published` or, where the source gives none, `said`")
        return self

    @field_validator("cell", mode="before")
    @classmethod
    def _texts(cls, v: Any) -> Any:
        return {k: str(x) for k, x in v.items()} if isinstance(v, dict) else v


class Finding(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: int = Field(ge=1)
    title: str
    section: str = ""
    scenarios: list[str] = []
    """The shipped scenarios whose `expect:` states it."""
    note: str | None = None
    key: KeyNumber | None = None
    """The number a reader checks it by (the study page sets the run's beside it)."""


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

    def section_url(self, finding: Finding) -> str | None:
        """The address of the finding's section in the document (a Markdown heading's
        anchor: lower case, punctuation dropped, spaces as hyphens), for pages to link."""
        if not self.address or not finding.section:
            return None
        words = "".join(ch for ch in finding.section.lower() if ch.isalnum() or ch in " -_")
        return f"{self.address}#{words.replace(' ', '-')}"


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
