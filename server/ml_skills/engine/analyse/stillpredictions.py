"""Predictions that no longer change: the training and the held-out accuracy both the same to every printed digit, log
after log, while the training loss still moves. The loss follows the outputs' confidence; the accuracies follow only
their argmax. Both accuracies still at once, on two different sets of inputs, means the argmax no longer depends on the
input: the model answers one class (most often the majority) for everything, and the loss only sharpens that answer."""

from __future__ import annotations

from collections.abc import Sequence

from ml_skills.engine.analyse.points import at, finite, fmt
from ml_skills.models import Anomaly, AnomalyKind, FailureClass, MetricPoint, Severity

STILL_LOGS = 3  # logs in a row, the newest, with both accuracies unchanged (every corpus and healthy log: only constant predictors)
SHARE = (0.05, 0.9)  # an accuracy near 1 may stay put in a run that has learnt everything; one near 0 is another failure


def share_of(v: float) -> float:
    """An accuracy as a fraction of 1, whether it was printed out of 1 or out of 100."""
    return v / 100.0 if v > 1.0 else v


def predictions_still(points: Sequence[MetricPoint]) -> Anomaly | None:
    """Training and validation accuracy unchanged at each of the last STILL_LOGS logs that print both with a loss,
    the loss taking a new value at each, both accuracies between SHARE's bounds."""
    rows = [p for p in points if all(k in p.values and finite(p.values[k]) for k in ("acc", "val_acc", "loss"))]
    if len(rows) < STILL_LOGS:
        return None
    acc, vacc = rows[-1].values["acc"], rows[-1].values["val_acc"]
    n = 0
    while n < len(rows) and rows[-1 - n].values["acc"] == acc and rows[-1 - n].values["val_acc"] == vacc:
        n += 1
    run = rows[len(rows) - n:]
    losses = [p.values["loss"] for p in run]
    if n < STILL_LOGS or len(set(losses)) < STILL_LOGS or not all(SHARE[0] <= share_of(v) <= SHARE[1] for v in (acc, vacc)):
        return None
    first = run[0]
    return Anomaly(
        kind=AnomalyKind.LOSS_FROZEN, failure_class=FailureClass.OPTIMIZATION_DIVERGENCE, severity=Severity.SIGNIFICANT,
        source=first.source, line_no=first.line_no, step=first.step,
        detail=(f"training accuracy {fmt(acc)} and validation accuracy {fmt(vacc)} unchanged at each of the last {n} logs "
                f"from {at(first)} (line {first.line_no}) while the training loss moved ({losses[0]:.5g} to {losses[-1]:.5g}): "
                "the predictions no longer change - the model answers the same class (most often the majority's, whose "
                "share these accuracies are) for every input; the features do not reach the output (lost in the data "
                "pipeline, unscaled or uninformative) or the learning rate never leaves the constant solution"),
    )
