"""The trajectory detectors read tens of thousands of points per log: they must stay linear-ish.

`divergence.loss_jump` once took the median of every prefix (quadratic: 87 s on a 1 MB log of 30k healthy
steps); it now keeps the prefix sorted. It is checked here against that plain definition.
"""

from __future__ import annotations

import math
import random
import statistics

import pytest
from ml_skills.engine.analyse import divergence
from ml_skills.models import MetricPoint


def _by_definition(values: list[float]) -> int | None:
    """The index of the first finite loss that is 100x the median |loss| before it and never falls below 10x again."""
    s = [v for v in values if not math.isnan(v) and abs(v) != float("inf")]
    for i in range(2, len(s)):
        base = statistics.median(abs(v) for v in s[:i])
        if base > 0 and s[i] > 100 * base and s[i] > 10 and all(w > 10 * base for w in s[i:]):
            return i
    return None


@pytest.mark.parametrize("seed", range(6))
def test_loss_jump_agrees_with_its_definition(seed):
    rng = random.Random(seed)
    for _ in range(300):
        n = rng.randint(3, 80)
        if rng.random() < 0.5:
            j = rng.randint(2, n - 1)
            values = [rng.uniform(0.2, 3) for _ in range(j)] + [rng.uniform(150, 1e4) for _ in range(n - j)]
        else:
            values = [rng.choice([rng.uniform(0.1, 5), -rng.uniform(0, 2), 0.0, rng.uniform(100, 1e5), float("nan")]) for _ in range(n)]
        points = [MetricPoint(source="t", line_no=i + 1, step=i, values={"loss": v}) for i, v in enumerate(values)]
        found = divergence.loss_jump(points)
        expected = _by_definition(values)
        finite = [p for p in points if p.values["loss"] == p.values["loss"]]
        assert (found.line_no if found else None) == (finite[expected].line_no if expected is not None else None), values
