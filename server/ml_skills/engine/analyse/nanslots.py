"""A quantity of the run's own progress lines that was finite, went NaN (or inf) and stayed so to the log's end, whatever
its name: a variational energy ('Step 03455: nan E_h, variance=nan E_h^2'), a reward, an ELBO. The metric parser knows
loss-like names; a training loop's repeated line knows the rest: its template (the line with every number, NaN and inf
read as '#') is printed step after step, and one slot of it turning non-finite for good is the run's numbers gone."""

from __future__ import annotations

import math

from ml_skills.engine.analyse.nanonset import EARLY_NAN_STEPS
from ml_skills.lazyre import lazy
from ml_skills.models import Anomaly, AnomalyKind, FailureClass, NanOnset, Severity
from ml_skills.safety.redact import redact

_VALUE = lazy(r"(?i)(?<![\w.])(?:[-+]?(?:\d++(?:\.\d++)?(?:e[-+]?\d++)?|\.\d++)|[-+]?(?:nan|inf(?:inity)?))(?![\w.])")
_STEP = lazy(r"(?i)\b(?:step|iter(?:ation)?|it|update)\s*+[:=#]?\s*+(\d{1,12})\b")
FINITE_BEFORE = 3  # lines of the template with the slot finite before it went
GONE_FOR = 2  # the template's last lines with the slot non-finite, through its last one
NEAR_END = 5  # the template's last line is among the log's last non-blank lines
MAX_LINE = 400  # a longer line is no loop's progress record


def _slots(line: str) -> tuple[str, list[float]] | None:
    if len(line) > MAX_LINE:
        return None
    values = [float(m.group()) for m in _VALUE.finditer(line)]
    return (_VALUE.sub("#", line).strip(), values) if values else None


def went_nan(tail: list[str], tail_start: int, source: str) -> Anomaly | None:
    """The first line where a slot of the log's last repeated line turned non-finite for good, or None."""
    lines = [(i, x) for i, x in enumerate(tail) if x.strip()]
    if len(lines) < FINITE_BEFORE + GONE_FOR:
        return None
    read = {i: s for i, x in lines[-300:] if (s := _slots(x)) is not None}
    for i, _ in reversed(lines[-NEAR_END:]):
        if i not in read:
            continue
        template, last_values = read[i]
        rows = [(j, v) for j, (t, v) in sorted(read.items()) if t == template and len(v) == len(last_values)]
        for slot, value in enumerate(last_values):
            if math.isfinite(value):
                continue
            gone = 0
            while gone < len(rows) and not math.isfinite(rows[-1 - gone][1][slot]):
                gone += 1
            before = [v[slot] for _, v in rows[: len(rows) - gone]]
            if gone >= GONE_FOR and len(before) >= FINITE_BEFORE and all(math.isfinite(b) for b in before[-FINITE_BEFORE:]):
                return _anomaly(tail, tail_start, source, rows[len(rows) - gone][0], rows[len(rows) - gone - 1][0], gone)
        return None
    return None


def _anomaly(tail: list[str], tail_start: int, source: str, first: int, before: int, gone: int) -> Anomaly:
    m = _STEP.search(tail[first])
    step = float(m[1]) if m else None
    onset = NanOnset.NOT_PLACED if step is None else NanOnset.EARLY if step < EARLY_NAN_STEPS else NanOnset.NO_WARNING
    return Anomaly(
        kind=AnomalyKind.NAN_ONSET, failure_class=FailureClass.NAN_INF, severity=Severity.CRITICAL, source=source,
        line_no=tail_start + first, step=step, onset=onset,
        detail=(f"the run's progress line went non-finite at line {tail_start + first} after finite values at line "
                f"{tail_start + before}, and stayed so for its last {gone} lines: '{redact(tail[first].strip()[:160])}'"),
    )
