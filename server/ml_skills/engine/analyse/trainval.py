"""What the training and validation series say together: memorisation (validation loss climbing while the training
loss falls), a validation score frozen while training climbs, validation accuracy far under training's. Each is a
run that trains but whose model will not generalise, or whose evaluation does not see the model."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Sequence

from ml_skills.engine.analyse.points import finite as _finite
from ml_skills.engine.analyse.points import trailing_run
from ml_skills.models import Anomaly, AnomalyKind, FailureClass, MetricPoint, Severity, Task

FROZEN_EVALS = 4


def _validation_frozen(points: Sequence[MetricPoint], vacc: list[tuple[MetricPoint, float]]) -> Anomaly | None:
    """Validation accuracy identical to the last digit at the last FROZEN_EVALS evaluations while training accuracy climbs.

    A model that learns changes its predictions, so a validation score that does not move by one printed digit
    while training accuracy rises well above it says the evaluation does not see the model being trained, or
    sees different inputs (eval-time preprocessing unlike training's, a model copy taken before training,
    BatchNorm statistics in eval mode, predictions compared with labels in another order).
    """
    if len(vacc) < FROZEN_EVALS:
        return None
    last = vacc[-1][1]
    run = len(trailing_run(vacc))
    if run < FROZEN_EVALS:
        return None
    first = vacc[-run][0].line_no
    # the training accuracy of the epoch that led to the first frozen evaluation, and every one after it
    acc = [(p, p.values["acc"]) for p in points if "acc" in p.values and _finite(p.values["acc"])]
    before = [i for i, (p, _) in enumerate(acc) if p.line_no < first]
    acc = acc[before[-1] if before else 0:]
    if len(acc) < FROZEN_EVALS:
        return None
    scale = 100.0 if max([last, *(v for _, v in acc)]) > 1.0 else 1.0
    lo, hi = min(v for _, v in acc), acc[-1][1]
    if last >= 0.999 * scale or hi - lo < 0.2 * scale or hi < last + 0.2 * scale:
        return None
    p = vacc[-1][0]
    return Anomaly(
        kind=AnomalyKind.VALIDATION_METRIC_FROZEN, failure_class=FailureClass.EVALUATION_MISMATCH,
        severity=Severity.SIGNIFICANT, source=p.source, line_no=p.line_no, step=p.step,
        detail=(f"validation accuracy {last:g} identical at the last {run} evaluations (lines {first}-{p.line_no}) while "
                f"training accuracy rose {lo:g} -> {hi:g}: the evaluation does not see the model being trained or gets "
                "other inputs (eval-time preprocessing unlike training's, a model copy taken before training, "
                "BatchNorm/dropout mode, labels compared in another order)"),
    )


RISING_EVALS = 4
EARLY_BEST_EVALS = 20  # evaluations a history needs before where its best one fell says anything
EARLY_BEST_SHARE = 0.05
GAP_EVALS = 3  # evaluations in a row with validation accuracy under half the training accuracy


def _val_rising_streak(train: list[tuple[MetricPoint, float]], val: list[tuple[MetricPoint, float]]) -> bool:
    """Validation loss higher at each of the last RISING_EVALS evaluations while training loss fell over them.

    The early-stopping rule every practitioner applies (patience): one noisy evaluation can rise, but a validation
    loss that climbs evaluation after evaluation, 5% or more in all, while the training loss keeps falling is the
    model fitting its training set and not the task, however small each step of the climb.
    """
    if len(val) < RISING_EVALS + 1:
        return False
    vv = [v for _, v in val]
    tail = vv[-RISING_EVALS - 1:]
    if any(b <= a for a, b in itertools.pairwise(tail)) or tail[-1] < 1.05 * tail[0]:
        return False
    start = val[-RISING_EVALS - 1][0].line_no
    span = [v for p, v in train if p.line_no >= start]
    return len(span) >= 2 and span[-1] < 0.95 * span[0]


def _eval_pairs(points: Sequence[MetricPoint]) -> list[tuple[MetricPoint, float, float, float, float]]:
    """(point, training accuracy, validation accuracy, training loss, validation loss) at each evaluation that prints
    both validation figures, beside the latest training ones logged up to it."""
    last_acc: float | None = None
    last_loss: float | None = None
    pairs: list[tuple[MetricPoint, float, float, float, float]] = []
    for p in points:
        if "acc" in p.values and _finite(p.values["acc"]):
            last_acc = p.values["acc"]
        if "loss" in p.values and _finite(p.values["loss"]):
            last_loss = p.values["loss"]
        vacc, vloss = p.values.get("val_acc"), p.values.get("val_loss")
        if last_acc is None or last_loss is None or vacc is None or vloss is None or not (_finite(vacc) and _finite(vloss)):
            continue
        pairs.append((p, last_acc, vacc, last_loss, vloss))
    return pairs


def _last_evals(points: Sequence[MetricPoint]) -> tuple[list[tuple[MetricPoint, float, float, float, float]], float] | None:
    """The last GAP_EVALS evaluation pairs (see _eval_pairs) and the accuracies' scale (1 or 100), or None when fewer."""
    pairs = _eval_pairs(points)
    if len(pairs) < GAP_EVALS:
        return None
    return pairs[-GAP_EVALS:], 100.0 if max(max(a, v) for _, a, v, _, _ in pairs) > 1.0 else 1.0


