"""How many items the validation set holds, when the run says so: a perfect score on a handful of items is no sign
of leakage (16 images scored 16/16 is accuracy 1.0 by chance as often as by a bug)."""

from __future__ import annotations

import re

from ml_skills.lazyre import lazy
from ml_skills.models import AnomalyKind, LogEvidence

SMALL_VALIDATION = 50
_SPLIT = lazy(r"(?i)(?:^|[^a-z])(?:val|valid|validation|dev|eval|evaluation)(?:[^a-z]|$)")
_COUNT = lazy(r"(?i)\b(\d[\d,]*)\s+(?:images|samples|examples|files|sentences|items|instances|records|utterances|clips)\b|"
              r"\b(?:size|samples|examples|images|len\w*)\)?\s*[:=]\s*(\d[\d,]*)\b")


# where a _COUNT match may start: a number's first digit, or a word naming a size
_COUNT_FROM = lazy(r"(?i)\b(?:(?P<digit>\d)|(?=size|samples|examples|images|len))")
_NUMBER_RUN = lazy(r"[\d,]*+")


def count(line: str) -> re.Match[str] | None:
    """`_COUNT.search(line)`, trying only the starts that can match.

    A count's digits and commas ('1,024 images') start a count at each digit after a comma: searched, every digit of a
    line of '0,0,0,...' read the run to its end and back, 30 ms for a tail line of 2,000 characters, and 300 such lines
    held the CLI 9 s (twenty-fifth round). A digit inside the run a failed digit read ends its number where that one could,
    and what follows is the same: it fails the same."""
    dead = -1  # a digit at or before this place lies inside the run of a failed start's number
    for c in _COUNT_FROM.finditer(line):
        i = c.start()
        if c["digit"] is not None and i <= dead:
            continue
        if (m := _COUNT.match(line, i)) is not None:
            return m
        if c["digit"] is not None and (run := _NUMBER_RUN.match(line, i)) is not None:
            dead = run.end() - 1
    return None


def validation_size(lines: list[str]) -> int | None:
    """The smallest validation-set size a line of the run states ('[VAL] Loaded 16 images', 'val size: 16')."""
    sizes = []
    for line in lines:
        if _SPLIT.search(line) and (m := count(line)):
            sizes.append(int((m.group(1) or m.group(2)).replace(",", "")))
    return min(sizes, default=None)


def drop_perfect_on_tiny_validation(ev: LogEvidence) -> None:
    """A perfect early validation score on a validation set the run says is tiny is not read as leakage."""
    if not any(a.kind is AnomalyKind.EARLY_PERFECT_VALIDATION for a in ev.trajectory.anomalies):
        return
    lines = [*(ev.head.lines if ev.head else []), *(ev.tail.lines if ev.tail else [])]
    n = validation_size(lines)
    if n is not None and n < SMALL_VALIDATION:
        ev.trajectory.anomalies = [a for a in ev.trajectory.anomalies if a.kind is not AnomalyKind.EARLY_PERFECT_VALIDATION]
        ev.problems.append(f"a perfect early validation score was not read as leakage: the run says its validation set "
                           f"holds {n} items, too few for a perfect score to mean anything")
