"""A loss that blows up without (yet) becoming NaN: a rise that stays, a jump by orders of
magnitude, an absurd magnitude. Each is cited where the rise began, not at its peak. Also a loss
that no longer moves at all: a network whose outputs saturated after such an upset."""

from __future__ import annotations

import bisect
import itertools
import math
import statistics
from collections.abc import Sequence

from ml_skills.engine.analyse.points import at, finite, trailing_run
from ml_skills.models import Anomaly, AnomalyKind, FailureClass, MetricPoint, Severity


def loss_blowup(points: Sequence[MetricPoint]) -> Anomaly | None:
    s = [(p, p.values["loss"]) for p in points if "loss" in p.values and finite(p.values["loss"])]
    # no run starts at a loss of exactly 0: zeros before its first positive loss are an aborted launch's epoch that
    # trained no batch (appended above the run that resumed), not a low to rise from
    s = s[next((k for k, (_, v) in enumerate(s) if v != 0.0), len(s)) :]
    if len(s) < 8:
        return None
    vals = [v for _, v in s]
    # the low is read through a median of three neighbours: one lucky minibatch (a per-batch loss that dips to half
    # its level once) is noise, and measuring the rise from it turns ordinary batch-to-batch spread into a blow-up
    smooth = [statistics.median(vals[i - 1 : i + 2]) if 0 < i < len(vals) - 1 else v for i, v in enumerate(vals)]
    low_i = min(range(len(vals)), key=smooth.__getitem__)
    low = smooth[low_i]
    after = s[low_i + 1 :]
    if not after:
        return None
    p, high = max(after, key=lambda t: t[1])
    first = vals[0]
    tail = statistics.median(vals[-max(2, len(vals) // 10) :])
    floor = max(abs(low), 1e-3)
    if high > 3 * floor and high > first * 1.2 and tail > 2 * floor and _level_rose(vals, low_i):
        o = _blowup_onset(after, max(3 * floor, first * 1.2), 2 * floor) or p
        if _accuracy_held(points, o):
            return None
        rise = "" if o is p else f"from {at(o)} (line {o.line_no}, {o.values['loss']:.4g}) "
        return Anomaly(
            kind=AnomalyKind.LOSS_BLOWUP, failure_class=FailureClass.OPTIMIZATION_DIVERGENCE,
            severity=Severity.CRITICAL,
            source=o.source, line_no=o.line_no, step=o.step,
            detail=(f"loss fell to {low:.4g} then rose {rise}to {high:.4g} at {at(p)} (line {p.line_no}) "
                    f"and stays high (recent median {tail:.4g}, above its start {first:.4g}): divergence without NaN"),
        )
    return None


HELD = 0.9  # a training accuracy still at nine tenths of its best has not diverged


def _accuracy_held(points: Sequence[MetricPoint], onset: MetricPoint) -> bool:
    """The training accuracy printed beside the loss stayed near its best through the rise: the loss only moved
    within the noise of a model that fits its data (0.002 to 0.04 at 99.6% accuracy, a warm restart's bump).
    A diverging model loses its accuracy with its loss; with fewer than three accuracies after the onset, the loss
    decides alone."""
    before = [p.values["acc"] for p in points if "acc" in p.values and finite(p.values["acc"]) and p.line_no < onset.line_no]
    later = [p.values["acc"] for p in points if "acc" in p.values and finite(p.values["acc"]) and p.line_no >= onset.line_no]
    return bool(before) and len(later) >= 3 and max(before) > 0 and min(later) >= HELD * max(before)


def _level_rose(vals: list[float], low_i: int) -> bool:
    """The loss's level rose and stayed: the mean of its last window is twice the lowest mean of any window as long,
    or no value after the low ever came back within 3x of it.

    Single values swing: a per-batch loss over two samples goes from 0.2 to 3.7 and back in a healthy run (healthy
    021). Means over windows of an eighth of the log (at least 3 logs) smooth that spread away; a blow-up moves them.
    A loss that jumps at its second step and then decays, still far above where it began, has no low window to rise
    from: that every later value stays far above the low is the rise (the lab's Adam at lr 3.0).
    """
    w = max(3, len(vals) // 8)
    if len(vals) < 2 * w:
        return True  # too few logs for two windows: the median checks above decide alone
    sums = [sum(vals[i : i + w]) for i in range(len(vals) - w + 1)]
    if sums[-1] / w > 2 * max(abs(min(sums) / w), 1e-3):
        return True
    later = vals[low_i + 1 :]
    return bool(later) and min(later) > 3 * max(abs(vals[low_i]), 1e-3)


def _blowup_onset(after: Sequence[tuple[MetricPoint, float]], high: float, stay: float) -> MetricPoint | None:
    """The first point of the rise that never came back: where the divergence began, not its peak.

    A blow-up is cited where it started (the first loss above `high` after which the loss never fell
    back below `stay`), so the quoted line is the step that went wrong first, as for any cascade.
    """
    low_after = list(itertools.accumulate((v for _, v in reversed(after)), min))[::-1]  # min of after[i:]
    return next((q for (q, v), m in zip(after, low_after) if v > high and m > stay), None)


def loss_jump(points: Sequence[MetricPoint]) -> Anomaly | None:
    """A loss that jumps by orders of magnitude in one logging interval and stays up.

    Needs only three points, so it also reads a short pasted excerpt: a finite loss that goes
    from its usual range to 100x its previous median (and never comes back below 10x) is an
    explosion whatever the log's length; a transient spike that recovers is left to the others.
    """
    s = [(p, p.values["loss"]) for p in points if "loss" in p.values and finite(p.values["loss"])]
    if len(s) < 3:
        return None
    low_after = list(itertools.accumulate((v for _, v in reversed(s)), min))[::-1]  # min of s[i:]
    seen = sorted(abs(v) for _, v in s[:2])  # |loss| before i, kept sorted: the median in O(1), insertion by bisect
    for i in range(2, len(s)):
        n = len(seen)
        base = seen[n // 2] if n % 2 else (seen[n // 2 - 1] + seen[n // 2]) / 2
        p, v = s[i]
        bisect.insort(seen, abs(v))
        if base > 0 and v > 100 * base and v > 10 and low_after[i] > 10 * base:
            peak = max(w for _, w in s[i:])
            return Anomaly(
                kind=AnomalyKind.LOSS_BLOWUP, failure_class=FailureClass.OPTIMIZATION_DIVERGENCE,
                severity=Severity.CRITICAL, source=p.source, line_no=p.line_no, step=p.step,
                detail=(f"loss jumped from a median {base:.4g} to {v:.4g} at {at(p)} (line {p.line_no}) "
                        f"and stayed up (peak {peak:.4g}): the optimisation exploded (learning rate too high for this "
                        "phase, no gradient clipping, or a bad batch)"),
            )
    return None


ABSURD_LOSS = 1e20  # above any healthy objective: even an MSE on raw prices in the billions stays near 1e18
BLOWN = 1e6  # a loss and a gradient norm both above a million, log after log: the weights are far out of range


def loss_absurd(points: Sequence[MetricPoint]) -> Anomaly | None:
    """A finite loss of astronomical size that never comes down: divergence even with no rise to see.

    A run whose loss exploded inside its first logging interval (or before the log's excerpt begins)
    shows no jump and no fall-then-rise, only a flat 3e31. No objective of a working run reaches
    1e20; when every recent value is above it, the optimisation diverged and never recovered.
    Below that, a loss in the millions alone can be a healthy objective's scale (an ELBO, a sum over
    a corpus), but not together with a gradient norm in the millions on the same lines: then the
    parameters are out of range and clipped updates no longer bring the loss down.
    """
    found = _absurd_tail(points)
    if found is None:
        return None
    p, v, last, why = found
    return Anomaly(
        kind=AnomalyKind.LOSS_BLOWUP, failure_class=FailureClass.OPTIMIZATION_DIVERGENCE,
        severity=Severity.CRITICAL, source=p.source, line_no=p.line_no, step=p.step,
        detail=(f"loss is {v:.4g} at {at(p)} (line {p.line_no}) and stays above {why} to the end "
                f"(last {last:.4g}): the optimisation diverged and never recovered (learning rate, "
                "unnormalised inputs or targets, or a loss on the wrong scale)"),
    )


def _absurd_tail(points: Sequence[MetricPoint]) -> tuple[MetricPoint, float, float, str] | None:
    """The first point of the astronomical stretch, its loss, the last loss, and what made it astronomical."""
    for key in ("loss", "val_loss"):  # the training loss first: it is what the optimiser sees
        s = [(p, p.values[key]) for p in points if key in p.values and finite(p.values[key])]
        if len(s) >= 3 and all(abs(v) >= ABSURD_LOSS for _, v in s[-max(3, len(s) // 10):]):
            p, v = next((p, v) for p, v in s if abs(v) >= ABSURD_LOSS)
            return p, v, s[-1][1], f"{ABSURD_LOSS:.0e}"
    both = [(p, p.values["loss"], p.values["grad_norm"]) for p in points
            if finite(p.values.get("loss", math.nan)) and finite(p.values.get("grad_norm", math.nan))]
    tail = both[-max(1, len(both) // 10):]
    if both and all(abs(v) >= BLOWN and g >= BLOWN for _, v, g in tail):
        i = len(both) - len(tail)
        while i > 0 and abs(both[i - 1][1]) >= BLOWN and both[i - 1][2] >= BLOWN:
            i -= 1
        p, v, _ = both[i]
        return p, v, both[-1][1], f"{BLOWN:.0e}, its gradient norm too"
    return None


FROZEN_LOGS = 5
FROZEN_DIGITS = 4  # significant digits printed: a loss shown as '0.69' may repeat in a slow healthy run, '0.6931' does not


def _digits(v: float) -> int:
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
    marks = {(p.epoch, p.step) for p, _ in run if p.step is not None or p.epoch is not None}
    logs = len(marks) if marks else len(run)
    if logs < FROZEN_LOGS or abs(last) < 0.01 or _digits(last) < FROZEN_DIGITS:
        return None
    moved = len(run) < len(s)  # the loss changed before it froze: a run that was training stopped changing
    newest, first = run[-1][0], run[0][0]
    others = {k for k in newest.values if k not in ("loss", "lr")}
    epochs = {p.epoch for p, _ in run if p.epoch is not None}
    if not moved and len(epochs) < FROZEN_LOGS and not any(all(p.values.get(k) == newest.values[k] for p, _ in run) for k in others):
        return None  # a constant that never moved, over a few steps, with no second metric frozen beside it, need not be a network
    chance = next((k for k in range(2, 1001) if abs(math.log(k) - last) < 5e-4), None)
    why = f" = ln {chance}, the loss of a uniform guess over {chance} classes" if chance else ""
    return Anomaly(
        kind=AnomalyKind.LOSS_FROZEN, failure_class=FailureClass.OPTIMIZATION_DIVERGENCE, severity=Severity.SIGNIFICANT,
        source=first.source, line_no=first.line_no, step=first.step,
        detail=(f"training loss {last:g}{why} at each of the last {logs} logs from {at(first)} (line {first.line_no}): "
                "the network no longer changes - its outputs saturated (collapsed softmax, dead units) and no gradient "
                "flows, typically after a learning rate too high for the model or outputs on the wrong scale"),
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
        while n < min(len(before), len(again)) and before[n] == again[n][1] and _digits(before[n]) >= REPLAY_DIGITS:
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

# -ln(FLT_MIN): the per-sample cross-entropy when the true class's probability underflows float32 and the loss clamps
# it there (Caffe's SoftmaxWithLoss, `-log(max(p, FLT_MIN))`); a frame loss weighted by k prints k times it
FLT_MIN_LOSS = -math.log(1.1754943508222875e-38)
CHANCE_LOGS = 3  # logs in a row at the uniform guess's loss
CHANCE_REL = 0.005  # within 0.5% of ln C: a network at its random start is there too, so time at it is what counts
CHANCE_EPOCHS = 2  # epochs spent there: no healthy classifier is still at chance two epochs in
UNIFORM_DIGITS = 5  # ln C printed to this many digits, log after log: outputs exactly uniform (zero logits)


def _uniform_classes(v: float, rel: float) -> int | None:
    """C when v is the loss of a uniform guess over C classes (ln C) within `rel`, else None."""
    c = round(math.exp(v)) if 0.5 < v < 12 else 0
    return c if c >= 2 and abs(math.log(c) - v) <= rel * v else None


def _at_chance_accuracy(p: MetricPoint, classes: int) -> bool:
    """An accuracy printed beside the loss sits at 1/C (as a fraction or a percent)."""
    accs = [v for k, v in p.values.items() if k in ("acc", "val_acc") and finite(v)]
    return bool(accs) and all(abs((a / 100 if a > 1 else a) * classes - 1) <= 0.15 for a in accs)


def loss_collapsed(points: Sequence[MetricPoint]) -> Anomaly | None:
    """The loss pinned at a value that only a collapsed network prints: its outputs no longer depend on the input.

    Three readings, each of a number that means something whatever the framework: 87.3365 (or a weighted multiple),
    -ln(FLT_MIN), the clamped loss of a probability that underflowed for every sample; ln C to five or more printed
    digits log after log, after another value, a prediction exactly uniform over C classes (all logits equal); and ln C with an
    accuracy of 1/C beside it for two epochs or more, a guess no better than chance long after any start-up.
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
    elif (c := _uniform_classes(last, CHANCE_REL)) is not None:
        # exact: among the last logs (a smoothed average may be printed between them), at least CHANCE_LOGS at ln C
        # to every one of five or more printed digits, the newest of the last two among them
        exact = [(p, v) for p, v in s[-3 * CHANCE_LOGS:] if _digits(v) >= UNIFORM_DIGITS
                 and abs(v - math.log(c)) <= 10 ** (math.floor(math.log10(v)) - _digits(v) + 1)]  # one unit of the last digit
        epochs = [p.epoch for p, _ in tail if p.epoch is not None]
        chance = (len(tail) == CHANCE_LOGS and all(_uniform_classes(v, CHANCE_REL) == c and _at_chance_accuracy(p, c) for p, v in tail)
                  and len(epochs) == len(tail) and epochs[-1] - epochs[0] >= CHANCE_EPOCHS)
        # ...and a different loss before them: a head initialised at zero prints ln C exactly at its first steps
        moved = bool(exact) and any(v != exact[0][1] for _, v in s[: s.index(exact[0])])
        if len(exact) >= CHANCE_LOGS and moved and exact[-1][0] in (p for p, _ in s[-2:]):
            first, last = exact[0][0], exact[-1][1]
            why = f"= ln {c} to every printed digit, the loss of a prediction exactly uniform over {c} classes (all logits equal)"
        elif chance:
            why = f"= ln {c} with an accuracy of 1/{c} beside it for {epochs[-1] - epochs[0]:g} epochs: a guess no better than chance"
    if why is None:
        return None
    return Anomaly(
        kind=AnomalyKind.LOSS_FROZEN, failure_class=FailureClass.OPTIMIZATION_DIVERGENCE, severity=Severity.SIGNIFICANT,
        source=first.source, line_no=first.line_no, step=first.step,
        detail=(f"training loss {last:g} {why}, from {at(first)} (line {first.line_no}) to the end: the network's outputs "
                "collapsed and no longer depend on the input - typically a learning rate too high for the model, outputs "
                "on the wrong scale, or labels the loss cannot reach"),
    )


COLLAPSE_TO = 0.2  # training accuracy under a fifth of its level (10 classes: from 90% to chance)...
COLLAPSE_STAYS = 0.3  # ...and never back above 30% of it
COLLAPSE_LEVEL = 0.3  # the level a run must have reached (of 1, or of 100) for its fall to mean anything


def accuracy_collapse(points: Sequence[MetricPoint]) -> Anomaly | None:
    """Training accuracy that falls from the level it had reached to near nothing in one logging interval and stays
    there: the weights were wrecked by an update (a loss that can reward a degenerate solution, a too-large step),
    whether or not the loss shows it (a distillation or contrastive loss may even fall). Needs three points before
    the fall and one after it, so it reads a pasted excerpt too."""
    s = [(p, p.values["acc"]) for p in points if "acc" in p.values and finite(p.values["acc"])]
    if len(s) < 5:
        return None
    scale = 100.0 if max(v for _, v in s) > 1.0 else 1.0
    high_after = list(itertools.accumulate((v for _, v in reversed(s)), max))[::-1]  # max of s[i:]
    for i in range(3, len(s) - 1):
        level = statistics.median(v for _, v in s[max(0, i - 10):i])
        p, v = s[i]
        if level >= COLLAPSE_LEVEL * scale and v < COLLAPSE_TO * level and high_after[i] < COLLAPSE_STAYS * level:
            return Anomaly(
                kind=AnomalyKind.ACCURACY_COLLAPSE, failure_class=FailureClass.OPTIMIZATION_DIVERGENCE,
                severity=Severity.CRITICAL, source=p.source, line_no=p.line_no, step=p.step,
                detail=(f"training accuracy fell from {level:.4g} to {v:.4g} at {at(p)} (line {p.line_no}) and stayed "
                        f"under {high_after[i]:.4g} for the next {len(s) - i - 1} logged values: the training collapsed "
                        "(an update wrecked the weights: a learning rate too high for this phase, no gradient clipping, "
                        "or a loss a degenerate solution can satisfy)"),
            )
    return None
