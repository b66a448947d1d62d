"""A loss at a value only a network whose outputs ignore the input prints: -ln(FLT_MIN) (every sample's probability
underflowed), ln C (a uniform or chance guess over C classes), the entropy of a two-class prior (the majority class for
every input). Numbers that mean the same whatever the framework printed them."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from ml_skills.engine.analyse.frozen import UNIFORM_DIGITS, digits
from ml_skills.engine.analyse.points import at, finite, trailing_run
from ml_skills.models import Anomaly, AnomalyKind, FailureClass, MetricPoint, Severity

# -ln(FLT_MIN): the per-sample cross-entropy when the true class's probability underflows float32 and the loss clamps
# it there (Caffe's SoftmaxWithLoss, `-log(max(p, FLT_MIN))`); a frame loss weighted by k prints k times it
FLT_MIN_LOSS = -math.log(1.1754943508222875e-38)
CHANCE_LOGS = 3  # logs in a row at the uniform guess's loss
CHANCE_REL = 0.005  # within 0.5% of ln C: a network at its random start is there too, so time at it is what counts
CHANCE_EPOCHS = 2  # epochs spent there: no healthy classifier is still at chance two epochs in


def uniform_classes(v: float, rel: float) -> int | None:
    """C when v is the loss of a uniform guess over C classes (ln C) within `rel`, else None."""
    c = round(math.exp(v)) if 0.5 < v < 12 else 0
    return c if c >= 2 and abs(math.log(c) - v) <= rel * v else None


def _at_chance_accuracy(p: MetricPoint, classes: int, keys: tuple[str, ...] = ("acc", "val_acc")) -> bool:
    """An accuracy printed beside the loss sits at 1/C (as a fraction or a percent)."""
    accs = [v for k, v in p.values.items() if k in keys and finite(v)]
    return bool(accs) and all(abs((a / 100 if a > 1 else a) * classes - 1) <= 0.15 for a in accs)


def _at_chance(tail: Sequence[tuple[MetricPoint, float]], c: int, accs: tuple[str, ...]) -> bool:
    """The last CHANCE_LOGS losses at ln C with an accuracy of 1/C beside each, over CHANCE_EPOCHS epochs or more."""
    epochs = [p.epoch for p, _ in tail if p.epoch is not None]
    return (len(tail) == CHANCE_LOGS and all(uniform_classes(v, CHANCE_REL) == c and _at_chance_accuracy(p, c, accs) for p, v in tail)
            and len(epochs) == len(tail) and epochs[-1] - epochs[0] >= CHANCE_EPOCHS)


def _chance_on_validation(points: Sequence[MetricPoint]) -> tuple[MetricPoint, float, str] | None:
    """The held-out reading of a guess no better than chance: the validation loss at ln C and the validation accuracy
    at 1/C at the last evaluations, two epochs or more apart. Measured on the whole held-out set, it is steadier than a
    training loss read from noisy batches (a Keras run whose val_accuracy is 0.5000 at epoch after epoch beside a
    val_loss of 0.693, while its per-epoch training loss wanders 0.686-0.708)."""
    s = [(p, p.values["val_loss"]) for p in points if "val_loss" in p.values and finite(p.values["val_loss"])]
    tail = s[-CHANCE_LOGS:]
    c = uniform_classes(tail[-1][1], CHANCE_REL) if tail else None
    if c is None or not _at_chance(tail, c, ("val_acc",)):
        return None
    epochs = [p.epoch for p, _ in tail if p.epoch is not None]
    return tail[0][0], tail[-1][1], (f"= ln {c} with a validation accuracy of 1/{c} at the last {len(tail)} "
                                     f"evaluations, {epochs[-1] - epochs[0]:g} epochs: a guess no better than chance on held-out data")


PINNED_REL = 0.001  # within 0.1% of ln C...
PINNED_EPOCHS = 4  # ...at one log per epoch or more, over this many epochs: no start-up sits at chance that long


PINNED_BOTH_LOGS = 8  # training logs, and evaluations, in a row at ln C when the log prints no counter


def _pinned_with_validation(points: Sequence[MetricPoint], c: int) -> MetricPoint | None:
    """The first of the last PINNED_BOTH_LOGS training losses when they and as many validation losses all sit at ln C
    within PINNED_REL: a log that prints no epoch (its header on a line of its own) still shows the network answering
    uniformly once the held-out loss, computed after training steps, is there too (1496: 4.6053-4.6054 beside 'test
    loss = 4.6054', err 99%)."""
    near = lambda v: abs(v - math.log(c)) <= PINNED_REL * math.log(c)
    train = [p for p in points if "loss" in p.values and finite(p.values["loss"])][-PINNED_BOTH_LOGS:]
    held = [p for p in points if "val_loss" in p.values and finite(p.values["val_loss"])][-PINNED_BOTH_LOGS:]
    if len(train) < PINNED_BOTH_LOGS or len(held) < PINNED_BOTH_LOGS:
        return None
    if not all(near(p.values["loss"]) for p in train) or not all(near(p.values["val_loss"]) for p in held):
        return None
    return train[0]


def _pinned_at_chance(s: Sequence[tuple[MetricPoint, float]], c: int) -> tuple[MetricPoint, float] | None:
    """(first point, epochs) when the loss sits at ln C within PINNED_REL at every log of the last PINNED_EPOCHS epochs
    or more (one log per epoch at least): a network answering uniformly, even where the accuracy printed beside it is
    not 1/C (SiaNet's MNIST example, 1312: 2.3021-2.3022 for nine epochs beside an element-wise 'Accuracy' of 0.89)."""
    run = list(itertools.takewhile(lambda t: t[0].epoch is not None and abs(t[1] - math.log(c)) <= PINNED_REL * math.log(c),
                                   reversed(s)))
    epochs = {p.epoch for p, _ in run}
    if len(epochs) < PINNED_EPOCHS + 1 or max(epochs) - min(epochs) < PINNED_EPOCHS:  # type: ignore[type-var,operator]
        return None
    return run[-1][0], max(epochs) - min(epochs)  # type: ignore[type-var,operator,return-value]


def loss_collapsed(points: Sequence[MetricPoint]) -> Anomaly | None:
    """The loss pinned at a value that only a collapsed network prints: its outputs no longer depend on the input.

    Four readings, each of a number that means something whatever the framework: 87.3365 (or a weighted multiple),
    -ln(FLT_MIN), the clamped loss of a probability that underflowed for every sample; ln C to five or more printed
    digits log after log, after another value, a prediction exactly uniform over C classes (all logits equal); and ln C with an
    accuracy of 1/C beside it for two epochs or more, a guess no better than chance long after any start-up (read from the
    validation loss and accuracy too).
    """
    s = [(p, p.values["loss"]) for p in points if "loss" in p.values and finite(p.values["loss"])]
    if len(s) < 2:
        return None
    tail = s[-CHANCE_LOGS:]
    first, last = tail[0][0], tail[-1][1]
    why = None
    if len(tail) >= 2 and all(abs(v / FLT_MIN_LOSS - round(v / FLT_MIN_LOSS)) * FLT_MIN_LOSS <= 5e-4 * max(1, round(v / FLT_MIN_LOSS))
                              and 1 <= round(v / FLT_MIN_LOSS) <= 1000 for _, v in s[-2:]):
        first = s[-2][0]
        why = (f"= {round(last / FLT_MIN_LOSS)} x 87.3365, -ln(FLT_MIN): " if round(last / FLT_MIN_LOSS) > 1 else "= -ln(FLT_MIN), ") + \
            "the loss clamped where the true class's probability underflowed to zero for every sample"
    elif (c := uniform_classes(last, CHANCE_REL)) is not None:
        # exact: among the last logs (a smoothed average may be printed between them), at least CHANCE_LOGS at ln C
        # to every one of five or more printed digits, the newest of the last two among them
        exact = [(p, v) for p, v in s[-3 * CHANCE_LOGS:] if v > 0 and digits(v) >= UNIFORM_DIGITS  # a loss of 0 or below is no ln C
                 and abs(v - math.log(c)) <= 10 ** (math.floor(math.log10(v)) - digits(v) + 1)]  # one unit of the last digit
        epochs = [p.epoch for p, _ in tail if p.epoch is not None]
        chance = _at_chance(tail, c, ("acc", "val_acc"))
        # ...and a different loss before them: a head initialised at zero prints ln C exactly at its first steps
        moved = bool(exact) and any(v != exact[0][1] for _, v in s[: s.index(exact[0])])
        if len(exact) >= CHANCE_LOGS and moved and exact[-1][0] in (p for p, _ in s[-2:]):
            first, last = exact[0][0], exact[-1][1]
            why = f"= ln {c} to every printed digit, the loss of a prediction exactly uniform over {c} classes (all logits equal)"
        elif chance:
            why = f"= ln {c} with an accuracy of 1/{c} beside it for {epochs[-1] - epochs[0]:g} epochs: a guess no better than chance"
        elif (pinned := _pinned_at_chance(s, c)) is not None:
            first, n_epochs = pinned
            why = (f"= ln {c} (within {PINNED_REL:.1%}) at every epoch's log for {n_epochs:g} epochs: the loss of a uniform "
                   f"guess over {c} classes, whatever an accuracy beside it says")
        elif (both := _pinned_with_validation(points, c)) is not None:
            first = both
            why = (f"= ln {c} (within {PINNED_REL:.1%}) at each of the last {PINNED_BOTH_LOGS} training logs and the "
                   f"validation loss there too: a uniform guess over {c} classes after whole evaluations, no start-up")
    what = "training loss"
    if why is None and (held := _chance_on_validation(points)) is not None:
        (first, last, why), what = held, "validation loss"
    if why is None:
        return None
    return Anomaly(
        kind=AnomalyKind.LOSS_FROZEN, failure_class=FailureClass.OPTIMIZATION_DIVERGENCE, severity=Severity.SIGNIFICANT,
        source=first.source, line_no=first.line_no, step=first.step,
        detail=(f"{what} {last:g} {why}, from {at(first)} (line {first.line_no}) to the end: the network's outputs "
                "collapsed and no longer depend on the input - typically a learning rate too high for the model, outputs "
                "on the wrong scale, or labels the loss cannot reach"),
    )


PRIOR_EVALS = 10  # evaluations in a row with one validation accuracy, to every printed digit
PRIOR_REL = 0.02  # the training loss within 2% of the entropy of a two-class prior that accuracy is the share of


def _entropy(m: float) -> float:
    return -(m * math.log(m) + (1 - m) * math.log(1 - m))


def predicting_the_prior(points: Sequence[MetricPoint]) -> Anomaly | None:
    """A two-class model that answers the majority class for every input: its validation accuracy stays at one value
    (the majority's share m) evaluation after evaluation, and its training loss sits at the entropy of a prior of m,
    -(m ln m + (1-m) ln(1-m)), the cross-entropy of predicting the class frequencies and nothing else.

    A model that learns moves both: its accuracy by a printed digit, its loss away from the prior's. Both still, at
    PRIOR_EVALS evaluations, mean the outputs do not depend on the input (a dead network, features that are all
    zero or lost before the classifier, a learning rate too high or too low to leave the constant solution)."""
    vacc = [(p, p.values["val_acc"]) for p in points if "val_acc" in p.values and finite(p.values["val_acc"])]
    run = trailing_run(vacc)
    if len(run) < PRIOR_EVALS or digits(run[-1][1]) < 3:
        return None
    m = run[-1][1] / (100.0 if run[-1][1] > 1.0 else 1.0)
    m = max(m, 1 - m)
    first = run[0][0]
    # the losses of the stretch's last evaluations (its first epoch may still be leaving the initialisation's loss)
    losses = [p.values["loss"] for p in points if p.line_no >= first.line_no and "loss" in p.values and finite(p.values["loss"])]
    losses = losses[-PRIOR_EVALS:]
    if not 0.5 <= m < 0.95 or len(losses) < PRIOR_EVALS:
        return None
    prior = _entropy(m)
    if any(abs(v - prior) > PRIOR_REL * prior for v in losses):
        return None
    return Anomaly(
        kind=AnomalyKind.LOSS_FROZEN, failure_class=FailureClass.OPTIMIZATION_DIVERGENCE, severity=Severity.SIGNIFICANT,
        source=first.source, line_no=first.line_no, step=first.step,
        detail=(f"validation accuracy {run[-1][1]:g} at each of the last {len(run)} evaluations from {at(first)} (line "
                f"{first.line_no}) while the training loss stays at {losses[-1]:.4g}, the entropy {prior:.4f} of a "
                f"two-class prior of {m:.4g}: the model answers the majority class for every input - its outputs do not "
                "depend on the input (a dead network, features lost before the classifier, a learning rate that never "
                "leaves the constant solution)"),
    )
