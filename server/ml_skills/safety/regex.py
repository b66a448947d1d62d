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


MAX_POSITIONS = 1000
"""What a pattern's counted repeats may unroll to (`.{1000}` is 1,000 positions)."""
MAX_NESTED = 100
"""A counted repeat around another repeat, as positions: `(\\d{1,3}\\.){3}` is 12."""


MAX_UNICODE_COST = 100
"""What a pattern's Unicode word and digit classes may cost before they are matched as ASCII (below)."""
_COST = {"CATEGORY_WORD": 10, "CATEGORY_NOT_WORD": 10, "CATEGORY_DIGIT": 1, "CATEGORY_NOT_DIGIT": 1}


def _class_cost(items) -> int:  # type: ignore[no-untyped-def]
    """A set's cost under Unicode classes: `\\w` is ten, `\\d` one, anything else nothing."""
    from re import _constants as c  # type: ignore[attr-defined]

    return max([_COST.get(str(av), 0) for op, av in items if op == c.CATEGORY] or [0])


def _positions(parsed, pattern: str) -> tuple[int, bool, int]:  # type: ignore[no-untyped-def]
    """(positions the pattern unrolls to, whether it holds a repeat, its Unicode classes' cost). Hyperscan
    unrolls counted repeats at compile time: `(\\w{1,30}\\s{1,30}){1,15}`, 26 characters, took 71 s and 140 MB to
    compile, and `(\\w{1,200}\\s{1,200}){1,200}` 72 s and 420 MB before Hyperscan gave up, in a thread the tool's
    deadline abandons: a few such calls hold gigabytes. Refused before compiling. The cost counts each unrolled
    Unicode `\\w` or `\\W` as ten and `\\d` or `\\D` as one: under Unicode classes each `\\w` is thousands of
    code-point ranges, so `\\w{500}\\s{499}` (999 positions) took 577 MB, `\\w{100}` 5 s and 238 MB (measured,
    seventy-second round's lead)."""
    from re import _constants as c  # type: ignore[attr-defined]

    total, repeats, cost = 0, False, 0
    for op, av in parsed:
        if op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", c.MAX_REPEAT)):
            lo, hi, sub = av
            inner, nested, inner_cost = _positions(sub, pattern)
            n = max(lo, 1) if hi == c.MAXREPEAT else hi
            if nested and n > 1 and n * inner > MAX_NESTED:
                raise InputError(f"pattern {pattern[:80]!r} nests counted repeats ({n} x {inner} positions; at most {MAX_NESTED}): "
                                 "it cannot be compiled in bounded time; search for a shorter piece of the line")
            total, repeats, cost = total + n * inner, True, cost + n * inner_cost
        elif op in (c.SUBPATTERN, c.ASSERT, c.ASSERT_NOT):
            inner, nested, inner_cost = _positions(av[-1], pattern)
            total, repeats, cost = total + inner, repeats or nested, cost + inner_cost
        elif op == c.BRANCH:
            parts = [_positions(b, pattern) for b in av[1]]
            total, repeats = total + max(x for x, _, _ in parts), repeats or any(n for _, n, _ in parts)
            cost += max(k for _, _, k in parts)
        else:
            total += 1
            cost += _class_cost(av) if op == c.IN else 0
    if total > MAX_POSITIONS:
        raise InputError(f"pattern {pattern[:80]!r} unrolls to {total:,} positions (at most {MAX_POSITIONS:,}): it cannot be "
                         "compiled in bounded time; search for a shorter piece of the line")
    return total, repeats, cost


class LinePattern:
    """`search(line)` is true when the pattern matches somewhere in the line."""

    def __init__(self, pattern: str, ignore_case: bool = False) -> None:
        try:
            re.compile(pattern)
            from re import _parser  # type: ignore[attr-defined]

            parsed = _parser.parse(pattern)
        except re.error as e:
            raise InputError(f"pattern is not a valid regular expression ({e}): escape special characters such as ( [ . *") from None
        _, _, cost = _positions(parsed, pattern)
        self.pattern = pattern
        _hs = _hyperscan()
        self.literal = _hs is None
        self.note = "hyperscan is not installed: the pattern was matched as plain text" if self.literal else ""
        if self.literal:
            self._needle = pattern.lower() if ignore_case else pattern
            self._fold = ignore_case
            return
        flags = _hs.HS_FLAG_SINGLEMATCH | _hs.HS_FLAG_ALLOWEMPTY | _hs.HS_FLAG_UTF8
        if cost <= MAX_UNICODE_COST:
            flags |= _hs.HS_FLAG_UCP
        else:
            self.note = (r"\w and \d matched ASCII letters, digits and '_' only: the pattern repeats them too often to "
                         "compile them with Unicode classes in bounded memory")
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
