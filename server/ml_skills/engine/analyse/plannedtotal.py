"""A total the log never prints but the run's configuration asked for: a 0-based epoch counter that ends on the
last epoch of a round total (epoch 4, 99 or 149 of 5, 100 or 150)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from ml_skills.engine.analyse.quietend import ERROR, QUIET_END
from ml_skills.lazyre import lazy
from ml_skills.models import MetricPoint


def _round_total(n: int) -> bool:
    """A total of epochs people configure: 5, 10, ... 50, then tens up to 500, then fifties (100, 120, 150, 300)."""
    return (n <= 50 and n % 5 == 0) or (n <= 500 and n % 10 == 0) or n % 50 == 0


def planned_last_epoch(tail: list[str], tail_start: int, points: Sequence[MetricPoint]) -> int | None:
    """The line of the last epoch of a run that counts epochs from 0 and ends on the lines of epoch 4, 99 or 149:
    one short of a round total, the last epoch of 5, 100 or 150 that the run's configuration (not in the log)
    asked for.

    A log cut while its run is alive stops at any epoch, mostly inside one; a finished run's whole log stops right
    after the summary of its last. So: epoch 0 is in the log (the counter is 0-based), the last epoch point is a
    whole epoch's summary (not a bar inside it), and after it come at most a few plain lines and nothing fatal.
    """
    epochs = [p for p in points if p.epoch is not None]
    if not epochs or min(p.epoch for p in epochs if p.epoch is not None) != 0:
        return None
    last = epochs[-1]
    e = last.epoch
    if e is None or not e.is_integer() or e < 4 or not _round_total(int(e) + 1) or points[-1] is not last:
        return None
    if last.batch is not None and last.batches is not None and last.batch < last.batches:
        return None  # inside the epoch
    if _next_epoch_begun(tail, tail_start, last.line_no, int(e)):
        return None
    return _quiet_after(tail, tail_start, last.line_no)


_EPOCH_NUMBER = lazy(r"(?i)\bepoch\W{0,3}(\d{1,6})\b")


def _next_epoch_begun(tail: list[str], tail_start: int, line_no: int, epoch: int) -> bool:
    """Whether a line after the last epoch's summary names a later epoch (a header '=== training epoch 11 ===' after the
    0-based epoch 9, whose 1-based name is 10): the run went on into another epoch, so epoch `epoch` was not its last
    (healthy 1100: a relaunch cut at its eleventh epoch's header read as ten epochs done)."""
    i = line_no - tail_start
    return any(int(m.group(1)) > epoch + 1 for x in tail[max(i + 1, 0):] for m in _EPOCH_NUMBER.finditer(x))


def same_end_as_earlier_runs(tail: list[str], tail_start: int, points: Sequence[MetricPoint]) -> int | None:
    """The line of the last epoch when the log's earlier runs (its epoch counter starting over) each ended on that
    same epoch: a log of repeated launches of one script (healthy 744: eight runs of 20 epochs appended to one file)
    whose last run reached the epoch every earlier one stopped at has reached its configured end too. Only runs that
    got past their first epoch count, all must agree, and nothing fatal comes after."""
    epochs = [p for p in points if p.epoch is not None and p.epoch.is_integer()]
    if len(epochs) < 4 or points[-1] is not epochs[-1]:
        return None
    ends: list[float] = []
    for a, b in itertools.pairwise(epochs):
        if b.epoch is not None and a.epoch is not None and b.epoch < a.epoch and a.epoch > 1:
            ends.append(a.epoch)  # a run that got past its first epoch, then the counter starts over
    last = epochs[-1]
    if not ends or len(set(ends)) != 1 or last.epoch != ends[0]:
        return None
    return _quiet_after(tail, tail_start, last.line_no)


def _quiet_after(tail: list[str], tail_start: int, line_no: int) -> int | None:
    """`line_no` when at most a few plain lines, none an error, follow it in the tail: the log ends there."""
    i = line_no - tail_start
    if not 0 <= i < len(tail):
        return None
    after = [x for x in tail[i + 1 :] if x.strip()]
    return None if len(after) > QUIET_END or any(ERROR.search(x) for x in after) else line_no
