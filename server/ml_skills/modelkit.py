"""Where the model modules get `BaseModel`, `Field` and their kin: pydantic, or plainmodel.py's plain classes.

pydantic by default, and always for the MCP server, the schema generator and the tests. The CLI asks for the plain
classes (`use_plain`) for `check-failed-run` on a log file, before any model module is imported, so that the run
imports no pydantic (issue 17: about 90 ms of a 0.3 s run). The choice is made once, at the first name read from
here: asked for later, `use_plain` says no and pydantic stays.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

NAMES = frozenset({"BaseModel", "ConfigDict", "Field", "ValidationError", "WithJsonSchema", "create_model"})

_plain = False
_chosen = False


def use_plain() -> bool:
    """Hand the model modules the plain classes, when no model has been made yet; True when they will have them."""
    global _plain
    if not _chosen:
        _plain = True
    return _plain


def plain() -> bool:
    """Whether the model modules have (or will have) the plain classes."""
    return _plain


if TYPE_CHECKING:
    from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema, create_model  # noqa: F401
else:
    def __getattr__(name: str) -> Any:
        global _chosen
        if name not in NAMES:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        _chosen = True
        if _plain:
            from ml_skills import plainmodel as kit
        else:
            import pydantic as kit
        return getattr(kit, name)
