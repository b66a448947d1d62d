"""A memo per line shape, so the thousands of metric lines a log prints from a few format strings pay for one
search of each pattern, not one a line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Lines of one shape. A log prints its metric lines from a few format strings, so thousands of its lines differ only
# in their digits: `shape_of` maps every ASCII digit to '0'. The patterns the formats search with are digit-blind:
# none names a digit, and every character class holds all ten digits or none (tests/engine/test_metric_shapes.py
# checks each), so on two lines of one shape a pattern matches at the same places, with the same groups' spans.
# What they found on the first line of a shape is kept by site (`Found.spans`) and read at the same offsets of the
# next; the values are read from each line's own text and every check on a value (a NaN, the sign of a rate) runs
# on each line. A memo is kept for a line of at most SHAPE_BYTES, for at most SHAPES_KEPT shapes (then begun again).
_ZERO_DIGITS = bytes.maketrans(b"123456789", b"000000000")
_MISSING = object()
SHAPE_BYTES = 4096
SHAPES_KEPT = 4096
_shapes: dict[bytes, dict[str, Any]] = {}


def shape_of(raw: bytes | bytearray) -> bytes | None:
    """The shape of a raw line (its bytes with every ASCII digit made '0'), or None when it is too long to keep."""
    return bytes(raw).translate(_ZERO_DIGITS) if len(raw) <= SHAPE_BYTES else None


def shape_memo(shape: bytes | None) -> dict[str, Any] | None:
    """What the digit-blind patterns found on the first line of this shape, by site (filled as they search)."""
    if shape is None:
        return None
    memo = _shapes.get(shape)
    if memo is None:
        if len(_shapes) >= SHAPES_KEPT:
            _shapes.clear()
        memo = _shapes[shape] = {}
    return memo


class Found:
    """What the formats read on one line so far. The first value of a canonical name wins, so an earlier format
    takes precedence over a later one; step and epoch follow each format's own rule (see its parser).

    `memo` is what the digit-blind patterns found on the first line of this line's shape (see `shape_of`), by site,
    or None to search this line itself."""

    __slots__ = ("epoch", "memo", "step", "values")

    def __init__(self, memo: dict[str, Any] | None = None) -> None:
        self.values: dict[str, float] = {}
        self.step: float | None = None
        self.epoch: float | None = None
        self.memo = memo

    def spans(self, site: str, find: Callable[[str], Any], text: str) -> Any:
        """find(text): the spans a digit-blind pattern finds in `text`, from the memo of this line's shape when
        another line of the shape was searched already."""
        memo = self.memo
        if memo is None:
            return find(text)
        found = memo.get(site, _MISSING)
        if found is _MISSING:
            found = memo[site] = find(text)
        return found
