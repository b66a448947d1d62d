"""Regular expressions compiled on first use, not at import.

A one-shot CLI run imports the whole engine but uses a fraction of its patterns on any one log
(most signatures, exception rules and fact patterns never see a line they could match), and
compiling a Python pattern costs 0.1-1 ms: about 30 ms at import and 0.3 s for the catalog's
signature regexes when all were compiled up front (issue 17). `lazy(p)` stands in for
`re.compile(p)`: the first attribute read compiles the pattern and binds its methods onto the
object, so every later `search`/`match`/... is an ordinary attribute lookup of the compiled
pattern's own method. A pattern that is never used is never compiled.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable
from typing import Any, cast

_BOUND = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split", "scanner",
          "pattern", "flags", "groups", "groupindex")


_compile: Callable[[Any, int], re.Pattern[Any]] = re.compile


def use_compiler(compile_: Callable[[Any, int], re.Pattern[Any]]) -> None:
    """Compile every pattern from now on with `compile_`, which must give what re.compile gives (catalog/recache.py)."""
    global _compile
    _compile = compile_


class LazyPattern:
    """A `re.Pattern` compiled when it is first used."""

    def __init__(self, pattern: Any, flags: int = 0) -> None:
        self._source = (pattern, flags)
        _made.add(self)

    def compiled(self) -> re.Pattern[Any]:
        rx = _compile(*self._source)
        for name in _BOUND:
            setattr(self, name, getattr(rx, name))
        return rx

    def __getattr__(self, name: str) -> Any:  # only called for names not bound yet: the first use
        if name.startswith("__") or name == "_source":
            raise AttributeError(name)
        return getattr(self.compiled(), name)

    def __repr__(self) -> str:
        return f"lazy({self._source[0]!r})"


_made: weakref.WeakSet[LazyPattern] = weakref.WeakSet()


def compile_all() -> int:
    """Compile every lazy pattern made so far and not yet used (`ml-skills --warm-cache`); how many."""
    todo = [p for p in list(_made) if "search" not in vars(p)]
    for p in todo:
        p.compiled()
    return len(todo)


def lazy(pattern: Any, flags: int = 0) -> re.Pattern[Any]:
    """`re.compile(pattern, flags)`, deferred to the first use (typed as the pattern it stands for)."""
    return cast("re.Pattern[Any]", LazyPattern(pattern, flags))
