"""A learning rate of 0 log after log: the optimizer does not move the weights. A rate printed as 0 while the loss
falls as a trend is only too small for the print's precision ('lr:0.00000'). A rate below LR_NEGLIGIBLE counts as 0:
an update that small is below a float32 weight's resolution (a schedule that halves the rate each epoch reaches 1e-24
after eighty)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from ml_skills.engine.analyse.points import at, finite, fmt, trailing_run
from ml_skills.models import Anomaly, AnomalyKind, FailureClass, MetricPoint, Severity

LR_ZERO_LOGS = 3  # logs in a row, the run's last, with a learning rate of exactly 0
LR_ZERO_PAST_STEP = 1000  # ...none of them the run's first, unless its step counter says it is long past a warm-up
LR_NEGLIGIBLE = 1e-10  # Adam's step is about lr whatever the gradient: below this it moves no weight of 1e-3 or more in float32


FALL_LOGS = 200  # the newest losses the trend is read on
FALLING_PAIRS = 0.7  # the share of (earlier, later) pairs whose later loss is lower: 0.5 is noise around a level


def _loss_still_falls(points: Sequence[MetricPoint], lrs: list[tuple[MetricPoint, float]]) -> bool:
    """Over the trailing stretch printed with a learning rate of 0, the training loss fell by a fifth or more (its
    last third's median against its first third's), as a trend (7 in 10 later losses below earlier ones): the weights
    moved, so the rate was only too small to print. Batches that differ make a flat loss move, not fall."""
    k = len(lrs)
    while k > 0 and _negligible(lrs[k - 1][1]):
        k -= 1
    start = lrs[k][0].line_no
    losses = [p.values["loss"] for p in points if p.line_no >= start and p.split != "eval" and finite(p.values.get("loss", math.nan))]
    if len(losses) < 6:
        return False
    third = len(losses) // 3
    first, last = statistics.median(losses[:third]), statistics.median(losses[-third:])
    # and falls as a trend, not by which batches the first and last logs drew: most later losses below most earlier
    losses = losses[-FALL_LOGS:]
    pairs = [(a, b) for i, a in enumerate(losses) for b in losses[i + 1 :]]
    falling = sum(b < a for a, b in pairs) / len(pairs)
    return first > 0 and last < 0.8 * first and falling >= FALLING_PAIRS


def _negligible(v: float) -> bool:
    return abs(v) < LR_NEGLIGIBLE


def learning_rate_zero(points: Sequence[MetricPoint]) -> Anomaly | None:
    """The learning rate printed as 0 (or below LR_NEGLIGIBLE) at each of the last LR_ZERO_LOGS logs, none of them the
    run's first.

    A warm-up starts from 0 at its first step and a decay reaches 0 at its last; a run whose schedule prints 0 log
    after log in between updates nothing: the configured rate, its scaling (a batch size or accumulation that
    divides it away), or a scheduler stepped past its end set it there.
    """
    lrs = [(p, p.values["lr"]) for p in points if "lr" in p.values and finite(p.values["lr"])]
    tail = lrs[-LR_ZERO_LOGS:]
    trained = [p for p in points if p.split != "eval"]  # an evaluation after the last step is not a later step
    if len(tail) < LR_ZERO_LOGS or not all(_negligible(v) for _, v in tail) or not trained or trained[-1] not in (p for p, _ in tail):
        return None
    if len(lrs) == LR_ZERO_LOGS and (tail[0][0].step or 0) < LR_ZERO_PAST_STEP:
        return None  # the log's first lr logs, near the run's start: a warm-up from 0 prints these
    if _loss_still_falls(points, lrs):
        return None  # 'lr:0.00000' rounds a rate below the print's precision: the loss it moves says it is not 0
    # from where it reached 0: the onset, not the last logs (the points kept may be thinned)
    run = trailing_run(lrs) if tail[-1][1] == 0 else trailing_run(lrs, _negligible)
    first, last = run[0][0], run[-1][0]
    rate = "0" if run[-1][1] == 0 else f"{fmt(run[0][1])} down to {fmt(run[-1][1])}, effectively 0,"
    where = at(first) if first.step is not None or first.epoch is not None else f"line {first.line_no}"
    where += "" if where.startswith("line") else f" (line {first.line_no})"
    span = ""
    if first.step is not None and last.step and last.step > first.step:
        span = f", {100 * (last.step - first.step) / last.step:.0f}% of the run's {fmt(last.step)} steps"
    return Anomaly(
        kind=AnomalyKind.LR_ZERO, failure_class=FailureClass.CONFIG_ERROR, severity=Severity.SIGNIFICANT,
        source=first.source, line_no=first.line_no, step=first.step,
        detail=(f"learning rate {rate} at each of the last {len(run)} logs, from {where} to the end"
                f"{span}: the optimizer does not move the weights, so nothing trains - the configured rate, its scaling "
                "by the batch size or accumulation steps, or a schedule whose length is shorter than the run (its "
                "total or decay steps against the run's max steps), or a decay that divides it every epoch, set it to 0"),
    )
