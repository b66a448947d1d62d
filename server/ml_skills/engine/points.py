"""How a metric point is tested and named in findings: finite or not, its step, epoch or line."""

from __future__ import annotations

import math

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