_Eval = tuple[MetricPoint, float, float, float, float]


def _unless_at_the_last_evals(points: Sequence[MetricPoint],
                              fails: Callable[[float, float, float, float, float], bool]) -> _Eval | None:
    """The last evaluation pair when none of the last GAP_EVALS fails the reading: fails(scale, acc, vacc, loss,
    vloss), scale the accuracies' (1 or 100)."""
    if (last := _last_evals(points)) is None:
        return None
    tail, scale = last
    return None if any(fails(scale, acc, vacc, loss, vloss) for _, acc, vacc, loss, vloss in tail) else tail[-1]


DISAGREE_RATIO = 20.0  # a validation loss this many times the training loss...
DISAGREE_ACC = 0.9  # ...while validation accuracy holds at nine tenths of training accuracy or more


def _loss_and_accuracy_disagree(points: Sequence[MetricPoint]) -> Anomaly | None:
    """Validation accuracy as high as training accuracy while the validation loss is 20 times the training loss or more,
    at each of the last GAP_EVALS evaluations.

    A model right on 97% of held-out samples that fits them as its training data (0.97 accuracy at a training loss of
    0.07) has no cross-entropy of 8 to 20 on them unless a few predictions are wrong with absurd confidence or the loss
    is not computed on what the metric scores (logits given to a loss that expects probabilities, a loss over padding
    or another head). Overfitting raises the validation loss and lowers the accuracy with it; here they disagree.
    """
    if (last := _unless_at_the_last_evals(points, lambda scale, acc, vacc, loss, vloss: acc < 0.5 * scale or vacc < DISAGREE_ACC * acc
                                          or vloss < max(1.0, DISAGREE_RATIO * loss) or loss <= 0)) is None:
        return None
    p, acc, vacc, loss, vloss = last
    return Anomaly(
        kind=AnomalyKind.TRAIN_VAL_DIVERGENCE, failure_class=FailureClass.EVALUATION_MISMATCH,
        severity=Severity.SIGNIFICANT, source=p.source, line_no=p.line_no, step=p.step,
        detail=(f"validation accuracy {vacc:g} beside training accuracy {acc:g}, yet validation loss {vloss:.4g} is "
                f"{vloss / loss:.0f}x the training loss {loss:.4g} at each of the last {GAP_EVALS} evaluations: the loss "
                "and the accuracy disagree - the validation loss is not computed on what the metric scores (logits "
                "passed as probabilities, a loss over padding or another output) or a few predictions are wrong with "
                "absurd confidence"),
    )


