"""Results files through pydantic models: the base classes of their parts, reading that
checks a file's version before anything else (a file of an older version is upgraded
step by step, as Flent upgrades its old data files; one of a newer or unknown version
gives one clear line, not a list of validation errors), and atomic writing."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, ValidationError, model_serializer

from ..errors import FlError


class Contract(BaseModel):
    """A part of a results file: a key the model does not know is an error, never
    silently dropped (writer and model must agree)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class Sparse(Contract):
    """Writes only the fields it was given or assigned: optional parts that fl leaves out
    where they do not apply (as cells/resolve.py does in the hashed configuration), so a
    file round-trips to the same keys."""

    @model_serializer(mode="wrap")
    def _given_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if k in self.model_fields_set}


class Versioned(Contract):
    """A whole results file; subclasses declare `version: Literal[N] = N`."""

    WHAT: ClassVar[str]  # what the file holds, for errors: "cell record"
    #: What to do with a file of another version.
    ADVICE: ClassVar[str] = "run into another folder (--run LABEL), or read it with the fl that wrote it"
    #: Version N's data → version N + 1's, for every older version this fl upgrades.
    UPGRADES: ClassVar[dict[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {}

    @classmethod
    def upgraded(cls, data: dict[str, Any]) -> dict[str, Any] | None:
        """DATA brought to this version step by step, or None if no steps lead there."""
        expected = cls.model_fields["version"].default
        while isinstance(version := data.get("version"), int) and version < expected and version in cls.UPGRADES:
            data = {**cls.UPGRADES[version](data), "version": version + 1}
        return data if data.get("version") == expected else None


class _VersionOnly(BaseModel):
    version: int | None = None  # other keys ignored: any version's file has this one


class VersionError(FlError):
    """A results file of another version than this fl reads."""


class InvalidFile(FlError):
    """A results file that is not what its model says (cut short, edited by hand)."""


V = TypeVar("V", bound=Versioned)


def read(model: type[V], path: Path) -> V:
    """The file at PATH as MODEL. Raises VersionError for a file of another version,
    InvalidFile for an invalid one (each one line naming the file), OSError."""
    text = path.read_text()
    try:
        found, expected = _VersionOnly.model_validate_json(text).version, model.model_fields["version"].default
        if found == expected:
            return model.model_validate_json(text)
        upgraded = model.upgraded(json.loads(text)) if found is not None and found < expected else None
        if upgraded is None:
            which = "no version (written by an older fl)" if found is None else f"version {found}"
            raise VersionError(f"{path}: a {model.WHAT} with {which}; this fl reads version {expected}: {model.ADVICE}")
        return model.model_validate(upgraded)
    except ValidationError as e:
        raise InvalidFile(f"{path}: not a valid {model.WHAT}: {_first_error(e)}") from None


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where}: {err['msg']}" if where else err["msg"]


def write(path: Path, model: BaseModel) -> None:
    """Write MODEL as JSON atomically (temp file + rename): readers never see half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(model.model_dump_json(indent=1) + "\n")
    tmp.replace(path)
