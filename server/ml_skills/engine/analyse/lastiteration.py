"""A loop that logs every N steps and its last one ('Step: 0', 1000, ..., 4000, then 'Step: 4999'): the off-interval
step one short of the next multiple is range(5000)'s last iteration, printed because it is the last, so the loop
returned there. Read only with a steady interval before it and nothing fatal and no later counter after it."""

from __future__ import annotations

import itertools

from ml_skills.engine.analyse.quietend import fatal
from ml_skills.lazyre import lazy

# a counter without a total ('Step: 4999', 'iter 3000', 'Epoch 99'): one with its total is finalcounter's
_COUNT = lazy(r"(?i)\b(?P<what>step|iter|iteration|epoch|episode)s?+\s*+[:=#]?\s*+(?P<n>\d{1,12})\b(?!\s*+/|[.,]\d)")
STEADY = 3  # logs at one interval before the last: fewer is no schedule


def last_iteration(tail: list[str], tail_start: int, last_progress_line: int | None) -> int | None:
    """The last progress line when its counter is the last iteration of a loop that logs every N steps."""
    if last_progress_line is None or not tail_start <= last_progress_line < tail_start + len(tail):
        return None
    i = last_progress_line - tail_start
    m = _COUNT.search(tail[i])
    if m is None:
        return None
    what, n = m["what"].lower(), int(m["n"])
    before = [int(p["n"]) for x in tail[:i] if (p := _COUNT.search(x)) is not None and p["what"].lower() == what]
    before = before[-(STEADY + 1) :]
    if len(before) < STEADY + 1:
        return None
    gaps = {b - a for a, b in itertools.pairwise(before)}
    if len(gaps) != 1 or (d := gaps.pop()) < 2 or any(x % d for x in before):
        return None  # no steady schedule of multiples
    if not (before[-1] < n < before[-1] + d and (n + 1) % d == 0):
        return None  # the next multiple less one, right after the last logged one
    after = tail[i + 1 :]
    return last_progress_line if not any(_COUNT.search(x) or fatal(x) for x in after) else None
