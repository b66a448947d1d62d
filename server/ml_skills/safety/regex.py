"""Regular expressions from a caller (a model), matched in time linear in the line.

Python's `re` backtracks: `(a+)+$` on forty a's and a b runs for hours while holding the GIL,
which freezes the whole server, deadlines included. Caller patterns are therefore compiled for
Hyperscan, which never backtracks; constructs it cannot run in linear time (back-references,
look-arounds) are refused with a clear error. Without Hyperscan the pattern is matched as plain
text, and the result says so.
"""

from __future__ import annotations

import re

from ml_skills.errors import InputError


def _hyperscan():  # type: ignore[no-untyped-def]
    """The binding, imported at the first caller pattern (the server lists its tools without it)."""
    try:
        import hyperscan
    except ImportError:  # pragma: no cover - platforms without a wheel
        return None
    return hyperscan


class LinePattern:
    """`search(line)` is true when the pattern matches somewhere in the line."""

    def __init__(self, pattern: str, ignore_case: bool = False) -> None:
        try:
            re.compile(pattern)
        except re.error as e:
            raise InputError(f"pattern is not a valid regular expression ({e}): escape special characters such as ( [ . *") from None
        self.pattern = pattern
        _hs = _hyperscan()
        self.literal = _hs is None
        self.note = "hyperscan is not installed: the pattern was matched as plain text" if self.literal else ""
        if self.literal:
            self._needle = pattern.lower() if ignore_case else pattern
            self._fold = ignore_case
            return
        flags = _hs.HS_FLAG_SINGLEMATCH | _hs.HS_FLAG_ALLOWEMPTY | _hs.HS_FLAG_UTF8 | _hs.HS_FLAG_UCP
        if ignore_case:
            flags |= _hs.HS_FLAG_CASELESS
        self._db = _hs.Database(mode=_hs.HS_MODE_BLOCK)
        try:
            self._db.compile(expressions=[pattern.encode("utf-8")], ids=[0], elements=1, flags=[flags])
        except _hs.error as e:
            raise InputError(f"pattern cannot be matched safely ({e}); use a plain regular expression without "
                             "back-references or look-arounds") from None
        self._scratch = _hs.Scratch(self._db)

    def search(self, text: str) -> bool:
        if self.literal:
            return (text.lower() if self._fold else text).find(self._needle) >= 0
        hit: list[int] = []
        self._db.scan(text.encode("utf-8", errors="replace"), match_event_handler=lambda *a: hit.append(1), scratch=self._scratch)
        return bool(hit)