def _accuracy_gap(points: Sequence[MetricPoint]) -> Anomaly | None:
    """Training accuracy high and validation accuracy under half of it at each of the last GAP_EVALS evaluations.

    A model that scores 0.95 on what it trains on and 0.25 on held-out data evaluation after evaluation, with a
    validation loss many times the training loss, is not slowly overfitting (that is the climbing validation loss
    above): evaluation sees other inputs than training does (preprocessing, normalisation, BatchNorm statistics in
    inference mode, a label order), or the held-out split is not the task trained on.
    """
    if (last := _unless_at_the_last_evals(points, lambda scale, acc, vacc, loss, vloss: acc < 0.85 * scale or vacc > 0.5 * acc
                                          or vloss < 3 * max(loss, 1e-9))) is None:
        return None
    p, acc, vacc, loss, vloss = last
    return Anomaly(
        kind=AnomalyKind.TRAIN_VAL_DIVERGENCE, failure_class=FailureClass.EVALUATION_MISMATCH,
        severity=Severity.SIGNIFICANT, source=p.source, line_no=p.line_no, step=p.step,
        detail=(f"training accuracy {acc:g} against validation accuracy {vacc:g} at each of the last {GAP_EVALS} "
                f"evaluations (validation loss {vloss:.4g}, {vloss / max(loss, 1e-9):.0f}x the training loss "
                f"{loss:.4g}): evaluation does not see what training sees (preprocessing, normalisation, BatchNorm "
                "in inference mode, label order) or the validation split is another task"),
    )


MEMORISED_ACC = 0.95  # training accuracy at nineteen twentieths or more...
MEMORISED_LOSS = 0.1  # ...at a training loss this low...
MEMORISED_RATIO = 20.0  # ...while the validation loss is this many times it (and 1 or more)...
MEMORISED_VACC = 0.85  # ...and validation accuracy under this share of the training accuracy


def _memorised(points: Sequence[MetricPoint]) -> Anomaly | None:
    """The training set fitted and the held-out set not, at each of the last GAP_EVALS evaluations, however the
    validation loss moved before them: training accuracy 0.99 at a loss of 0.03, validation accuracy 0.64-0.70 at a
    loss of 3.4-3.96 (1319, an RMDL member pasted from its 69th epoch on, after its climb). Between the gap above (under
    half the training accuracy: evaluation sees other inputs) and the disagreement (accuracies alike, losses not)."""
    if (last := _unless_at_the_last_evals(points, lambda scale, acc, vacc, loss, vloss: acc < MEMORISED_ACC * scale
                                          or not 0 <= loss <= MEMORISED_LOSS or vloss < max(1.0, MEMORISED_RATIO * loss)
                                          or vacc > MEMORISED_VACC * acc)) is None:
        return None
    p, acc, vacc, loss, vloss = last
    return Anomaly(
        kind=AnomalyKind.TRAIN_VAL_DIVERGENCE, failure_class=FailureClass.EVALUATION_MISMATCH,
        severity=Severity.SIGNIFICANT, source=p.source, line_no=p.line_no, step=p.step,
        detail=(f"training accuracy {acc:g} at loss {loss:.4g} against validation accuracy {vacc:g} at loss {vloss:.4g} "
                f"({vloss / max(loss, 1e-4):.0f}x or more) at each of the last {GAP_EVALS} evaluations: memorisation - the model fits what it "
                "trains on and not held-out data (too little or unrepresentative training data, too little "
                "regularisation, or training past the best epoch)"),
    )


ZERO_ACC_LOGS = 3  # logs in a row with an accuracy of exactly 0 beside a loss that says it cannot be


