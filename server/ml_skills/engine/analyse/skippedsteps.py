"""Every optimizer step skipped: DeepSpeed's fp16 optimizer prints 'step=150, skipped=150' when each step so far
overflowed, so the weights never changed. A few skips at the start are the loss scale calibrating (it halves from 2**16
or 2**32 at each overflow and settles within a few dozen steps); every one of 50 or more is a run producing inf or nan
gradients at every step, whatever its printed loss says."""

from __future__ import annotations

from ml_skills.lazyre import lazy
from ml_skills.models import Anomaly, AnomalyKind, FailureClass, NanOnset, Severity

_STEP_SKIPPED = lazy(r"\bstep=(?P<n>\d{1,12}), skipped=(?P<k>\d{1,12})\b")
ALL_SKIPPED_FROM = 50  # steps past any loss-scale calibration
SKIPPED_WORDS = "every optimizer step skipped"


def every_step_skipped(tail: list[str], tail_start: int, source: str) -> Anomaly | None:
    """The last 'step=N, skipped=N' line of the tail, when its count is past ALL_SKIPPED_FROM and the line before it
    (if any) had skipped every step too."""
    found = [(i, int(m["n"]), int(m["k"])) for i, x in enumerate(tail) if "skipped=" in x and (m := _STEP_SKIPPED.search(x))]
    if not found:
        return None
    i, n, k = found[-1]
    if n < ALL_SKIPPED_FROM or k != n or (len(found) > 1 and found[-2][1] != found[-2][2]):
        return None
    return Anomaly(
        kind=AnomalyKind.NAN_ONSET, failure_class=FailureClass.NAN_INF, severity=Severity.CRITICAL,
        source=source, line_no=tail_start + i, step=float(n), onset=NanOnset.EVERY_STEP_SKIPPED,
        detail=(f"{SKIPPED_WORDS}: 'step={n}, skipped={k}' (line {tail_start + i}) - the fp16 loss scale found inf or nan "
                "gradients at every step, so the weights never changed whatever loss the run prints (an input, a layer or a "
                "loss that overflows in half precision; bf16, or fp32 for that part, is the usual way out)"),
    )
