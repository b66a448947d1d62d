"""The failure catalog: signatures and fixes as data, loaded once into typed models.

The loader (and with it pydantic and the models) is imported when one of these names is first read, not with the
package: the sealed cache files (ml_skills.diskcache; recache, plugincache beside it) are used before any model is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ml_skills.catalog.loader import exception_rules, fixes, signatures

__all__ = ["exception_rules", "fixes", "signatures"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ml_skills.catalog import loader

        return getattr(loader, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
