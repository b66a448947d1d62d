"""fp16 dynamic loss scaling that skipped overflowing steps and went on training.

A loss scaler halves its scale and skips the step whenever the scaled gradients overflow; that is its recovery, not a
failure. A log whose last lines are the scaler's own shows the run recovered when the steps between the skips are
visible: the scale grew back between two skips (it grows only after a window of clean steps: DeepSpeed's and Apex's
default is 1000), or the skips lie minutes apart. Skips seconds apart with the scale only falling are the scaler's
start-up calibration (or a run overflowing at every step), which says nothing either way; a scale under 1 is running
out of room (fp16-min-loss-scale reads the floor itself).
"""

from __future__ import annotations

from ml_skills.engine.analyse.cuttraceback import ends_in_traceback
from ml_skills.engine.read.metrics import parse_timestamp
from ml_skills.lazyre import lazy
from ml_skills.models import LogEvidence

_SCALE = lazy(r"(?i)(?:attempted loss scal\s*+e:\s*+(?P<tried>\d[\d.e+-]{0,30})(?:,\s*+reducing to\s*+(?P<to>\d[\d.e+-]{0,30}))?"
              r"|(?:setting|reducing) loss scale to:?\s*+(?P<set>\d[\d.e+-]{0,30}))")
SKIPS_APART_S = 300  # skips minutes apart: steps ran between them


def _number(text: str | None) -> float | None:
    try:
        return float((text or "").rstrip(".")) if text else None
    except ValueError:
        return None


def scaler_went_on(log: LogEvidence) -> bool:
    """The log's loss-scaler lines show training going on between its skipped steps (see the module's docstring)."""
    if not any(h.signature_id == "fp16-overflow-skip" for h in log.hits) or log.tail is None or ends_in_traceback(log):
        return False
    low = float("inf")
    last: float | None = None
    stamps = []
    for line in log.tail.lines:
        m = _SCALE.search(line)
        if m is None:
            continue
        tried, now = _number(m["tried"]), _number(m["to"] or m["set"])
        if tried is not None and tried > low:
            return True  # the scale grew back after an earlier cut: a window of clean steps ran
        if now is not None:
            low, last = min(low, now), now
        if (t := parse_timestamp(line)) is not None:
            stamps.append(t)
    apart = len(stamps) >= 2 and (stamps[-1] - stamps[0]).total_seconds() >= SKIPS_APART_S
    return apart and last is not None and last >= 1
