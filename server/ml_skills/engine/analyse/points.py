"""How a metric point is tested and named in findings: finite or not, its step, epoch or line."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ml_skills.models import CANONICAL, MetricPoint

finite = math.isfinite
"""Neither NaN nor infinite: math's own test, called as it is (the detectors ask it about every value of every point,
50,000 times on a 1 MiB log; a function of ours around it cost a Python call each time)."""


def fmt(x: float | None) -> str:
    if x is None:
        return "?"
    return str(int(x)) if float(x).is_integer() else f"{x:.4g}"


def at(p: MetricPoint) -> str:
    """Where a point is, in the run's own counters: its step, else its epoch and iteration, else its line."""
    if p.step is not None:
        return f"step {fmt(p.step)}"
    if p.epoch is not None and p.batch is not None:
        return f"epoch {fmt(p.epoch)}, iteration {fmt(p.batch)}" + (f"/{fmt(p.batches)}" if p.batches else "")
    return f"epoch {fmt(p.epoch)}" if p.epoch is not None else f"line {p.line_no}"


def iterations_before(p: MetricPoint, first: MetricPoint | None) -> float | None:
    """How many iterations the run had done at `p`, from its own counters; None when it does not say.

    A global step counts them; an epoch with its iterations per epoch ('Epoch [8][208/2000]') gives about
    (epoch - first epoch) * per-epoch + iteration, counted from the first epoch the log shows (0- or 1-based).
    """
    if p.step is not None:
        done = p.step
    elif p.epoch is not None and p.batch is not None and p.batches:
        base = first.epoch if first is not None and first.epoch is not None and first.epoch <= 1 else min(p.epoch, 1.0)
        done = max(0.0, p.epoch - base) * p.batches + p.batch
    else:
        return None
    # a counter printed past a float's range ('step 1000...0' of 400 digits reads inf, and inf times 0 nan) says nothing:
    # counted as a number, it ended the diagnosis in "internal error" (twenty-fourth round)
    return done if math.isfinite(done) else None


def values_text(values: dict[str, float], canonical_order: bool = False) -> str:
    """A point's values as a progress line quotes them: 'loss=2.31, lr=0.0003'.

    `canonical_order` lists loss, val_loss, grad_norm, ... first, then by name: a tracker's rows come
    in whatever key order its API returns, and the report should not change with it.
    """
    items = list(values.items())
    if canonical_order:
        items.sort(key=lambda kv: (CANONICAL.index(kv[0]) if kv[0] in CANONICAL else len(CANONICAL), kv[0]))
    return ", ".join(f"{k}={v:.4g}" for k, v in items)


def trailing_run(series: Sequence[tuple[MetricPoint, float]],
                 alike: Callable[[float], bool] | None = None) -> list[tuple[MetricPoint, float]]:
    """The last entries of a series whose value equals the last one, oldest first (a metric that stopped moving); with
    `alike`, the last entries whose values it accepts (an lr under 1e-10, however it still falls)."""
    same = alike if alike is not None else (lambda v: v == series[-1][1])
    n = 0
    while n < len(series) and same(series[-1 - n][1]):
        n += 1
    return list(series[len(series) - n:])


def since_counter_reset(points: Sequence[MetricPoint]) -> Sequence[MetricPoint]:
    """The points from the last place the run's counters went back (epoch 3 step 17730, then epoch 1 step 0): a run
    launched again into the same log, or resumed from an earlier checkpoint. Its loss starts over from its own
    beginning, so a rise read across the reset compares two runs, not one run's steps. Points with no counter keep
    their place; the whole list when the counters never go back. Only counters both points print are compared: an
    epoch's summary line (epoch 3, no step) after its step lines (epoch 3 step 960) is the same epoch, not a reset."""
    start, last = 0, None
    for i, p in enumerate(points):
        if p.step is None and p.epoch is None:
            continue
        if last is not None and (p.epoch is None) == (last.epoch is None):
            if p.epoch is not None and last.epoch is not None and p.epoch != last.epoch:
                back = p.epoch < last.epoch
            else:
                back = p.step is not None and last.step is not None and p.step < last.step
            if back:
                start = i
        last = p
    return points[start:]
