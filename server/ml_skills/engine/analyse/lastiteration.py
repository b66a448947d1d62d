"""A loop that logs every N steps and its last one ('Step: 0', 1000, ..., 4000, then 'Step: 4999'): the off-interval
step one short of the next multiple is range(5000)'s last iteration, printed because it is the last, so the loop
returned there. So is any off-interval step printed by the same statement as the scheduled ones ('step=1207' every 8,
then 'step=1210'): the statement's condition holds off its schedule only at the loop's end. Read only with a steady
interval before it and nothing fatal and no later counter after it."""

from __future__ import annotations

import itertools

from ml_skills.engine.analyse.quietend import INT, fatal
from ml_skills.lazyre import lazy

# a counter without a total ('Step: 4999', 'iter 3000', 'Epoch 99'): one with its total is finalcounter's
_COUNT = lazy(r"(?i)\b(?P<what>step|iter|iteration|epoch|episode)s?+\s*+[:=#]?\s*+(?P<n>\d{1,12})\b(?!\s*+/|[.,]\d)")
STEADY = 3  # logs at one interval before the last: fewer is no schedule


def last_iteration(tail: list[str], tail_start: int, last_progress_line: int | None) -> int | None:
    """The last progress line when one of its counters is the last iteration of a loop that logs every N steps (of
    'epoch=0 step=1210', the step: a counter that does not move has no schedule)."""
    if last_progress_line is None or not tail_start <= last_progress_line < tail_start + len(tail):
        return None
    i = last_progress_line - tail_start
    after = tail[i + 1 :]
    if any(_COUNT.search(x) or fatal(x) for x in after):
        return None
    whats = {m["what"].lower(): int(m["n"]) for m in reversed(list(_COUNT.finditer(tail[i])))}
    return last_progress_line if any(_ends_schedule(tail[:i], tail[i], what, n) for what, n in whats.items()) else None


def _counter(line: str, what: str) -> int | None:
    return next((int(m["n"]) for m in _COUNT.finditer(line) if m["what"].lower() == what), None)


def _ends_schedule(before_lines: list[str], line: str, what: str, n: int) -> bool:
    """n is printed off a steady schedule of this counter, right after its last logged value: the next multiple less
    one (range(N)'s last), or, on an offset schedule, by the schedule's own statement."""
    logged = [(c, x) for x in before_lines if (c := _counter(x, what)) is not None]
    before = [c for c, _ in logged[-(STEADY + 1) :]]
    if len(before) < STEADY + 1:
        return False
    gaps = {b - a for a, b in itertools.pairwise(before)}
    if len(gaps) != 1 or (d := gaps.pop()) < 2 or len({x % d for x in before}) != 1:
        return False  # no steady schedule
    if not before[-1] < n < before[-1] + d:
        return False  # not right after the last logged one, short of the next
    return (n + 1) % d == 0 or (before[0] % d != 0 and _same_statement(logged[-1][1], line))


def _same_statement(scheduled: str, last: str) -> bool:
    """Two lines printed by one logging call: the same words and separators, every number aside."""
    return INT.sub("#", scheduled.strip()) == INT.sub("#", last.strip())