def _accuracy_zero_beside_low_loss(points: Sequence[MetricPoint]) -> Anomaly | None:
    """An accuracy of exactly 0 on the same lines as a cross-entropy at or under ln 2 (a perplexity of 2 or less).

    exp(-loss) is the geometric mean of the probability the model gives the right class; at or above 1/2 some
    samples get more than half of it, and there the right class is the arg-max: the accuracy cannot be 0. Printed
    as 0 log after log, the accuracy compares predictions with something else (padding counted, targets shifted,
    the wrong axis), whatever the model does.
    """
    rows = []
    for p in points:
        acc, loss, ppl = p.values.get("acc"), p.values.get("loss"), p.values.get("ppl")
        if acc is None or (loss is None and ppl is None):
            continue
        low = (ppl is not None and _finite(ppl) and 1 <= ppl <= 2) or (ppl is None and loss is not None and 0 < loss <= LN2)
        rows.append((p, acc == 0 and low))
    streak = trailing_run([(p, ok) for p, ok in rows])
    if len(streak) < ZERO_ACC_LOGS or not streak[-1][1]:
        return None
    p = streak[0][0]
    shown = f"perplexity {p.values['ppl']:g}" if "ppl" in p.values else f"loss {p.values['loss']:g}"
    return Anomaly(
        kind=AnomalyKind.VALIDATION_METRIC_NEAR_ZERO, failure_class=FailureClass.EVALUATION_MISMATCH,
        severity=Severity.SIGNIFICANT, source=p.source, line_no=p.line_no, step=p.step,
        detail=(f"accuracy 0 at {len(streak)} logs in a row from line {p.line_no}, beside a {shown} (at most 2, a loss "
                "of at most ln 2): the model gives the right class over half its probability on average, so it is "
                "right on some samples; an accuracy of exactly 0 is computed against something else (padding or "
                "ignored positions counted, targets shifted by one, the arg-max over the wrong axis)"),
    )


LN2 = 0.6931471805599453


