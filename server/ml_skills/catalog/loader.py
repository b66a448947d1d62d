"""Load the catalog's TOML data into typed models, once per process.

Adding a signature touches one file in signatures/; nothing here changes.
"""

from __future__ import annotations

import re
import tomllib
from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict

from ml_skills.lazyre import lazy
from ml_skills.models import FailureClass, FixTemplate, Signature


class ExceptionRule(BaseModel):
    """Maps a Python exception (type, message, frames) to a failure class."""

    model_config = ConfigDict(extra="forbid")

    id: str
    failure_class: FailureClass
    exc_type: str = ".*"
    message: str = ".*"
    frames: str | None = None
    weight: float = 1.0
    meaning: str = ""
    fixes: list[str] = []


def _read(name: str) -> dict:
    return tomllib.loads(resources.files("ml_skills.catalog").joinpath(name).read_text("utf-8"))


@cache
def signatures() -> tuple[Signature, ...]:
    """Every signature, in file order per class; ids are unique (checked in tests)."""
    out: list[Signature] = []
    folder = resources.files("ml_skills.catalog").joinpath("signatures")
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if not entry.name.endswith(".toml"):
            continue
        data = tomllib.loads(entry.read_text("utf-8"))
        cls = data["failure_class"]
        for raw in data.get("signature", []):
            out.append(Signature(failure_class=cls, **raw))
    return tuple(out)


@cache
def fixes() -> dict[str, FixTemplate]:
    return {raw["id"]: FixTemplate(**raw) for raw in _read("fixes.toml")["fix"]}


@cache
def exception_rules() -> tuple[ExceptionRule, ...]:
    return tuple(ExceptionRule(**raw) for raw in _read("exceptions.toml")["rule"])


@cache
def compiled_exception_rules() -> tuple[tuple[ExceptionRule, re.Pattern[str], re.Pattern[str], re.Pattern[str] | None], ...]:
    return tuple(
        (r, lazy(r.exc_type), lazy(r.message), lazy(r.frames) if r.frames else None)
        for r in exception_rules()
    )
