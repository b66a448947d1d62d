"""How a metric point is tested and named in findings: finite or not, its step, epoch or line."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ml_skills.engine.metrics import CANONICAL
from ml_skills.models import MetricPoint


def finite(x: float) -> bool:
    return not (math.isnan(x) or math.isinf(x))


def fmt(x: float | None) -> str:
    if x is None:
        return "?"
    return str(int(x)) if float(x).is_integer() else f"{x:.4g}"


def at(p: MetricPoint) -> str:
    """Where a point is, in the terms the log gives: its step, else its epoch, else its line."""
    if p.step is not None:
        return f"step {fmt(p.step)}"
    return f"epoch {fmt(p.epoch)}" if p.epoch is not None else f"line {p.line_no}"


def values_text(values: dict[str, float], canonical_order: bool = False) -> str:
    """A point's values as a progress line quotes them: 'loss=2.31, lr=0.0003'.

    `canonical_order` lists loss, val_loss, grad_norm, ... first, then by name: a tracker's rows come
    in whatever key order its API returns, and the report should not change with it.
    """
    items = list(values.items())
    if canonical_order:
        items.sort(key=lambda kv: (CANONICAL.index(kv[0]) if kv[0] in CANONICAL else len(CANONICAL), kv[0]))
    return ", ".join(f"{k}={v:.4g}" for k, v in items)


def trailing_run(series: Sequence[tuple[MetricPoint, float]]) -> list[tuple[MetricPoint, float]]:
    """The last entries of a series whose value equals the last one, oldest first (a metric that stopped moving)."""
    n = 0
    while n < len(series) and series[-1 - n][1] == series[-1][1]:
        n += 1
    return list(series[len(series) - n:])