def _climbed(vv: list[float], vmin_i: int) -> bool:
    """The validation loss climbed from its best (vv[vmin_i]) to where it ends."""
    rising = vv[-1] > vv[vmin_i] * 1.15 and vmin_i < len(vv) - 1 and vv[-1] >= vv[-2] * 0.98
    if len(vv) >= NOISY_EVALS:
        # a long, noisy validation curve (a small validation set: spikes of 3x its best) is read by its level, not
        # its extremes: its recent median against the lowest median of any stretch as long; one spike at the end
        # is no climb, a curve whose every stretch since its best is worse is
        w = max(3, len(vv) // 10)
        level = [statistics.median(vv[i : i + w]) for i in range(len(vv) - w + 1)]
        best = min(range(len(level)), key=level.__getitem__)
        # (and the single best evaluation is not among the last few: a curve that just reached its lowest value, one
        # bounce after it, has not climbed; healthy 0931, a best of 0.28 at the second-to-last of 51 evaluations)
        rising = level[-1] > level[best] * 1.15 and best < len(level) - 1 and vmin_i < len(vv) - RECENT_BEST
    # or: the best evaluation came in the first twentieth of a long history and every later stretch is worse -
    # the rest of the run only memorised (a 10% rise over 400 evaluations is no noise)
    return rising or (len(vv) >= EARLY_BEST_EVALS and vmin_i < len(vv) * EARLY_BEST_SHARE
                      and statistics.median(vv[-len(vv) // 4:]) > vv[vmin_i] * 1.05)


MEMORISED_GAP = 1.2  # validation loss over training loss at the end, below which nothing was memorised
NOISY_EVALS = 20  # evaluations from which a validation curve is read by the medians of its stretches
RECENT_BEST = 3  # the last evaluations among which the best one means the curve has not climbed off it


def train_val(points: Sequence[MetricPoint], task: Task | None) -> list[Anomaly]:
    out: list[Anomaly] = []
    if (zero := _accuracy_zero_beside_low_loss(points)) is not None:
        out.append(zero)
    train = [(p, p.values["loss"]) for p in points if "loss" in p.values and _finite(p.values["loss"])]
    val = [(p, p.values["val_loss"]) for p in points if "val_loss" in p.values and _finite(p.values["val_loss"])]
    # the thresholds are ratios of losses: a loss that can be negative (a Dice or log-likelihood loss, nnU-Net's -0.8)
    # has no such reading. (A validation loss that climbs while validation accuracy holds at its best reads the same
    # in numbers as a run memorising one shard whose held accuracy is poor - tests/lab's shard-zero run - so it stays
    # a finding.)
    if len(val) >= 3 and len(train) >= 3 and min(v for _, v in [*train, *val]) >= 0:
        tv = [v for _, v in train]
        vv = [v for _, v in val]
        vmin_i = min(range(len(vv)), key=vv.__getitem__)
        rising = _climbed(vv, vmin_i)
        train_falling = tv[-1] < tv[0] * 0.8
        gap = vv[-1] / max(tv[-1], 1e-9)
        streak = _val_rising_streak(train, val)
        # a validation loss that ends within a fifth of the training loss generalises as well as it trains: a climb off
        # its best that small is the last epochs' noise, not memorisation (healthy 636: 0.079 -> 0.093 beside 0.081)
        if ((train_falling and rising) or streak) and gap >= MEMORISED_GAP:
            p = val[-1][0]
            out.append(Anomaly(
                kind=AnomalyKind.TRAIN_VAL_DIVERGENCE, failure_class=FailureClass.EVALUATION_MISMATCH,
                severity=Severity.CRITICAL if gap > 3 else Severity.SIGNIFICANT,
                source=p.source, line_no=p.line_no, step=p.step,
                detail=(f"train loss fell {tv[0]:.4g} -> {tv[-1]:.4g} while validation loss climbed from its best "
                        f"{vv[vmin_i]:.4g} to {vv[-1]:.4g} ({gap:.1f}x train): memorisation - the model fits "
                        "what it trains on and not the validation data (too little or unrepresentative training data, "
                        "e.g. only some shards read)"),
            ))
    vacc = [(p, p.values["val_acc"]) for p in points if "val_acc" in p.values and _finite(p.values["val_acc"])]
    early_val = [(p, v) for p, v in val]
    if task in (None, Task.CLASSIFICATION) and vacc:
        scale = 100.0 if max(v for _, v in vacc) > 1.0 else 1.0
        n = max(1, len(vacc) // 5) if len(vacc) >= 5 else 1
        for p, v in vacc[:n]:
            if v >= 0.999 * scale:
                out.append(Anomaly(
                    kind=AnomalyKind.EARLY_PERFECT_VALIDATION, failure_class=FailureClass.EVALUATION_MISMATCH,
                    severity=Severity.SIGNIFICANT, source=p.source, line_no=p.line_no, step=p.step,
                    detail=(f"validation accuracy {v:g} already at the first evaluation (line {p.line_no}): "
                            "perfect validation this early usually means train/validation overlap (leakage) or a "
                            "trivial label"),
                ))
                break
    elif early_val and len(early_val) >= 1 and train:
        p, v = early_val[0]
        if v <= 1e-4 and train[0][1] > 0.1:
            out.append(Anomaly(
                kind=AnomalyKind.EARLY_PERFECT_VALIDATION, failure_class=FailureClass.EVALUATION_MISMATCH,
                severity=Severity.SIGNIFICANT, source=p.source, line_no=p.line_no, step=p.step,
                detail=f"validation loss {v:g} at the first evaluation: leakage or a trivial target",
            ))
    if task in (None, Task.CLASSIFICATION) and not out and (gap_found := _accuracy_gap(points) or _loss_and_accuracy_disagree(points)
                                                                   or _memorised(points)):
        out.append(gap_found)
    if task in (None, Task.CLASSIFICATION) and (frozen := _validation_frozen(points, vacc)):
        out.append(frozen)
    if task in (None, Task.CLASSIFICATION) and vacc and val and train:
        scale = 100.0 if max(v for _, v in vacc) > 1.0 else 1.0
        p, v = vacc[-1]
        learned = len(vacc) >= 3 and train[0][1] >= 2 * train[-1][1]  # not the first epochs of a hard task (1000 classes)
        if learned and v <= 0.05 * scale and val[-1][1] <= 1.5 * max(train[-1][1], 1e-9):
            # the loss says the model fits the evaluation data as well as the training data; the accuracy says it is
            # almost always wrong: the metric or the label mapping it compares against does not match the task
            out.append(Anomaly(
                kind=AnomalyKind.VALIDATION_METRIC_NEAR_ZERO, failure_class=FailureClass.EVALUATION_MISMATCH,
                severity=Severity.SIGNIFICANT, source=p.source, line_no=p.line_no, step=p.step,
                detail=(f"validation accuracy {v:g} (line {p.line_no}) while the validation loss {val[-1][1]:.4g} is no "
                        f"worse than the training loss {train[-1][1]:.4g}: the accuracy does not measure what the loss "
                        "does (a metric that does not fit the task, e.g. exact-match accuracy on multi-label or "
                        "regression outputs, or predictions compared with misaligned labels)"),
            ))
    return out
