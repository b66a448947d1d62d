"""A loss that no longer moves: the same value to every printed digit log after log, an epoch that replays the last
one's losses, an accuracy that never changes, a loss of exactly 0. The network's outputs stopped depending on its weights
or its input, whether after an upset (divergence.py's blow-ups) or from the start; chance.py reads the values only such
a network prints."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from ml_skills.engine.analyse.points import at, finite, trailing_run
from ml_skills.engine.analyse.stillpredictions import SHARE, share_of
from ml_skills.models import Anomaly, AnomalyKind, FailureClass, MetricPoint, Severity

FROZEN_LOGS = 5
UNIFORM_DIGITS = 5  # ln C printed to this many digits, log after log: outputs exactly uniform (zero logits)
FROZEN_DIGITS = 4  # significant digits printed: a loss shown as '0.69' may repeat in a slow healthy run, '0.6931' does not


def digits(v: float) -> int:
    """Significant digits the log printed (a parsed float's shortest repr holds the digits that were parsed)."""
    m = repr(abs(v)).split("e")[0].removesuffix(".0")
    return len(m.replace(".", "").lstrip("0"))


def loss_frozen(points: Sequence[MetricPoint]) -> Anomaly | None:
    """The training loss identical to every printed digit at the last FROZEN_LOGS logs: the network stopped changing.

    A model that trains changes its loss from one minibatch or epoch to the next in the fourth digit at least. The
    same 0.6931 (ln 2), 2.3026 (ln 10), 14.5063 or 87.3365 (Caffe's -ln FLT_MIN) log after log means the outputs
    saturated (a collapsed softmax, dead ReLUs) and no gradient flows: the optimisation was knocked out, typically
    by a learning rate too high for the model or an output on the wrong scale.
    """
    s = [(p, p.values["loss"]) for p in points if "loss" in p.values and finite(p.values["loss"])]
    if len(s) < FROZEN_LOGS:
        return None
    last = s[-1][1]
    run = trailing_run(s)
    # one step printed again (a bar redrawn, a summary line) is not a new log; a bar's count (8144/8144) in each epoch is
    # (a line with no counter is a log of its own: 'Train loss: 6.907' between 'Epoch 10: train loss 6.907' lines)
    marks = {(p.epoch, p.step) for p, _ in run if p.step is not None or p.epoch is not None}
    logs = len(marks) + sum(1 for p, _ in run if p.step is None and p.epoch is None)
    if logs < FROZEN_LOGS or abs(last) < 0.01 or digits(last) < FROZEN_DIGITS:
        return None
    moved = len(run) < len(s)  # the loss changed before it froze: a run that was training stopped changing
    newest, first = run[-1][0], run[0][0]
    others = {k for k in newest.values if k not in ("loss", "lr")}
    epochs = {p.epoch for p, _ in run if p.epoch is not None}
    exact = digits(last) >= UNIFORM_DIGITS and logs >= 2 * FROZEN_LOGS
    if not moved and len(epochs) < FROZEN_LOGS and not exact and logs < 3 * FROZEN_LOGS and not any(
            all(p.values.get(k) == newest.values[k] for p, _ in run) for k in others):
        # a constant that never moved, over a few steps, with no second metric frozen beside it, need not be a network;
        # one printed to five digits or more at ten logs or more is, and so is any at fifteen logs or more: a training
        # step's loss is never that still
        return None
    # within half a unit of the third decimal, or a unit for a round class count, which goes before its neighbours: 6.907 is
    # ln 1000 printed low, not ln 999; 6.2739 is no ln C (ln 531 is 6.2748)
    near = [k for k in range(2, 1001) if abs(math.log(k) - last) < (1e-3 if k % 10 == 0 else 5e-4)]
    chance = max(near, key=lambda k: (len(str(k)) - len(str(k).rstrip("0")), -abs(math.log(k) - last)), default=None)
    why = f" = ln {chance}, the loss of a uniform guess over {chance} classes" if chance else ""
    return Anomaly(
        kind=AnomalyKind.LOSS_FROZEN, failure_class=FailureClass.OPTIMIZATION_DIVERGENCE, severity=Severity.SIGNIFICANT,
        source=first.source, line_no=first.line_no, step=first.step,
        detail=(f"training loss {last:g}{why} at each of the last {logs} logs from {at(first)} (line {first.line_no}): "
                "the network no longer changes - its outputs saturated (collapsed softmax, dead units) and no gradient "
                "flows, typically after a learning rate too high for the model or outputs on the wrong scale"),
    )


def _training_series(points: Sequence[MetricPoint], key: str) -> tuple[list[tuple[MetricPoint, float]], int]:
    """The finite training values of `key`, and how many logs they are: a step printed twice (a bar redrawn) is one."""
    s = [(p, p.values[key]) for p in points if key in p.values and finite(p.values[key]) and p.split != "eval"]
    steps = {p.step for p, _ in s if p.step is not None}
    return s, len(steps) if steps else len(s)


def accuracy_frozen(points: Sequence[MetricPoint]) -> Anomaly | None:
    """With no training loss printed, the training accuracy (or AUC) the same to every printed digit at every log from
    the first, ten or more: the model's predictions never changed.

    A model that fits, a boosted ensemble adding trees or a network taking steps, scores its own training set a little
    differently each round; 'train-auc:0.500000' at every round from the first means every prediction is the same score
    (no tree found a split, every weight update is lost), so the run computes and learns nothing. loss_frozen reads the
    same from a loss, which comes first where printed.
    """
    if any("loss" in p.values for p in points):
        return None
    s, logs = _training_series(points, "acc")
    if logs < 2 * FROZEN_LOGS or len({v for _, v in s}) != 1:
        return None
    v = s[0][1]
    if not SHARE[0] < share_of(v) < SHARE[1]:  # near 1 a fitted model may stay put; near 0 is another failure
        return None
    first = s[0][0]
    return Anomaly(
        kind=AnomalyKind.LOSS_FROZEN, failure_class=FailureClass.OPTIMIZATION_DIVERGENCE, severity=Severity.SIGNIFICANT,
        source=first.source, line_no=first.line_no, step=first.step,
        detail=(f"training accuracy/AUC {v:g} at every one of the log's {logs} logs from {at(first)} (line "
                f"{first.line_no}): the predictions never changed - every input gets the same score (no split found, "
                "no update reaching the model), so the run computes and learns nothing"),
    )


ZERO_LOGS = 4  # training logs, every one in the log, with a loss of exactly 0 (and no gradient norm above 0 beside it)


def loss_zero(points: Sequence[MetricPoint]) -> Anomaly | None:
    """The training loss exactly 0 at every log the log holds, four or more: no target reaches the loss.

    A loss that trains is positive and moves; one printed as 0 from the first log to the last, while the loop goes on
    ('total_loss: 0' at each detectron2 iteration, YOLOX's every term 0.0, a LoRA's 'avr_loss=0'), sums over nothing:
    every label is the ignore index, the boxes or masks did not load, a mask or matching leaves no positive. The run
    computes, and learns nothing. A gradient norm above 0 on the same lines says otherwise: GRPO's loss is 0 in value
    at a policy ratio of 1 while its gradient is not.
    """
    s, logs = _training_series(points, "loss")
    if logs < ZERO_LOGS or any(v != 0 for _, v in s):
        return None
    if any(p.values.get("grad_norm", 0) > 0 for p, _ in s):
        return None  # gradients flow: a loss whose value is 0 by construction (GRPO's at ratio 1) still trains
    if any(p.values.get("acc", 0) > 0 for p, _ in s):
        return None  # an accuracy scored beside it: targets reach the model, and 'loss: 0.0000' is a fit, rounded
    first = s[0][0]
    return Anomaly(
        kind=AnomalyKind.LOSS_FROZEN, failure_class=FailureClass.DATA_PIPELINE, severity=Severity.SIGNIFICANT,
        source=first.source, line_no=first.line_no, step=first.step,
        detail=(f"training loss exactly 0 at every one of the log's {logs} logs from {at(first)} (line "
                f"{first.line_no}): the loss sums over nothing - every label is the ignore index, the targets (boxes, "
                "masks, tokens) did not load, or a mask or matching leaves no positive - so the run learns nothing"),
    )


REPLAY_LOGS = 4  # logged losses of one epoch repeated, in order, at the start of the next...
REPLAY_DIGITS = 3  # ...each to 3 significant digits or more ('0.9670' parses as 0.967): a varying sequence, not one value


def loss_replayed(points: Sequence[MetricPoint]) -> Anomaly | None:
    """An epoch's logged losses repeated by the next epoch, value for value to every printed digit: the weights did
    not change.

    With the batches in the same order each epoch, a model that learns prints other losses on them one epoch later;
    the same varying sequence again (0.9741, 1.3742, 1.2390, 0.9670, ...) means the forward pass runs on weights no
    update touches: the optimizer never steps (a zero learning rate, every step skipped), or the parameters it updates
    are not the ones the model uses (LoRA adapters frozen or left out of the optimizer's parameter groups).
    """
    by_epoch: dict[float, list[tuple[MetricPoint, float]]] = {}
    for p in points:
        v = p.values.get("loss")
        if p.epoch is not None and v is not None and finite(v):
            by_epoch.setdefault(p.epoch, []).append((p, v))
    epochs = sorted(by_epoch)
    for a, b in itertools.pairwise(epochs):
        before, again = [v for _, v in by_epoch[a]], by_epoch[b]
        n = 0
        while n < min(len(before), len(again)) and before[n] == again[n][1] and digits(before[n]) >= REPLAY_DIGITS:
            n += 1
        if n < REPLAY_LOGS or len(set(before[:n])) < 2:
            continue
        first = again[0][0]
        shown = ", ".join(f"{v:g}" for v in before[:n][:6])
        return Anomaly(
            kind=AnomalyKind.LOSS_FROZEN, failure_class=FailureClass.OPTIMIZATION_DIVERGENCE, severity=Severity.SIGNIFICANT,
            source=first.source, line_no=first.line_no, step=first.step,
            detail=(f"epoch {b:g} repeats epoch {a:g}'s training losses value for value ({shown}: {n} logs in a row, "
                    f"from line {first.line_no}): a full epoch of updates changed nothing - the optimizer does not step "
                    "(learning rate 0, every step skipped) or the parameters it updates are not the ones the model uses "
                    "(adapters frozen or missing from the optimizer)"),
        )
    return None
