"""A detector's box-regression loss at exactly 0 at every log: no ground-truth box reaches its heads."""

from __future__ import annotations

from collections.abc import Sequence

from ml_skills.engine.analyse.points import at, finite
from ml_skills.models import Anomaly, AnomalyKind, FailureClass, MetricPoint, Severity

BOX_ZERO_LOGS = 2  # logs of a detector's box loss, every one in the log, at exactly 0


def box_loss_zero(points: Sequence[MetricPoint]) -> Anomaly | None:
    """A detector's box-regression loss exactly 0 at every log the log holds, two or more: no ground-truth box
    reaches the heads.

    The box loss sums over the proposals matched to a ground-truth box; it is 0 only when none is matched. A detector
    that trains prints it small but never 0.0000 log after log: every image's annotations loaded empty (a category or
    path mismatch, filtered or unmatched labels), so every proposal is background and the classification accuracy
    climbs to 100% while the model learns to detect nothing.
    """
    s = [(p, p.values["box_loss"]) for p in points if "box_loss" in p.values and finite(p.values["box_loss"]) and p.split != "eval"]
    marks = {(p.epoch, p.batch, p.step) for p, _ in s if p.step is not None or p.epoch is not None}
    logs = len(marks) if marks else len(s)
    if logs < BOX_ZERO_LOGS or any(v != 0 for _, v in s):
        return None
    first = s[0][0]
    return Anomaly(
        kind=AnomalyKind.LOSS_FROZEN, failure_class=FailureClass.DATA_PIPELINE, severity=Severity.SIGNIFICANT,
        source=first.source, line_no=first.line_no, step=first.step,
        detail=(f"box-regression loss exactly 0 at every one of the log's {logs} logs from {at(first)} (line "
                f"{first.line_no}): no proposal is matched to a ground-truth box - the annotations load empty (category "
                "ids or paths that do not match, every box filtered), so the detector learns only background"),
    )
