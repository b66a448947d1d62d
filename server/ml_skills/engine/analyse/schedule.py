"""Whether a run's learning-rate schedule reached its end: a cosine or linear decay that arrives at (about) zero on
the run's last training line is the last step the run was configured for, whatever else the log prints or omits.

A step schedule drops by 10x at its milestones and then holds, so it never ends a log still falling; a warm-up rises.
Only a rate still falling at the last logs, to a hundredth of the log's highest, says the schedule ran out.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from ml_skills.engine.analyse.points import finite
from ml_skills.models import MetricPoint

MIN_LOGS = 5  # learning-rate logs the reading needs
END_SHARE = 1e-2  # the last rate against the log's highest: a cosine decay is under it in its last ~6%, a linear one in its last 1%
FALLING_LOGS = 3  # the last logs whose rates fall (or reach 0) one after the other


def schedule_ended(points: Sequence[MetricPoint]) -> int | None:
    """The line of the run's last training log when its learning rate decayed to its floor there, else None."""
    trained = [p for p in points if p.split != "eval"]
    lrs = [(p, p.values["lr"]) for p in trained if "lr" in p.values and finite(p.values["lr"])]
    if len(lrs) < MIN_LOGS or not trained or not _same_end(lrs[-1][0], trained[-1]):
        return None
    top = max(v for _, v in lrs)
    last = lrs[-1][1]
    if top <= 0 or last < 0 or last > END_SHARE * top:
        return None
    tail = [v for _, v in lrs]
    # the rates before the floor: drop the repeats of a rate printed as 0 (a decay's last logs round to it)
    while len(tail) > 1 and tail[-1] == 0 and tail[-2] == 0:
        tail.pop()
    falling = tail[-FALLING_LOGS:]
    if len(falling) < FALLING_LOGS or any(b >= a for a, b in itertools.pairwise(falling)):
        return None
    return lrs[-1][0].line_no


def _same_end(p: MetricPoint, last: MetricPoint) -> bool:
    """The last rate is logged at the run's last training log, or in the same epoch (a summary line without it)."""
    return p is last or (p.epoch is not None and p.epoch == last.epoch and (last.step is None or p.step is None))
